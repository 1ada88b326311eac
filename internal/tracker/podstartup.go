package tracker

import (
	"sort"
	"time"
)

// PodStage is a startup condition of a pod: the time from the pod's
// creation until its condition first turned True is the stage's duration.
type PodStage string

// Pod startup stages, named after the conditions they read.
const (
	// PodStageScheduled: PodScheduled, set when the scheduler binds the pod.
	PodStageScheduled PodStage = "scheduled"
	// PodStageReadyToStartContainers: PodReadyToStartContainers, set by the
	// kubelet once the sandbox and its network are up. Optional: kwok's
	// stock stages never set it, nor do kubelets before v1.29.
	PodStageReadyToStartContainers PodStage = "ready_to_start_containers"
	// PodStageInitialized: Initialized, every init container completed (at
	// once for pods without init containers).
	PodStageInitialized PodStage = "initialized"
	// PodStageContainersReady: ContainersReady, every container ready.
	PodStageContainersReady PodStage = "containers_ready"
	// PodStageReady: Ready, containers ready and readiness gates passed.
	PodStageReady PodStage = "ready"
)

// PodCreated is the `from` of a pod's first stage interval.
const PodCreated = "created"

// PodStages lists the stages in the order used to break ties between
// conditions that turned True within the same second (lastTransitionTime has
// one-second precision): the kubelet's order for a pod with init containers
// (sandbox, then init containers, then containers). Without init containers
// the kubelet sets Initialized before PodReadyToStartContainers; when they
// arrive in separate updates, their receive order wins over this one.
var PodStages = []PodStage{PodStageScheduled, PodStageReadyToStartContainers, PodStageInitialized, PodStageContainersReady, PodStageReady}

const numPodStages = 5 // len(PodStages), for per-stage arrays

func podStageIndex(s PodStage) int {
	for i, x := range PodStages {
		if x == s {
			return i
		}
	}
	return -1
}

// r2s is the index of the optional PodReadyToStartContainers stage.
var r2s = podStageIndex(PodStageReadyToStartContainers)

// PodCondition is one startup condition present in a pod's status.
type PodCondition struct {
	Stage PodStage
	True  bool
	// LastTransition is the condition's lastTransitionTime (API side, one
	// second precision).
	LastTransition time.Time
}

// PodRef identifies a pod in observations.
type PodRef struct {
	UID, Namespace, Name string
	// OwnerKind is the kind of the pod's controller ownerReference
	// (ReplicaSet, StatefulSet, DaemonSet, Job, ...) or "none".
	OwnerKind string
}

// Pod is the compact record of a pod that the pod tracker reads.
type Pod struct {
	PodRef
	// Created is metadata.creationTimestamp (API side, 1 s precision).
	Created time.Time
	// Conditions are the startup conditions present in status.conditions.
	Conditions []PodCondition
	// Facts feed the not-ready classification (NotReadyReason).
	Facts PodFacts
}

// present returns, per stage index, whether the condition is in the status
// and whether it is True.
func (p *Pod) present() (present, isTrue [numPodStages]bool, ltt [numPodStages]time.Time) {
	for _, c := range p.Conditions {
		if i := podStageIndex(c.Stage); i >= 0 {
			present[i], isTrue[i], ltt[i] = true, c.True, c.LastTransition
		}
	}
	return present, isTrue, ltt
}

// nextStage is the first stage, in PodStages order, whose condition is not
// True; the optional ready_to_start_containers only when the node reports it.
func (p *Pod) nextStage() PodStage {
	present, isTrue, _ := p.present()
	for i, s := range PodStages {
		if i == r2s && !present[i] {
			continue
		}
		if !isTrue[i] {
			return s
		}
	}
	return PodStageReady
}

// notReadySince is the API-side start of the current not-ready spell of a
// pod first seen late: the Ready condition's last transition, else the
// creation time.
func (p *Pod) notReadySince() time.Time {
	for _, c := range p.Conditions {
		if c.Stage == PodStageReady && !c.LastTransition.IsZero() {
			return c.LastTransition
		}
	}
	return p.Created
}

// PodStartupConfig configures a PodTracker.
type PodStartupConfig struct {
	// Thresholds are the latency thresholds in seconds, ascending: the
	// bucket boundaries of the startup histogram.
	Thresholds []float64
	// StallAfter is the not-ready age after which a pod is reported as
	// stalled. Zero: 5 minutes.
	StallAfter time.Duration
	// LateAfter: a pod first seen by a watch event more than this after its
	// creationTimestamp is not timed (recovered), as if a list had delivered
	// it. The list mark covers relists; this covers a watch resumed after a
	// cut without a relist, whose backlog of events arrives as watch events
	// (the API server's watch cache keeps minutes of history, so a cut of
	// tens of seconds resumes without 410). creationTimestamp, unlike the
	// managedFields times the rollout tracker no longer reads, is on every
	// pod and set by the API server's clock. 10 s: its 1 s truncation, watch
	// delivery (p99 10 ms on the sandbox) and a few seconds of clock skew.
	// Zero: 10 s.
	LateAfter time.Duration
}

