package tracker

import (
	"sort"
	"time"
)

// RolloutConfig configures a RolloutTracker.
type RolloutConfig struct {
	// Thresholds are the latency thresholds in seconds, ascending: the
	// bucket boundaries of the duration histogram. Crossing one while a
	// stage is not reached yields a ThresholdCrossed event.
	Thresholds []float64
	// StallAfter returns the age after which an open episode of kind is
	// reported as stalled.
	StallAfter func(Kind) time.Duration
}

// EventType says what an Event reports.
type EventType int

// Event types.
const (
	// StageReached: the episode reached Stage, Duration after the write.
	StageReached EventType = iota
	// ThresholdCrossed: the episode's age passed Thresholds[Threshold]
	// before it reached Stage.
	ThresholdCrossed
	// EpisodeClosed: the episode ended with Outcome.
	EpisodeClosed
	// EpisodeRecovered: an episode in flight was found at start or after a
	// watch gap, and started from the API-side time.
	EpisodeRecovered
	// EpisodeOpened: an episode opened (live or recovered). Sinks create
	// their series at zero here, so that rate() sees the first observation
	// or crossing as an increase from 0 instead of a series appearing at 1.
	EpisodeOpened
	// EpisodeStalled: the open episode first passed its stall threshold (or
	// its controller reported Stalled=True), once per episode. Stage is the
	// next stage not reached, Reason why (as Stall.Reason). Sinks that
	// export an episode when it ends (traces) export a stalled one here.
	EpisodeStalled
)

// Episode identifies one rollout of one object: opened by the write that
// asked for it (a create, a new pod template, a scale...), it lasts until
// the object converges on what was asked, or a new revision supersedes it.
// Writes that do not change what is rolling out (spec.replicas from an HPA,
// annotations from CI, pause) re-target it to their newer generation; it
// keeps its start, its crossings and its change.
type Episode struct {
	Kind                 Kind
	UID, Namespace, Name string
	// Generation is the generation of the write that opened the episode;
	// Target the newest generation it is judged against.
	Generation, Target int64
	Change             Change
	// Start is when the write happened: the exporter's receive time, or the
	// API-side time for a recovered episode.
	Start time.Time
	// APIStart is the API-side time of the write (1 s precision), kept to
	// tell watch delivery lag and clock skew apart.
	APIStart time.Time
	// Recovered: the exporter did not see the write live (it started, or
	// its watch had a gap, since). Its stages are timed on the API-side
	// start, a different clock with 1 s precision: sinks keep them out of
	// the live duration histograms, and it never crosses thresholds.
	Recovered bool
}

// Event is an observation of the tracker.
type Event struct {
	Type      EventType
	Episode   Episode
	Stage     Stage
	Duration  time.Duration // StageReached
	Threshold int           // ThresholdCrossed: index into RolloutConfig.Thresholds
	Outcome   Outcome       // EpisodeClosed
	Reason    string        // EpisodeStalled
	// APITime is the API-side time of a StageReached (zero when unknown):
	// the controller's status write that shows it (a custom resource's
	// ready stage: its readiness condition's transition). endpoints_ready
	// has none: the EndpointSlice writes are the timeline's endpoint
	// entries.
	APITime time.Time
	// At is when it happened on the exporter's clock: the time of the
	// call that emitted it or, if later, the latest At already emitted for
	// the episode (a record handled after a Tick later than its receipt
	// is timed at that Tick), so the events of an episode never go back.
	// A StageReached's Duration is At - Episode.Start.
	At time.Time
}

// Stall describes an object whose oldest write not yet converged is older
// than its stall threshold.
type Stall struct {
	Episode Episode
	Stage   Stage  // the next stage not reached yet
	Reason  string // see stallReason
	// Age is measured from the oldest write not yet converged: the start of
	// the open episode, or of an earlier one it superseded without the
	// object converging in between.
	Age time.Duration
}

