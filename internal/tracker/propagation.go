package tracker

import (
	"sort"
	"time"
)

// ServedPod is the compact record of a pod that the endpoint tracker reads.
type ServedPod struct {
	UID, Namespace, Name string
	Ready                bool // the Ready condition is True
	Terminating          bool // deletionTimestamp set
	// Services names the Services of the pod's namespace that select it and
	// publish it by readiness: a non-empty selector (selector-less Services
	// have hand-managed endpoints) and publishNotReadyAddresses false (with
	// it, the EndpointSlice controller publishes pods as ready whether or not
	// they are, and keeps terminating ones, so there is no Ready-to-endpoint
	// delay to measure).
	Services []string
}

// serving is what the EndpointSlice controller publishes as ready=true
// (without publishNotReadyAddresses): Ready and not terminating.
func (p *ServedPod) serving() bool { return p.Ready && !p.Terminating }

// Slice is the compact record of an EndpointSlice.
type Slice struct {
	UID, Namespace, Name string
	Service              string // the kubernetes.io/service-name label
	// Ready lists the UIDs of the pods that are ready endpoints of the slice:
	// conditions.ready true (nil reads as true, per the API) and not
	// terminating.
	Ready []string
	// TriggerTime is the endpoints.kubernetes.io/last-change-trigger-time
	// annotation (one-second precision, set from pod times written by the
	// node); zero when absent.
	TriggerTime time.Time
}

// EndpointConfig configures an EndpointTracker.
type EndpointConfig struct {
	// Thresholds are the propagation thresholds in seconds, ascending: the
	// bucket boundaries of the propagation histogram.
	Thresholds []float64
}

// EndpointEventType says what an EndpointEvent reports.
type EndpointEventType int

// Endpoint event types.
const (
	// EndpointPropagated: the pod became a ready endpoint of Service,
	// Duration after it was due (it turned Ready, or the Service started
	// selecting it while Ready).
	EndpointPropagated EndpointEventType = iota
	// EndpointPropagationCrossed: a due pod was still not a ready endpoint
	// of Service when Thresholds[Threshold] passed.
	EndpointPropagationCrossed
	// EndpointRemoved: the pod stopped being a ready endpoint of Service,
	// Duration after it stopped being Ready, started terminating or was
	// deleted.
	EndpointRemoved
	// EndpointTriggerLag: a slice update arrived Duration after its
	// last-change-trigger-time (an estimate, one-second precision).
	EndpointTriggerLag
	// EndpointPairDue: a pair became due and is not published yet; sinks
	// create its namespace's series at zero so that its first crossing is
	// seen by rate().
	EndpointPairDue
)

// EndpointEvent is an observation of the endpoint tracker.
type EndpointEvent struct {
	Type      EndpointEventType
	Namespace string
	// Service, PodUID and PodName identify the pair (not for trigger lag).
	Service, PodUID, PodName string
	Slice                    string // EndpointTriggerLag: the slice's name
	Duration                 time.Duration
	Threshold                int // EndpointPropagationCrossed: index into EndpointConfig.Thresholds
}

// EndpointTracker times the EndpointSlice side of the chain, per (pod,
// Service) pair: propagation (Ready to ready endpoint), removal (not Ready,
// terminating or deleted to no longer a ready endpoint), and the slices'
// trigger lag. It is not safe for concurrent use.
//
// Timing is by receive times. A pair is due when the pod turned Ready or,
// for a Ready pod, when the Service started selecting it (a Service created
// after its pods, a selector change), whichever is later; it is observed
// once per Ready transition. Pod and slice updates come on separate watches,
// so a slice update may arrive before the pod update that caused it: the
// pair then counts 0, never negative. A pod selected by no Service is not
// tracked.
//
// Gaps ("listed": delivered by a list cycle, the initial list or a relist;
// deletions learned from a list are tombstones). A transition that arrives
// listed happened at an unknown time in a gap, so it is not observed, not as
// 0 s, not at all: a pod that turned Ready, or a Service that started
// selecting it, is not due; a pending pair published by a listed slice
// closes without an observation (the pod's own live Ready event can precede
// the initial replay of the slices, which used to leave such pairs pending
// forever, crossing every threshold); a removal seen listed is not timed.
// Crossings already counted by Tick while the watch was cut stand.
//
// Receive times out of order: as for pods (see PodTracker), a pair
// published with a receive time before a Tick that counted a crossing of
// its pending spell is timed at that Tick, so it counts once per threshold.
type EndpointTracker struct {
	cfg    EndpointConfig
	thr    []time.Duration
	pods   map[string]*servedPod      // by pod UID: pods with pairs or pending removals
	slices map[string]*sliceState     // by slice UID
	bySvc  map[string]map[string]bool // "namespace/service" -> slice UIDs
	due    dueIndex[*pair]            // pending pairs by next crossing deadline
}