// PodEventType says what a PodEvent reports.
type PodEventType int

// Pod event types.
const (
	// PodStageReached: the pod's Stage condition turned True, Duration after
	// its start (creation, or removal of its last scheduling gate),
	// Interval after the previous stage (From).
	PodStageReached PodEventType = iota
	// PodThresholdCrossed: the pod's startup age passed
	// Thresholds[Threshold] before Stage was reached.
	PodThresholdCrossed
	// PodStartupOpened: a startup is timed from now on; sinks create the
	// pod's (namespace, owner_kind) series at zero so that its first
	// crossing is seen by rate().
	PodStartupOpened
	// PodRecovered: a pod whose startup is not timed because its start was
	// not received live: first delivered by a list cycle (initial list or
	// relist), first seen more than LateAfter after its creation, or its
	// last scheduling gate removed during a watch gap. Once per pod.
	PodRecovered
)

// PodEvent is an observation of the pod tracker.
type PodEvent struct {
	Type     PodEventType
	Pod      PodRef
	Stage    PodStage
	Duration time.Duration // PodStageReached: from the start
	// From is PodCreated or the stage reached before Stage, in the order the
	// conditions really turned True; Interval is the time since it. From is
	// "" when the stage before was reached during a watch gap: no interval.
	From      string
	Interval  time.Duration
	Threshold int // PodThresholdCrossed: index into PodStartupConfig.Thresholds
}

// PodStall is a pod not ready for longer than the stall threshold.
type PodStall struct {
	Pod    PodRef
	Stage  PodStage // the next startup condition not True
	Reason string   // NotReadyReason
	Age    time.Duration
}

// PodTracker times pod startups: for each pod created while it watches, the
// time from the creation (as received) to each startup condition, the
// intervals between them, and threshold crossings of stages not reached;
// for every pod, whether and why it is not ready. It is not safe for
// concurrent use.
//
// Timing. The start is the receive time of the pod's creation, or, for a pod
// created with spec.schedulingGates (waiting for an admission queue such as
// Kueue), of the update that removed its last gate: a gated pod is not
// starting, it is queued. A stage is timed at the receive time of the update
// in which its condition is first True: watch delivery on the sandbox is
// 3-10 ms, while lastTransitionTime has one-second precision and the node's
// clock. When several conditions turn True in one update (kwok's pod-ready
// sets ContainersReady and Ready together; a relist can merge more), they
// are ordered by lastTransitionTime, ties by PodStages order, and all are
// timed at that receive time: their intervals are 0, never negative.
//
// Gaps and restarts ("listed" below: delivered by a list cycle, the initial
// list or a relist). A pod first seen listed is not timed and is reported
// once as PodRecovered: its creation receive time is unknown, and the status
// does not tell a pod still starting from one that was Ready for days and
// then lost readiness, so recovering it from API timestamps could invent
// startups of days. A gated pod first seen listed is timed normally if its
// gate removal arrives live. A stage whose condition turned True in a listed
// update happened in a gap: it is not observed (neither good nor bad), and
// the interval after it is not either; the stages still ahead keep being
// timed from the known start. A startup that ends in a listed update
// (terminating, finished) flushes no crossings. Crossings already counted by
// Tick while the watch was cut stand: the exporter could not know better.
//
// Receive times out of order. Receive times are stamped when the watch
// decoder hands an event over, and Tick runs on the collector's clock, so an
// event can be handled after a Tick whose now is later than its receive
// time. A stage is never timed before what the startup already reported (a
// crossing, a stage): received before a Tick that counted a crossing, it is
// timed at that Tick, not at its receive time. It then lands above every
// threshold counted crossed, so a pod counts once per threshold, good in the
// le=T bucket or bad as a crossing, never both, and its stages' durations
// never decrease. The shift is at most the handler's lag.
type PodTracker struct {
	cfg  PodStartupConfig
	thr  []time.Duration
	pods map[string]*podEntry
	due  dueIndex[*podEntry] // starting pods by next crossing deadline
}

type podEntry struct {
	ref    PodRef
	reason string   // NotReadyReason of the last record, "" when none applies
	stage  PodStage // the next stage not reached, per the last record
	// notReadySince starts the current not-ready spell (a receive time, or
	// API side for pods first seen listed); zero while Ready, gated, or not
	// counted.
	notReadySince time.Time
	gated         bool        // scheduling gates present: the startup has not begun
	ep            *podStartup // open while a pod is starting
	item          dueItem[*podEntry]
}