// RolloutTracker follows rollout episodes, one per (uid, generation). It is
// not safe for concurrent use.
type RolloutTracker struct {
	cfg     RolloutConfig
	objects map[string]*object
	// inFlight indexes the objects with an open episode: Tick, Stalled and Open
	// run every second or scrape and must not walk every workload (1.7 ms
	// per Tick over 10,000 workloads and 100 open episodes before this index,
	// 14 µs with it: BenchmarkRolloutTick).
	inFlight map[string]*object
	// inFlightIn is inFlight by namespace: the collectors re-evaluate the
	// open episodes of one namespace or one uid on every pod, slice and
	// Service event, and copying every open episode to filter them cost
	// 3.1 ms and 321 KB per pod event with 2,000 rollouts in flight
	// (BenchmarkChurnEvent; 100,000 such events in the 20,000-pod
	// template change of `make scale`).
	inFlightIn map[string]map[string]*object
}

type object struct {
	last Workload // the last record seen
	// seen is when it was received, in Unix nanoseconds: a time.Time
	// takes 16 bytes more, and the object would not fit its 384-byte
	// size class (BenchmarkTrackedMemory).
	seen int64
	ep   *episode // the open episode, nil when settled
	// baseline is the pod template the object last converged on (or was
	// settled on at first sight): a write is a template change when its
	// template differs from it. Comparing with the previous generation
	// instead would call the resume after pause -> set image a change of
	// nothing, while it is when the new template rolls out. Empty: unknown.
	baseline string
	// pending: a live spec write of a custom resource that cannot be
	// judged yet (Workload.unjudged), received at seen, which stays the
	// write's receipt while pending. Its episode opens, from seen, when
	// the object is first seen not ready: the controller took the write
	// up. An object that stays ready gives no episode (nothing shows that
	// its controller saw the write, nor that it did not): neither a
	// near-zero duration nor a stall is invented.
	pending bool
}

type episode struct {
	Episode
	template string // the pod template it rolls out
	stages   []Stage
	reached  int   // stages[:reached] are reached
	next     []int // per stage: index of the next threshold not crossed yet
	// last is the latest At emitted for the episode: an event is stamped
	// no earlier. A record received before a Tick but handled after it
	// (the handler's lag) would otherwise be timed before what the Tick
	// judged: a stage good for a threshold it was counted bad for, a close
	// before the stage that caused it (5.05 s after a stage of 5.1 s), a
	// trace whose root ends before its children (issue 25).
	last time.Time
	// stallSince is the start of the oldest write not yet converged.
	stallSince time.Time
	// stalled: EpisodeStalled was emitted.
	stalled bool
}

// NewRolloutTracker returns a tracker.
func NewRolloutTracker(cfg RolloutConfig) *RolloutTracker {
	if cfg.StallAfter == nil {
		cfg.StallAfter = func(Kind) time.Duration { return 5 * time.Minute }
	}
	return &RolloutTracker{cfg: cfg, objects: map[string]*object{}, inFlight: map[string]*object{}, inFlightIn: map[string]map[string]*object{}}
}