type servedPod struct {
	namespace, name string
	serving         bool      // Ready and not terminating, as last seen
	goneAt          time.Time // receive time of the turn away from serving
	deleted         bool
	pairs           map[string]*pair // by Service name
}

type pair struct {
	uid, svc  string
	sp        *servedPod
	published bool // a ready endpoint in a slice of the Service now
	// publishedInSpell: published at some point of the pod's current
	// serving spell (to tell a slice ahead of the pod update at removal).
	publishedInSpell bool
	pending          bool      // due and not yet published
	dueAt            time.Time // when pending
	next             int       // next threshold index, when pending
	crossedAt        time.Time // the latest time a crossing of the pending spell was counted
	removing         bool      // pod stopped serving while published
	item             dueItem[*pair]
}

type sliceState struct {
	namespace, name, service string
	ready                    map[string]bool
	trigger                  time.Time
}

// NewEndpointTracker returns a tracker.
func NewEndpointTracker(cfg EndpointConfig) *EndpointTracker {
	return &EndpointTracker{cfg: cfg, thr: durations(cfg.Thresholds), pods: map[string]*servedPod{},
		slices: map[string]*sliceState{}, bySvc: map[string]map[string]bool{}}
}

// ObservePod takes the current record of a pod, received at now. listed is
// true for records delivered by a list cycle. Call it again when the
// Services selecting the pod change (listed false: the Service change was
// received live at now).
func (t *EndpointTracker) ObservePod(p ServedPod, seen Seen) []EndpointEvent {
	now, listed := seen.At, !seen.Live
	sp := t.pods[p.UID]
	if sp == nil {
		if len(p.Services) == 0 {
			return nil // no Service selects it: not endpoint-tracked
		}
		// First seen serving (a list, or selected for the first time):
		// when it turned Ready is unknown; a new pair is due from selection.
		sp = &servedPod{namespace: p.Namespace, serving: p.serving(), pairs: map[string]*pair{}}
		t.pods[p.UID] = sp
	}
	sp.name = p.Name
	var evs []EndpointEvent
	selected := map[string]bool{}
	for _, s := range p.Services {
		selected[s] = true
	}
	// Pairs no longer selected end: a pending propagation counted its time.
	for _, svc := range sortedKeys(sp.pairs) {
		if !selected[svc] {
			if pr := sp.pairs[svc]; pr.pending && !listed {
				evs = t.crossPair(evs, pr, now)
			}
			t.dropPair(sp, svc)
		}
	}
	// Serving transitions of the pairs that stay.
	switch serving := p.serving(); {
	case serving && !sp.serving:
		sp.serving = true
		for _, svc := range sortedKeys(sp.pairs) {
			pr := sp.pairs[svc]
			pr.removing = false // back before it was removed: it never was
			pr.publishedInSpell = pr.published
			evs = t.becameDue(evs, pr, now, !listed)
		}
	case !serving && sp.serving:
		evs = t.stopServing(evs, sp, now, !listed)
	}
	// New pairs.
	for _, svc := range p.Services {
		if sp.pairs[svc] != nil {
			continue
		}
		pr := &pair{uid: p.UID, svc: svc, sp: sp, published: t.published(p.Namespace, svc, p.UID)}
		pr.item = newDueItem(p.UID+"/"+svc, pr)
		sp.pairs[svc] = pr
		if sp.serving {
			pr.publishedInSpell = pr.published
			evs = t.becameDue(evs, pr, now, !listed)
		}
	}
	t.forgetIfDone(p.UID, sp)
	return evs
}

// DeletePod takes a pod's deletion. A pod deleted while serving (deleted
// without a grace period) stops serving now; its pairs still published stay
// tracked until the slices drop it. live is false for a delete tombstone (the
// deletion happened during a gap): nothing is timed from it.
func (t *EndpointTracker) DeletePod(uid string, seen Seen) []EndpointEvent {
	now, live := seen.At, seen.Live
	sp := t.pods[uid]
	if sp == nil {
		return nil
	}
	var evs []EndpointEvent
	if sp.serving {
		evs = t.stopServing(evs, sp, now, live)
	}
	sp.deleted = true
	for _, svc := range sortedKeys(sp.pairs) {
		if pr := sp.pairs[svc]; !pr.removing {
			if pr.pending && live {
				evs = t.crossPair(evs, pr, now)
			}
			t.dropPair(sp, svc)
		}
	}
	t.forgetIfDone(uid, sp)
	return evs
}

