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
	// LateAfter: a pod first seen more than this after its API-side
	// creation time was created while the exporter was not watching (it was
	// down, or its watch was cut and it relisted), so its creation receive
	// time is unknown and its startup is not observed. 10 s, as for
	// rollouts: the 1 s truncation of creationTimestamp, watch delivery
	// (p99 10 ms on the sandbox, FACTS.md) and a few seconds of clock skew.
	// Zero: 10 s.
	LateAfter time.Duration
}

// PodEventType says what a PodEvent reports.
type PodEventType int

// Pod event types.
const (
	// PodStageReached: the pod's Stage condition turned True, Duration after
	// its creation, Interval after the previous stage (From).
	PodStageReached PodEventType = iota
	// PodThresholdCrossed: the pod's age passed Thresholds[Threshold] before
	// Stage was reached.
	PodThresholdCrossed
)

// PodEvent is an observation of the pod tracker.
type PodEvent struct {
	Type     PodEventType
	Pod      PodRef
	Stage    PodStage
	Duration time.Duration // PodStageReached: from creation
	// From is PodCreated or the stage reached before Stage, in the order the
	// conditions really turned True; Interval is the time since it.
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
// Timing. The start is the receive time of the pod's creation, and a stage is
// timed at the receive time of the update in which its condition is first
// True: watch delivery on the sandbox is 3-10 ms, while lastTransitionTime
// has one-second precision and the node's clock. When several conditions
// turn True in one update (kwok's pod-ready sets ContainersReady and Ready
// together; a relist can merge more), they are ordered by lastTransitionTime,
// ties by PodStages order, and all are timed at that receive time: their
// intervals are 0, never negative.
//
// Restarts. Pods of the initial list and pods first seen more than LateAfter
// after their creation are not observed: their creation receive time is
// unknown, and the status does not tell a pod still starting from one that
// was Ready for days and then lost readiness, so recovering them the way
// rollouts are recovered could invent startups of days. Their not-ready spell is timed from the Ready condition's
// lastTransitionTime (API side) for the stalled gauge. Pods created and
// started while the exporter was down are invisible; the threshold crossings
// a pod still starting at a restart would have after it are lost (at most
// the pods starting at that moment).
type PodTracker struct {
	cfg  PodStartupConfig
	pods map[string]*podEntry
}

type podEntry struct {
	ref    PodRef
	reason string   // NotReadyReason of the last record, "" when none applies
	stage  PodStage // the next stage not reached, per the last record
	// notReadySince starts the current not-ready spell (a receive time, or
	// API side for pods first seen late); zero while Ready or not counted.
	notReadySince time.Time
	ep            *podStartup // open while a live pod is starting
}

type podStartup struct {
	start   time.Time
	reached [numPodStages]bool
	present [numPodStages]bool // conditions in the last record's status
	last    string             // the last stage reached, PodCreated before any
	lastAt  time.Time
	next    [numPodStages]int // per stage: index of the next threshold not crossed yet
}

// NewPodTracker returns a tracker.
func NewPodTracker(cfg PodStartupConfig) *PodTracker {
	if cfg.LateAfter == 0 {
		cfg.LateAfter = 10 * time.Second
	}
	if cfg.StallAfter == 0 {
		cfg.StallAfter = 5 * time.Minute
	}
	return &PodTracker{cfg: cfg, pods: map[string]*podEntry{}}
}

// Observe takes the current record of a pod, received at now. initial is
// true for pods of the informer's initial list. Observing the same record
// again (a node's readiness changed) only refreshes the not-ready reason.
func (t *PodTracker) Observe(p Pod, now time.Time, initial bool) []PodEvent {
	e := t.pods[p.UID]
	first := e == nil
	if first {
		e = &podEntry{}
		t.pods[p.UID] = e
		if !initial && now.Sub(p.Created) <= t.cfg.LateAfter && NotReadyReason(p.Facts) != "" {
			e.ep = &podStartup{start: now, last: PodCreated, lastAt: now}
		}
	}
	e.ref = p.PodRef
	e.reason = NotReadyReason(p.Facts)
	e.stage = p.nextStage()
	switch {
	case e.reason == "":
		e.notReadySince = time.Time{}
	case e.notReadySince.IsZero() && first && e.ep == nil:
		e.notReadySince = p.notReadySince()
	case e.notReadySince.IsZero():
		e.notReadySince = now
	}
	if e.ep == nil {
		return nil
	}
	return t.advance(nil, e, &p, now)
}

// Delete forgets a deleted pod; a startup still open flushes its crossings.
func (t *PodTracker) Delete(uid string, now time.Time) []PodEvent {
	e := t.pods[uid]
	if e == nil {
		return nil
	}
	delete(t.pods, uid)
	if e.ep == nil {
		return nil
	}
	return t.cross(nil, e, now)
}

// Tick reports the thresholds that starting pods crossed by now. Crossings
// are also flushed before every stage observation and when a pod goes away,
// so how often Tick runs changes when they are counted, never whether.
func (t *PodTracker) Tick(now time.Time) []PodEvent {
	var evs []PodEvent
	uids := make([]string, 0, len(t.pods))
	for uid, e := range t.pods {
		if e.ep != nil {
			uids = append(uids, uid)
		}
	}
	sort.Strings(uids)
	for _, uid := range uids {
		evs = t.cross(evs, t.pods[uid], now)
	}
	return evs
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
// longest first.
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

// advance observes the stages whose conditions turned True, closes the
// startup when the pod is Ready, and when it stops starting without being
// Ready (terminating, finished) after flushing its crossings.
func (t *PodTracker) advance(evs []PodEvent, e *podEntry, p *Pod, now time.Time) []PodEvent {
	ep := e.ep
	present, isTrue, ltt := p.present()
	ep.present = present
	var newly []int
	for i := range PodStages {
		if isTrue[i] && !ep.reached[i] {
			newly = append(newly, i)
		}
	}
	sort.SliceStable(newly, func(a, b int) bool { return ltt[newly[a]].Before(ltt[newly[b]]) })
	for _, i := range newly {
		// Crossings first: a stage reached at d > T crossed T before, even
		// if no Tick ran in between; every pod then counts once per
		// threshold (good in the le=T bucket, or bad as a crossing).
		evs = t.crossStage(evs, e, i, now)
		evs = append(evs, PodEvent{Type: PodStageReached, Pod: e.ref, Stage: PodStages[i],
			Duration: now.Sub(ep.start), From: ep.last, Interval: max(0, now.Sub(ep.lastAt))})
		ep.reached[i] = true
		ep.last, ep.lastAt = string(PodStages[i]), now
	}
	switch {
	case ep.reached[podStageIndex(PodStageReady)]:
		// Stages still unreached were never reported: not counted.
		e.ep = nil
	case e.reason == "":
		// Terminating, or finished without ever being Ready (a Job pod):
		// it is gone for the startup SLI; the time it spent counts.
		evs = t.cross(evs, e, now)
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
	age := now.Sub(ep.start).Seconds()
	for ep.next[i] < len(t.cfg.Thresholds) && age > t.cfg.Thresholds[ep.next[i]] {
		evs = append(evs, PodEvent{Type: PodThresholdCrossed, Pod: e.ref, Stage: PodStages[i], Threshold: ep.next[i]})
		ep.next[i]++
	}
	return evs
}