// Observe takes the current record of a workload, received at now. listed
// is true when a list cycle delivered it (the informer's initial list, or a
// relist after a watch gap): whatever changed since the last record happened
// while the exporter was not watching.
//
// Recovery is decided by the watch, never by API timestamps: a generation is
// recovered when it arrives listed, or when it is already observed by its
// controller at first sight (a live watch delivers the spec write before the
// controller's status write, so only a gap explains it). managedFields times
// cannot decide it: a /scale write (kubectl scale, every HPA) leaves none,
// they are truncated to the second, unrelated to metadata-only writes (a
// Deployment's generation also moves on annotation changes) and on another
// clock.
func (t *RolloutTracker) Observe(w Workload, seen Seen) []Event {
	now, listed := seen.At, !seen.Live
	var evs []Event
	missed := listed || w.observedSeen()
	o := t.objects[w.UID]
	if w.Custom != nil && w.Custom.Terminating {
		return t.terminating(o, &w, now)
	}
	keepSeen := o != nil && o.pending
	switch {
	case o == nil:
		o = &object{}
		t.objects[w.UID] = o
		change := ChangeOther // the previous spec is unknown
		if w.Generation == 1 {
			change = ChangeCreate
		}
		switch {
		case !missed:
			o.ep = t.open(&w, change, now, time.Time{})
			evs = o.ep.emit(evs, Event{Type: EpisodeOpened}, now)
		case settled(&w):
			o.baseline = w.TemplateHash
		default:
			o.ep = t.recover(&w, change, time.Time{}, time.Time{})
			evs = o.ep.emit(evs, Event{Type: EpisodeOpened}, now)
			evs = o.ep.emit(evs, Event{Type: EpisodeRecovered}, now)
		}
	case w.Generation > o.last.Generation:
		o.pending, keepSeen = false, false
		if o.ep != nil && w.Custom == nil && w.TemplateHash == o.ep.template {
			// Not a new revision (replicas, metadata, pause, strategy...):
			// the rollout in flight goes on, judged on the newest spec.
			o.ep.Target = w.Generation
			break
		}
		change := classify(o, &w)
		var since time.Time // the oldest write not yet converged
		if o.ep != nil {
			// A new revision for the rollout in flight, even back to the
			// template the object last converged on (a rollback): its pods
			// must be replaced.
			if w.Custom == nil {
				change = ChangeTemplate
			}
			since = o.ep.stallSince
			evs = t.close(evs, o, OutcomeSuperseded, now)
		}
		switch {
		case !missed && w.unjudged() && o.ep == nil:
			o.pending = true
		case !missed:
			o.ep = t.open(&w, change, now, since)
			evs = o.ep.emit(evs, Event{Type: EpisodeOpened}, now)
		case settled(&w):
			// Written and converged while the watch was cut: invisible,
			// like a rollout that ended while the exporter was down. Its
			// stage times are unknown, and timing them from the relist
			// would invent near-zero durations.
			o.baseline = w.TemplateHash
		default:
			o.ep = t.recover(&w, change, since, o.seenAt())
			evs = o.ep.emit(evs, Event{Type: EpisodeOpened}, now)
			evs = o.ep.emit(evs, Event{Type: EpisodeRecovered}, now)
		}
	case w.Generation < o.last.Generation:
		return nil // an older copy (should not happen with one informer): ignore
	case o.pending && !w.Custom.Ready:
		// The transition the pending write waited for: timed from the
		// write's receipt; after a watch gap, recovered.
		o.pending, keepSeen = false, false
		change := ChangeOther
		if w.Generation == 1 {
			change = ChangeCreate
		}
		o.ep = t.open(&w, change, o.seenAt(), time.Time{})
		evs = o.ep.emit(evs, Event{Type: EpisodeOpened}, now)
		if listed {
			o.ep.Recovered = true
			evs = o.ep.emit(evs, Event{Type: EpisodeRecovered}, now)
		}
	}
	o.last = w
	if !keepSeen {
		o.seen = now.UnixNano()
	}
	if o.ep != nil {
		t.fly(w.UID, o)
		evs = t.advance(evs, o, now)
	}
	return evs
}

// terminating takes the record of a custom resource being deleted (a
// deletionTimestamp: kstatus Terminating): its open episode closes as
// deleted, and none opens (setting a deletionTimestamp bumps the
// generation, and the controller finalizes the object instead of
// converging it).
func (t *RolloutTracker) terminating(o *object, w *Workload, now time.Time) []Event {
	if o == nil {
		o = &object{}
		t.objects[w.UID] = o
	}
	var evs []Event
	if o.ep != nil {
		evs = t.close(evs, o, OutcomeDeleted, now)
	}
	o.pending = false
	o.last, o.seen = *w, now.UnixNano()
	return evs
}

// seenAt is when o was last received (while pending: the pending write).
func (o *object) seenAt() time.Time { return time.Unix(0, o.seen) }

// Delete closes the open episode of uid, if any, and forgets the object.
func (t *RolloutTracker) Delete(uid string, seen Seen) []Event {
	now := seen.At
	o := t.objects[uid]
	if o == nil {
		return nil
	}
	delete(t.objects, uid)
	t.land(uid, o)
	if o.ep == nil {
		return nil
	}
	return t.close(nil, o, OutcomeDeleted, now)
}