type podStartup struct {
	start   time.Time
	reached [numPodStages]bool
	present [numPodStages]bool // conditions in the last record's status
	last    string             // the last stage reached, PodCreated before any
	lastAt  time.Time          // when last was reached; zero when in a gap
	next    [numPodStages]int  // per stage: index of the next threshold not crossed yet
	judged  time.Time          // the latest time a crossing or a stage was reported at: see at
}

// NewPodTracker returns a tracker.
func NewPodTracker(cfg PodStartupConfig) *PodTracker {
	if cfg.LateAfter == 0 {
		cfg.LateAfter = 10 * time.Second
	}
	if cfg.StallAfter == 0 {
		cfg.StallAfter = 5 * time.Minute
	}
	return &PodTracker{cfg: cfg, thr: durations(cfg.Thresholds), pods: map[string]*podEntry{}}
}

// Observe takes the current record of a pod, received at now. listed is
// true for records delivered by a list cycle (the initial list or a relist).
// Observing the same record again (a node's readiness changed) only
// refreshes the not-ready reason.
func (t *PodTracker) Observe(p Pod, seen Seen) []PodEvent {
	now, listed := seen.At, !seen.Live
	var evs []PodEvent
	e := t.pods[p.UID]
	first := e == nil
	reason := NotReadyReason(p.Facts)
	if first {
		e = &podEntry{}
		e.item = newDueItem(p.UID, e)
		t.pods[p.UID] = e
	}
	e.ref = p.PodRef
	gated := p.Facts.SchedulingGated
	switch {
	case first && gated:
		// Queued: its startup begins at the gate removal, which can still
		// come live even if the pod itself came with a list.
	case first && (listed || now.Sub(p.Created) > t.cfg.LateAfter):
		evs = append(evs, PodEvent{Type: PodRecovered, Pod: e.ref})
	case first || (e.gated && !gated):
		switch {
		case listed && !first:
			evs = append(evs, PodEvent{Type: PodRecovered, Pod: e.ref}) // ungated during a gap
		case reason != "":
			e.ep = &podStartup{start: now, last: PodCreated, lastAt: now, judged: now}
			evs = append(evs, PodEvent{Type: PodStartupOpened, Pod: e.ref})
		}
	}
	e.gated = gated
	e.reason = reason
	e.stage = p.nextStage()
	switch {
	case reason == "" || gated:
		e.notReadySince = time.Time{}
	case e.notReadySince.IsZero() && first && e.ep == nil:
		e.notReadySince = p.notReadySince()
	case e.notReadySince.IsZero():
		e.notReadySince = now
	}
	if e.ep != nil {
		evs = t.advance(evs, e, &p, now, listed)
	}
	t.schedule(e)
	return evs
}

// Delete forgets a deleted pod; a startup still open flushes its crossings.
// live is false when the deletion was learned from a list cycle (a delete
// tombstone): it happened at an unknown time in a gap, nothing is flushed.
func (t *PodTracker) Delete(uid string, seen Seen) []PodEvent {
	now, live := seen.At, seen.Live
	e := t.pods[uid]
	if e == nil {
		return nil
	}
	delete(t.pods, uid)
	t.due.set(&e.item, time.Time{})
	if e.ep == nil || !live {
		return nil
	}
	return t.cross(nil, e, now)
}

// Tick reports the thresholds that starting pods crossed by now. Crossings
// are also flushed before every stage observation and when a pod goes away,
// so how often Tick runs changes when they are counted, never whether. It
// visits only the pods with a crossing due: with nothing due it is one
// comparison and allocates nothing.
func (t *PodTracker) Tick(now time.Time) []PodEvent {
	var evs []PodEvent
	for {
		e, ok := t.due.next(now)
		if !ok {
			return evs
		}
		evs = t.cross(evs, e, now)
		t.schedule(e)
	}
}

// schedule puts a pod in the deadline index at its next crossing, or takes
// it out when it has none (not starting, or every threshold crossed).
func (t *PodTracker) schedule(e *podEntry) {
	var at time.Time
	if ep := e.ep; ep != nil {
		for i := range PodStages {
			if ep.expected(i) && ep.next[i] < len(t.thr) {
				if d := ep.start.Add(t.thr[ep.next[i]]); at.IsZero() || d.Before(at) {
					at = d
				}
			}
		}
	}
	t.due.set(&e.item, at)
}

// NotReady counts the pods not ready, by namespace and reason.
func (t *PodTracker) NotReady() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, e := range t.pods {
		if e.reason == "" {
			continue
		}
		if out[e.ref.Namespace] == nil {
			out[e.ref.Namespace] = map[string]int{}
		}
		out[e.ref.Namespace][e.reason]++
	}
	return out
}