// ObserveSlice takes the current record of an EndpointSlice, received at
// now; listed is true for records delivered by a list cycle.
func (t *EndpointTracker) ObserveSlice(s Slice, seen Seen) []EndpointEvent {
	now, listed := seen.At, !seen.Live
	var evs []EndpointEvent
	old := t.slices[s.UID]
	if !listed && !s.TriggerTime.IsZero() && (old == nil || !old.trigger.Equal(s.TriggerTime)) {
		evs = append(evs, EndpointEvent{Type: EndpointTriggerLag, Namespace: s.Namespace, Service: s.Service, Slice: s.Name,
			Duration: max(0, now.Sub(s.TriggerTime))})
	}
	st := &sliceState{namespace: s.Namespace, name: s.Name, service: s.Service, ready: make(map[string]bool, len(s.Ready)), trigger: s.TriggerTime}
	for _, uid := range s.Ready {
		st.ready[uid] = true
	}
	return t.replaceSlice(evs, s.UID, old, st, now, !listed)
}

// DeleteSlice takes an EndpointSlice's deletion: its endpoints are no
// longer published (unless another slice of the Service lists them). live
// is false for a delete tombstone.
func (t *EndpointTracker) DeleteSlice(uid string, seen Seen) []EndpointEvent {
	now, live := seen.At, seen.Live
	old := t.slices[uid]
	if old == nil {
		return nil
	}
	return t.replaceSlice(nil, uid, old, nil, now, live)
}

// Tick reports the thresholds that due pairs crossed by now. Crossings are
// also flushed before every propagation observation and when a pair ends
// unpublished, so how often Tick runs never changes whether they count. It
// visits only the pairs with a crossing due: with nothing due it is one
// comparison and allocates nothing.
func (t *EndpointTracker) Tick(now time.Time) []EndpointEvent {
	var evs []EndpointEvent
	for {
		pr, ok := t.due.next(now)
		if !ok {
			return evs
		}
		evs = t.crossPair(evs, pr, now)
	}
}

// Pending returns the number of due pairs not yet published.
func (t *EndpointTracker) Pending() int {
	n := 0
	for _, sp := range t.pods {
		for _, pr := range sp.pairs {
			if pr.pending {
				n++
			}
		}
	}
	return n
}

// Tracked reports whether the tracker holds state for a pod UID.
func (t *EndpointTracker) Tracked(uid string) bool { return t.pods[uid] != nil }

// replaceSlice swaps a slice's state (nil: deleted) and handles the pods
// whose publication in the slice's Service changed.
func (t *EndpointTracker) replaceSlice(evs []EndpointEvent, uid string, old, cur *sliceState, now time.Time, live bool) []EndpointEvent {
	var ns, svc string
	affected := map[string]bool{}
	if old != nil {
		ns, svc = old.namespace, old.service
		for p := range old.ready {
			affected[p] = true
		}
	}
	if cur != nil {
		ns, svc = cur.namespace, cur.service
		for p := range cur.ready {
			affected[p] = true
		}
	}
	before := map[string]bool{}
	for p := range affected {
		before[p] = t.published(ns, svc, p)
	}
	if old != nil {
		delete(t.bySvc[old.namespace+"/"+old.service], uid)
		delete(t.slices, uid)
	}
	if cur != nil {
		key := cur.namespace + "/" + cur.service
		if t.bySvc[key] == nil {
			t.bySvc[key] = map[string]bool{}
		}
		t.bySvc[key][uid] = true
		t.slices[uid] = cur
	}
	if old != nil && len(t.bySvc[old.namespace+"/"+old.service]) == 0 {
		delete(t.bySvc, old.namespace+"/"+old.service)
	}
	for _, p := range sortedKeys(affected) {
		if pub := t.published(ns, svc, p); pub != before[p] {
			evs = t.publication(evs, p, svc, pub, now, live)
		}
	}
	return evs
}