// Tick reports the thresholds that open episodes crossed by now. Call it
// periodically (every second is plenty: crossings are also flushed before
// every stage observation, so their order never matters).
func (t *RolloutTracker) Tick(now time.Time) []Event {
	var evs []Event
	for _, uid := range t.sortedOpenUIDs() {
		o := t.inFlight[uid]
		evs = t.cross(evs, o, now)
		if st, ok := t.stall(o, now); ok && !o.ep.stalled {
			o.ep.stalled = true
			evs = o.ep.emit(evs, Event{Type: EpisodeStalled, Stage: st.Stage, Reason: st.Reason}, now)
		}
	}
	return evs
}

// Stalled returns the open episodes older than their stall threshold, oldest first.
func (t *RolloutTracker) Stalled(now time.Time) []Stall {
	var out []Stall
	for _, o := range t.inFlight {
		if st, ok := t.stall(o, now); ok {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Age != out[j].Age {
			return out[i].Age > out[j].Age
		}
		return out[i].Episode.UID < out[j].Episode.UID
	})
	return out
}

// stall returns o's open episode as a Stall, and whether it is stalled:
// older than its stall threshold, or given up by its controller.
func (t *RolloutTracker) stall(o *object, now time.Time) (Stall, bool) {
	age := now.Sub(o.ep.stallSince)
	st := Stall{Episode: o.ep.Episode, Stage: o.ep.stages[o.ep.reached], Reason: o.last.stallReason(), Age: age}
	// kstatus Stalled=True: the controller itself says it gave up, so
	// waiting for the threshold would only delay the news.
	gaveUp := o.last.observed() && st.Reason == ReasonStalled
	return st, age > t.cfg.StallAfter(o.ep.Kind) || gaveUp
}

// Blocking returns what holds uid's open episode now, at any age: the next
// stage not reached and the most specific reason (the stall reasons), and
// false when uid has no open episode. The timeline shows it before the
// episode is old enough to count as stalled.
func (t *RolloutTracker) Blocking(uid string, now time.Time) (Stall, bool) {
	o := t.objects[uid]
	if o == nil || o.ep == nil {
		return Stall{}, false
	}
	st, _ := t.stall(o, now)
	return st, true
}

// IsOpen reports whether uid has an open episode.
func (t *RolloutTracker) IsOpen(uid string) bool {
	o := t.objects[uid]
	return o != nil && o.ep != nil
}

// Open returns the open episodes.
func (t *RolloutTracker) Open() []Episode {
	out := make([]Episode, 0, len(t.inFlight))
	for _, o := range t.inFlight {
		out = append(out, o.ep.Episode)
	}
	return out
}

// OpenOf returns the open episode of uid.
func (t *RolloutTracker) OpenOf(uid string) (Episode, bool) {
	o := t.inFlight[uid]
	if o == nil {
		return Episode{}, false
	}
	return o.ep.Episode, true
}

// OpenIn returns the open episodes of namespace.
func (t *RolloutTracker) OpenIn(namespace string) []Episode {
	in := t.inFlightIn[namespace]
	if len(in) == 0 {
		return nil
	}
	out := make([]Episode, 0, len(in))
	for _, o := range in {
		out = append(out, o.ep.Episode)
	}
	return out
}

// fly indexes o, whose episode is open.
func (t *RolloutTracker) fly(uid string, o *object) {
	t.inFlight[uid] = o
	in := t.inFlightIn[o.last.Namespace]
	if in == nil {
		in = map[string]*object{}
		t.inFlightIn[o.last.Namespace] = in
	}
	in[uid] = o
}

// land removes uid from the index of open episodes.
func (t *RolloutTracker) land(uid string, o *object) {
	delete(t.inFlight, uid)
	if in := t.inFlightIn[o.last.Namespace]; in != nil {
		delete(in, uid)
		if len(in) == 0 {
			delete(t.inFlightIn, o.last.Namespace)
		}
	}
}