// Stalled returns the pods not ready for longer than the stall threshold,
// longest first. Gated pods are waiting for admission, not stalled: their
// spell starts when the last gate is removed.
func (t *PodTracker) Stalled(now time.Time) []PodStall {
	var out []PodStall
	for _, e := range t.pods {
		if e.reason == "" || e.notReadySince.IsZero() {
			continue
		}
		if age := now.Sub(e.notReadySince); age > t.cfg.StallAfter {
			out = append(out, PodStall{Pod: e.ref, Stage: e.stage, Reason: e.reason, Age: age})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Age != out[j].Age {
			return out[i].Age > out[j].Age
		}
		return out[i].Pod.UID < out[j].Pod.UID
	})
	return out
}

// Starting reports whether uid has an open startup.
func (t *PodTracker) Starting(uid string) bool {
	e := t.pods[uid]
	return e != nil && e.ep != nil
}

// Tracked returns the number of pods the tracker holds.
func (t *PodTracker) Tracked() int { return len(t.pods) }

// advance observes the stages whose conditions turned True, closes the
// startup when the pod is Ready, and when it stops starting without being
// Ready (terminating, finished) after flushing its crossings. listed: the
// record came from a list cycle, so its changes happened in a gap.
func (t *PodTracker) advance(evs []PodEvent, e *podEntry, p *Pod, now time.Time, listed bool) []PodEvent {
	ep := e.ep
	present, isTrue, ltt := p.present()
	ep.present = present
	var newly [numPodStages]int
	n := 0
	for i := range PodStages {
		if isTrue[i] && !ep.reached[i] {
			newly[n] = i
			n++
		}
	}
	sort.SliceStable(newly[:n], func(a, b int) bool { return ltt[newly[a]].Before(ltt[newly[b]]) })
	for _, i := range newly[:n] {
		ep.reached[i] = true
		if listed {
			// Reached at an unknown time during a gap: not observed, and
			// the interval after it is unknown too.
			ep.last, ep.lastAt = string(PodStages[i]), time.Time{}
			continue
		}
		// Crossings first: a stage reached at d > T crossed T before, even
		// if no Tick ran in between; every pod then counts once per
		// threshold (good in the le=T bucket, or bad as a crossing).
		evs = t.crossStage(evs, e, i, now)
		at := ep.at(now)
		ep.judged = at
		ev := PodEvent{Type: PodStageReached, Pod: e.ref, Stage: PodStages[i], Duration: at.Sub(ep.start), From: ep.last}
		if ep.lastAt.IsZero() {
			ev.From = ""
		} else {
			ev.Interval = at.Sub(ep.lastAt) // lastAt <= judged: never negative
		}
		evs = append(evs, ev)
		ep.last, ep.lastAt = string(PodStages[i]), at
	}
	switch {
	case ep.reached[podStageIndex(PodStageReady)]:
		// Stages still unreached were never reported: not counted.
		e.ep = nil
	case e.reason == "":
		// Terminating, or finished without ever being Ready (a Job pod):
		// it is gone for the startup SLI; the time it spent counts, up to
		// a change seen live.
		if !listed {
			evs = t.cross(evs, e, now)
		}
		e.ep = nil
	}
	return evs
}

// expected reports whether stage i of a starting pod still counts against
// the SLI: not reached, and either its condition is in the status, or, for
// the mandatory stages, no later stage was reached without it (then the node
// does not report it: kwok does not set PodScheduled on pods bound at
// creation). ready_to_start_containers counts only once the node reports the
// condition: kwok's stock stages and kubelets before v1.29 never do.
func (ep *podStartup) expected(i int) bool {
	if ep.reached[i] {
		return false
	}
	if ep.present[i] {
		return true
	}
	if i == r2s {
		return false
	}
	for j := i + 1; j < len(PodStages); j++ {
		if j != r2s && ep.reached[j] {
			return false
		}
	}
	return true
}

// cross emits the crossings of every expected stage of a starting pod.
func (t *PodTracker) cross(evs []PodEvent, e *podEntry, now time.Time) []PodEvent {
	for i := range PodStages {
		if e.ep.expected(i) {
			evs = t.crossStage(evs, e, i, now)
		}
	}
	return evs
}

func (t *PodTracker) crossStage(evs []PodEvent, e *podEntry, i int, now time.Time) []PodEvent {
	ep := e.ep
	at := ep.at(now)
	for ep.next[i] < len(t.thr) && at.Sub(ep.start) > t.thr[ep.next[i]] {
		evs = append(evs, PodEvent{Type: PodThresholdCrossed, Pod: e.ref, Stage: PodStages[i], Threshold: ep.next[i]})
		ep.next[i]++
		ep.judged = at
	}
	return evs
}

// at is when what happens to the startup at now happened on its clock, which
// never goes back: now, or the latest time a crossing or a stage was
// reported at if later (see PodTracker, receive times out of order).
func (ep *podStartup) at(now time.Time) time.Time {
	if now.Before(ep.judged) {
		return ep.judged
	}
	return now
}