// publication handles a pod becoming, or ceasing to be, a ready endpoint of
// svc at now: a pending propagation is observed, a pending removal too;
// not live, both end unobserved.
func (t *EndpointTracker) publication(evs []EndpointEvent, uid, svc string, published bool, now time.Time, live bool) []EndpointEvent {
	sp := t.pods[uid]
	if sp == nil {
		return evs
	}
	pr := sp.pairs[svc]
	if pr == nil {
		return evs // not selected (yet): a new pair reads the slices then
	}
	pr.published = published
	switch {
	case published:
		if sp.serving {
			pr.publishedInSpell = true
		}
		if pr.pending {
			if live {
				// Crossings first, as for pod stages: a pair published at
				// d > T crossed T before.
				evs = t.crossPair(evs, pr, now)
				at := now
				if now.Before(pr.crossedAt) {
					at = pr.crossedAt // received before a Tick that counted a crossing
				}
				evs = append(evs, t.event(EndpointPropagated, pr, at.Sub(pr.dueAt)))
			}
			t.setPending(pr, false, time.Time{})
		}
	case pr.removing:
		if live {
			evs = append(evs, t.event(EndpointRemoved, pr, now.Sub(sp.goneAt)))
		}
		pr.removing = false
		if sp.deleted {
			t.dropPair(sp, svc)
			t.forgetIfDone(uid, sp)
		}
	}
	return evs
}

// published reports whether a pod is a ready endpoint in any slice of a
// Service.
func (t *EndpointTracker) published(namespace, svc, uid string) bool {
	for s := range t.bySvc[namespace+"/"+svc] {
		if t.slices[s].ready[uid] {
			return true
		}
	}
	return false
}

// becameDue starts the propagation of a pair whose pod serves and is
// selected, the second of the two facts having turned true at now: live
// when that was received live, else when the pair became due is unknown and
// it is not timed. A pair already published (the slice update arrived
// first) counts 0.
func (t *EndpointTracker) becameDue(evs []EndpointEvent, pr *pair, now time.Time, live bool) []EndpointEvent {
	if !live {
		return evs
	}
	if pr.published {
		return append(evs, t.event(EndpointPropagated, pr, 0))
	}
	t.setPending(pr, true, now)
	return append(evs, t.event(EndpointPairDue, pr, 0))
}

// setPending opens (at due) or closes a pair's pending propagation and
// keeps the deadline index in step.
func (t *EndpointTracker) setPending(pr *pair, pending bool, due time.Time) {
	pr.pending = pending
	if pending {
		pr.dueAt, pr.next, pr.crossedAt = due, 0, time.Time{}
	}
	t.schedule(pr)
}

func (t *EndpointTracker) schedule(pr *pair) {
	var at time.Time
	if pr.pending && pr.next < len(t.thr) {
		at = pr.dueAt.Add(t.thr[pr.next])
	}
	t.due.set(&pr.item, at)
}

// stopServing handles a pod that stopped being Ready, started terminating
// or was deleted at now: pending propagations end (their crossings count),
// published pairs wait for their removal, and pairs whose slice already
// dropped the pod during this spell count 0. Not live, nothing is timed.
func (t *EndpointTracker) stopServing(evs []EndpointEvent, sp *servedPod, now time.Time, live bool) []EndpointEvent {
	sp.serving = false
	sp.goneAt = now
	for _, svc := range sortedKeys(sp.pairs) {
		pr := sp.pairs[svc]
		switch {
		case pr.pending:
			if live {
				evs = t.crossPair(evs, pr, now)
			}
			t.setPending(pr, false, time.Time{})
		case !live:
		case pr.published:
			pr.removing = true
		case pr.publishedInSpell:
			evs = append(evs, t.event(EndpointRemoved, pr, 0))
		}
		pr.publishedInSpell = false
	}
	return evs
}

// crossPair emits the threshold crossings of a pending pair up to now.
func (t *EndpointTracker) crossPair(evs []EndpointEvent, pr *pair, now time.Time) []EndpointEvent {
	age := now.Sub(pr.dueAt)
	for pr.next < len(t.thr) && age > t.thr[pr.next] {
		ev := t.event(EndpointPropagationCrossed, pr, 0)
		ev.Threshold = pr.next
		evs = append(evs, ev)
		pr.next++
		pr.crossedAt = now
	}
	t.schedule(pr)
	return evs
}

func (t *EndpointTracker) event(typ EndpointEventType, pr *pair, d time.Duration) EndpointEvent {
	return EndpointEvent{Type: typ, Namespace: pr.sp.namespace, Service: pr.svc, PodUID: pr.uid, PodName: pr.sp.name, Duration: max(0, d)}
}

// dropPair ends a pair: out of the pod's pairs and the deadline index.
func (t *EndpointTracker) dropPair(sp *servedPod, svc string) {
	if pr := sp.pairs[svc]; pr != nil {
		t.due.set(&pr.item, time.Time{})
		delete(sp.pairs, svc)
	}
}

// forgetIfDone drops a pod with nothing left to time: no pairs left (a
// deleted pod keeps only the pairs whose removal is pending).
func (t *EndpointTracker) forgetIfDone(uid string, sp *servedPod) {
	if len(sp.pairs) == 0 {
		delete(t.pods, uid)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