// open opens an episode started at start; since is the start of an
// unconverged episode it supersedes, zero if none.
func (t *RolloutTracker) open(w *Workload, change Change, start, since time.Time) *episode {
	ep := &episode{
		Episode: Episode{Kind: w.Kind, UID: w.UID, Namespace: w.Namespace, Name: w.Name,
			Generation: w.Generation, Target: w.Generation, Change: change, Start: start, APIStart: w.apiStart()},
		template:   w.TemplateHash,
		stages:     Stages(w.Kind),
		stallSince: start,
	}
	if !since.IsZero() && since.Before(start) {
		ep.stallSince = since
	}
	ep.next = make([]int, len(ep.stages))
	return ep
}

// recover opens an episode the exporter did not see start: it starts at the
// API-side time; stages already passed are marked without being observed
// (the previous exporter process, if it ran, observed them; otherwise their
// time is unknown), so a restart neither duplicates nor invents
// observations. It never crosses thresholds: its age is on the API server's
// clock with 1 s precision, and the SLIs count live episodes only.
//
// A generation of an object already known cannot have been written before
// the exporter last received the object (seen): the API-side time is older
// than that when the write left no managedFields time (a /scale write) or
// did not touch the spec (annotations), and the start is then the last
// receipt, which errs by at most the gap.
func (t *RolloutTracker) recover(w *Workload, change Change, since, seen time.Time) *episode {
	start := w.apiStart()
	if start.Before(seen) {
		start = seen
	}
	ep := t.open(w, change, start, since)
	ep.Recovered = true
	for ep.reached < len(ep.stages) && reached(w, ep, ep.stages[ep.reached]) {
		ep.reached++
	}
	return ep
}

// advance observes the stages the record shows reached and closes the
// episode when it is done.
func (t *RolloutTracker) advance(evs []Event, o *object, now time.Time) []Event {
	ep, w := o.ep, &o.last
	for ep.reached < len(ep.stages) {
		s := ep.stages[ep.reached]
		if s == StageEndpointsReady && endpoints(w, ep) == EndpointsNoService {
			break // skipped: converged without it (below)
		}
		if w.skips(s) {
			ep.reached++ // no observedGeneration to time it on
			continue
		}
		if !reached(w, ep, s) {
			break
		}
		// Crossings first: a stage reached at d > T crossed T before, even
		// if no Tick ran in between; every episode then counts once per
		// threshold (good in the le=T bucket, or bad as a crossing).
		evs = t.crossStage(evs, ep, ep.reached, now)
		evs = ep.emit(evs, Event{Type: StageReached, Stage: s, APITime: w.stageAPITime(s)}, now)
		ep.reached++
	}
	switch {
	case ep.reached == len(ep.stages):
		return t.close(evs, o, OutcomeConverged, now)
	case ep.stages[ep.reached] == StageEndpointsReady && endpoints(w, ep) == EndpointsNoService:
		return t.close(evs, o, OutcomeConverged, now)
	case ep.reached > 0 && w.Kind == Deployment && w.Paused:
		return t.close(evs, o, OutcomePaused, now)
	case ep.reached > 0 && w.OnDelete && ep.Change == ChangeTemplate:
		return t.close(evs, o, OutcomeManual, now)
	}
	return evs
}

// close flushes the crossings of the episode up to now and ends it.
func (t *RolloutTracker) close(evs []Event, o *object, out Outcome, now time.Time) []Event {
	evs = t.cross(evs, o, now)
	evs = o.ep.emit(evs, Event{Type: EpisodeClosed, Outcome: out}, now)
	switch out {
	case OutcomeConverged:
		o.baseline = o.ep.template
	case OutcomeManual:
		// An OnDelete update is the operator's to complete: later writes
		// are judged against the template they asked for.
		o.baseline = o.last.TemplateHash
	}
	t.land(o.ep.UID, o)
	o.ep = nil
	return evs
}

// cross emits the threshold crossings of every unreached stage of o's episode.
func (t *RolloutTracker) cross(evs []Event, o *object, now time.Time) []Event {
	ep := o.ep
	for i := ep.reached; i < len(ep.stages); i++ {
		// A skipped endpoints stage (no Service) never counts as bad.
		if ep.stages[i] == StageEndpointsReady && endpoints(&o.last, ep) == EndpointsNoService {
			continue
		}
		if o.last.skips(ep.stages[i]) {
			continue
		}
		evs = t.crossStage(evs, ep, i, now)
	}
	return evs
}

func (t *RolloutTracker) crossStage(evs []Event, ep *episode, i int, now time.Time) []Event {
	if ep.Recovered {
		return evs
	}
	age := ep.at(now).Sub(ep.Start).Seconds()
	for ep.next[i] < len(t.cfg.Thresholds) && age > t.cfg.Thresholds[ep.next[i]] {
		evs = ep.emit(evs, Event{Type: ThresholdCrossed, Stage: ep.stages[i], Threshold: ep.next[i]}, now)
		ep.next[i]++
	}
	return evs
}

// at is when what happens to ep at now happened on the episode's clock,
// which never goes back: now, or the latest At already emitted for ep if
// later (see episode.last). A stage received before a Tick that judged it
// not reached is thus timed at that Tick, its crossings flushed up to it:
// it counts once per threshold (bad as a crossing, never also good in the
// le=T bucket), and what follows from it (the close) is no earlier.
func (ep *episode) at(now time.Time) time.Time {
	if now.Before(ep.last) {
		return ep.last
	}
	return now
}

// emit appends ev, an event of ep happening at now, stamped at ep.at(now).
func (ep *episode) emit(evs []Event, ev Event, now time.Time) []Event {
	ep.last = ep.at(now)
	ev.Episode, ev.At = ep.Episode, ep.last
	if ev.Type == StageReached {
		ev.Duration = ev.At.Sub(ep.Start)
	}
	return append(evs, ev)
}

func (t *RolloutTracker) sortedOpenUIDs() []string {
	uids := make([]string, 0, len(t.inFlight))
	for uid := range t.inFlight {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	return uids
}

// settled reports whether a workload seen for the first time needs no
// episode: converged, paused, or an OnDelete workload whose generation is
// observed (a pending manual update is not the exporter's to time).
func settled(w *Workload) bool {
	if !w.observed() {
		return false
	}
	if (w.Kind == Deployment && w.Paused) || w.OnDelete {
		return true
	}
	for _, s := range Stages(w.Kind) {
		if s == StageEndpointsReady && w.Endpoints == EndpointsNoService {
			continue
		}
		if !w.reached(s, false) {
			return false
		}
	}
	return true
}

// reached reports whether the episode's stage s is reached in w. A scale or
// other change of an OnDelete workload converges on ready replicas of any
// revision: a pending manual update is not the controller's to finish.
func reached(w *Workload, ep *episode, s Stage) bool {
	anyRevision := w.OnDelete && ep.Change != ChangeTemplate
	if s == StageEndpointsReady {
		return w.observed() && endpoints(w, ep) == EndpointsReady
	}
	return w.reached(s, anyRevision)
}

// endpoints is the endpoints state the episode is judged on.
func endpoints(w *Workload, ep *episode) Endpoints {
	if w.OnDelete && ep.Change != ChangeTemplate {
		return w.EndpointsAnyRevision
	}
	return w.Endpoints
}

// classify names what a new generation changed, for an object with no
// episode open or whose open episode it supersedes.
func classify(o *object, cur *Workload) Change {
	if cur.Custom != nil {
		return ChangeOther // a custom resource's spec is opaque: create or other
	}
	prev := &o.last
	base := o.baseline
	if base == "" {
		base = prev.TemplateHash
	}
	switch {
	case cur.TemplateHash != base:
		return ChangeTemplate
	case prev.SpecReplicas != cur.SpecReplicas && prev.OtherHash == cur.OtherHash:
		return ChangeScale
	}
	// Strategy, minReadySeconds, pause/resume of the same template, or
	// metadata only (a Deployment's generation also moves on annotation
	// changes): timed live from receipt like any other write.
	return ChangeOther
}
