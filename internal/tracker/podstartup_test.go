package tracker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Pod startup timelines: the pod is created at t0 (as the exporter received
// it); at each step the tracker sees the pod's record and emits events,
// shown as short strings:
//
//	"reached initialized 1.05s from scheduled +1s"   a stage, its duration from creation, its interval
//	"crossed ready >2"                                a threshold passed before the stage
var podThresholds = []float64{1, 2, 5}

func newPodTracker() *PodTracker {
	return NewPodTracker(PodStartupConfig{Thresholds: podThresholds, StallAfter: time.Minute})
}

func formatPod(evs []PodEvent) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		switch {
		case e.Type == PodStageReached && e.From == "":
			out = append(out, fmt.Sprintf("reached %s %v, no interval", e.Stage, e.Duration))
		case e.Type == PodStageReached:
			out = append(out, fmt.Sprintf("reached %s %v from %s +%v", e.Stage, e.Duration, e.From, e.Interval))
		case e.Type == PodThresholdCrossed:
			out = append(out, fmt.Sprintf("crossed %s >%g", e.Stage, podThresholds[e.Threshold]))
		case e.Type == PodStartupOpened:
			out = append(out, "opened")
		case e.Type == PodRecovered:
			out = append(out, "recovered")
		}
	}
	return out
}

// startingPod builds the record of pod "p1" of a ReplicaSet, created at t0,
// from condition specs "stage@offset" (True, lastTransitionTime t0+offset)
// or "-stage@offset" (present and False). Phase and readiness follow from
// the conditions the way kwok writes them.
func startingPod(conds ...string) Pod {
	p := Pod{PodRef: PodRef{UID: "p1", Namespace: "ns", Name: "web-1", OwnerKind: "ReplicaSet"}, Created: t0,
		Facts: PodFacts{Phase: "Pending", Containers: []ContainerState{{WaitingReason: "ContainerCreating"}}}}
	for _, c := range conds {
		stage, offset, _ := strings.Cut(c, "@")
		isTrue := !strings.HasPrefix(stage, "-")
		stage = strings.TrimPrefix(stage, "-")
		if podStageIndex(PodStage(stage)) < 0 {
			panic("unknown stage " + stage)
		}
		p.Conditions = append(p.Conditions, PodCondition{Stage: PodStage(stage), True: isTrue, LastTransition: at(offset)})
		switch {
		case stage == string(PodStageReady) && isTrue:
			p.Facts.Ready = true
			p.Facts.Phase = "Running"
			p.Facts.Containers = []ContainerState{{Running: true}}
		case stage == string(PodStageContainersReady) && isTrue:
			p.Facts.Phase = "Running"
			p.Facts.Containers = []ContainerState{{Running: true}}
		}
	}
	return p
}

func withFacts(p Pod, f func(*PodFacts)) Pod { f(&p.Facts); return p }

type podStep struct {
	at     string
	pod    *Pod // observe this record (nil: tick, or delete)
	listed bool // delivered by a list cycle (an Observe), or a delete tombstone (a Delete)
	del    bool
	want   []string
}

func runPod(t *testing.T, tr *PodTracker, steps []podStep) {
	t.Helper()
	var last time.Duration // the duration of the startup's last stage reached
	for i, s := range steps {
		now := at(s.at)
		var evs []PodEvent
		switch {
		case s.del:
			evs = tr.Delete("p1", Seen{At: now, Live: !s.listed})
		case s.pod == nil:
			evs = tr.Tick(now)
		default:
			evs = tr.Observe(*s.pod, Seen{At: now, Live: !s.listed})
		}
		if got, want := strings.Join(formatPod(evs), "; "), strings.Join(s.want, "; "); got != want {
			t.Errorf("step %d at +%s:\n got: %s\nwant: %s", i, s.at, got, want)
		}
		// Order follows causality: a stage is never timed before one
		// already reached.
		for _, e := range evs {
			switch e.Type {
			case PodStartupOpened:
				last = 0
			case PodStageReached:
				if e.Duration < last {
					t.Errorf("step %d at +%s: %s after a stage reached at %v", i, s.at, formatPod([]PodEvent{e}), last)
				}
				last = e.Duration
			}
		}
	}
}

func pp(p Pod) *Pod { return &p }

// kwok's general stages with pod-create 1 s and pod-ready 2 s: the scheduler
// binds in 50 ms, Initialized at 1.05 s, ContainersReady and Ready together
// at 3.05 s. ready_to_start_containers is never reported: never counted.
func TestPodStartupStagesKwokGeneral(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "50ms", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 50ms from created +50ms"}},
		{at: "1.05s", pod: pp(startingPod("scheduled@0s", "initialized@1s", "-containers_ready@1s", "-ready@1s")), want: []string{
			"crossed initialized >1", "reached initialized 1.05s from scheduled +1s"}},
		{at: "2.5s", want: []string{"crossed containers_ready >1", "crossed containers_ready >2", "crossed ready >1", "crossed ready >2"}},
		{at: "3.05s", pod: pp(startingPod("scheduled@0s", "initialized@1s", "containers_ready@3s", "ready@3s")), want: []string{
			"reached containers_ready 3.05s from initialized +2s", "reached ready 3.05s from containers_ready +0s"}},
		{at: "10s"}, // closed at Ready: nothing left to cross
	})
}

// No Tick between creation and Ready at 6 s: every crossing is flushed
// before its stage, so each threshold counts once per stage either way.
func TestPodCrossingsFlushedBeforeAStageWithoutTick(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "6s", pod: pp(startingPod("scheduled@0s", "initialized@1s", "containers_ready@5s", "ready@5s")), want: []string{
			"crossed scheduled >1", "crossed scheduled >2", "crossed scheduled >5", "reached scheduled 6s from created +6s",
			"crossed initialized >1", "crossed initialized >2", "crossed initialized >5", "reached initialized 6s from scheduled +0s",
			"crossed containers_ready >1", "crossed containers_ready >2", "crossed containers_ready >5", "reached containers_ready 6s from initialized +0s",
			"crossed ready >1", "crossed ready >2", "crossed ready >5", "reached ready 6s from containers_ready +0s",
		}},
	})
}

// Several conditions in one update are ordered by lastTransitionTime, not by
// the kubelet's usual order: a pod without init containers gets Initialized
// (1 s) before PodReadyToStartContainers (2 s). All are timed at the receive
// time, so their intervals are 0.
func TestPodConditionsInOneUpdateOrderedByLastTransitionTime(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "900ms", pod: pp(startingPod("scheduled@0s", "ready_to_start_containers@0s", "-initialized@0s")), want: []string{
			"reached scheduled 900ms from created +900ms", "reached ready_to_start_containers 900ms from scheduled +0s"}},
		{at: "1.5s", pod: pp(startingPod("scheduled@0s", "ready_to_start_containers@2s", "initialized@1s", "-ready@1s")), want: []string{
			"crossed initialized >1", "reached initialized 1.5s from ready_to_start_containers +600ms"}},
	})
	// Initialized earlier than PodReadyToStartContainers by lastTransitionTime,
	// both new in one update: initialized comes first.
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "800ms", pod: pp(startingPod("scheduled@0s", "ready_to_start_containers@2s", "initialized@1s")), want: []string{
			"reached scheduled 800ms from created +800ms",
			"reached initialized 800ms from scheduled +0s",
			"reached ready_to_start_containers 800ms from initialized +0s"}},
	})
	// Same second: ties go to PodStages order.
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "700ms", pod: pp(startingPod("ready@0s", "containers_ready@0s", "initialized@0s", "scheduled@0s")), want: []string{
			"reached scheduled 700ms from created +700ms", "reached initialized 700ms from scheduled +0s",
			"reached containers_ready 700ms from initialized +0s", "reached ready 700ms from containers_ready +0s"}},
	})
}

// The missing-condition case: ready_to_start_containers counts against the
// SLI only once the node reports the condition. Reported False, it crosses
// like any stage.
func TestReadyToStartContainersCountsOnlyWhenReported(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod("scheduled@0s")), want: []string{"opened", "reached scheduled 0s from created +0s"}},
		{at: "1.5s", want: []string{"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "1.6s", pod: pp(startingPod("scheduled@0s", "-ready_to_start_containers@1s", "-initialized@1s"))},
		// Now reported: its 1 s crossing comes at the next tick, once.
		{at: "1.7s", want: []string{"crossed ready_to_start_containers >1"}},
		{at: "1.8s", pod: pp(startingPod("scheduled@0s", "ready_to_start_containers@1s", "initialized@1s")), want: []string{
			"reached ready_to_start_containers 1.8s from scheduled +1.8s", "reached initialized 1.8s from ready_to_start_containers +0s"}},
	})
}

// PodScheduled never set (kwok does not set it on pods bound at creation):
// once a later stage is reached without it, it no longer counts.
func TestMissingScheduledIsSkippedOnceALaterStageIsReached(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "500ms", pod: pp(startingPod("initialized@0s", "-ready@0s")), want: []string{"reached initialized 500ms from created +500ms"}},
		{at: "1.5s", want: []string{"crossed containers_ready >1", "crossed ready >1"}},
		{at: "2s", pod: pp(startingPod("initialized@0s", "containers_ready@2s", "ready@2s")), want: []string{
			"reached containers_ready 2s from initialized +1.5s", "reached ready 2s from containers_ready +0s"}},
	})
}

// A pod that cannot be scheduled counts against every stage while it is
// stuck, is reported stalled past the threshold, and its deletion flushes
// the crossings since the last tick.
func TestUnschedulablePodCountsWhileStuck(t *testing.T) {
	stuck := withFacts(startingPod("-scheduled@0s"), func(f *PodFacts) { f.Unschedulable = true; f.Containers = nil })
	tr := newPodTracker()
	runPod(t, tr, []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "10ms", pod: &stuck},
		{at: "1.5s", want: []string{"crossed scheduled >1", "crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
	})
	if s := tr.Stalled(at("59s")); len(s) != 0 {
		t.Fatalf("stalled before the threshold: %+v", s)
	}
	s := tr.Stalled(at("61s"))
	if len(s) != 1 || s[0].Reason != PodUnschedulable || s[0].Stage != PodStageScheduled || s[0].Age != 61*time.Second {
		t.Fatalf("stalled = %+v, want p1 unschedulable at stage scheduled for 61s", s)
	}
	if got := tr.NotReady(); got["ns"][PodUnschedulable] != 1 || len(got["ns"]) != 1 {
		t.Fatalf("not ready = %v", got)
	}
	runPod(t, tr, []podStep{
		{at: "62s", del: true, want: []string{"crossed scheduled >2", "crossed scheduled >5", "crossed initialized >2", "crossed initialized >5",
			"crossed containers_ready >2", "crossed containers_ready >5", "crossed ready >2", "crossed ready >5"}},
		{at: "70s"},
	})
	if len(tr.NotReady()) != 0 || len(tr.Stalled(at("70s"))) != 0 {
		t.Fatalf("deleted pod still counted")
	}
}

// A pod scaled down while starting: terminating ends its startup (the time
// it spent counts) and it is no longer "not ready".
func TestTerminatingDuringStartupFlushesAndStops(t *testing.T) {
	tr := newPodTracker()
	terminating := withFacts(startingPod("scheduled@0s"), func(f *PodFacts) { f.Terminating = true })
	runPod(t, tr, []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "1.2s", pod: &terminating, want: []string{"crossed scheduled >1", "reached scheduled 1.2s from created +1.2s",
			"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "3s"},
	})
	if len(tr.NotReady()) != 0 || tr.Starting("p1") {
		t.Fatalf("terminating pod still counted: %v", tr.NotReady())
	}
}

// A Job pod that finishes before the kubelet reported it Ready is not "not
// ready" and stops counting.
func TestFinishedPodIsNotNotReady(t *testing.T) {
	tr := newPodTracker()
	done := withFacts(startingPod("scheduled@0s", "initialized@0s", "-ready@0s"), func(f *PodFacts) { f.Phase = "Succeeded" })
	done.OwnerKind = "Job"
	runPod(t, tr, []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "800ms", pod: &done, want: []string{"reached scheduled 800ms from created +800ms", "reached initialized 800ms from scheduled +0s"}},
		{at: "5s"},
	})
	if len(tr.NotReady()) != 0 {
		t.Fatalf("finished pod counted as not ready: %v", tr.NotReady())
	}
}

// Each stage at most once: a pod that was Ready and loses readiness is not
// starting again; it is not ready (readiness_failing), and stalled, timed
// from when readiness was lost.
func TestLostReadinessIsNotARestart(t *testing.T) {
	tr := newPodTracker()
	ready := startingPod("scheduled@0s", "initialized@0s", "containers_ready@1s", "ready@1s")
	lost := withFacts(startingPod("scheduled@0s", "initialized@0s", "-containers_ready@10s", "-ready@10s"), func(f *PodFacts) {
		f.Phase = "Running"
		f.Containers = []ContainerState{{Running: true}}
	})
	runPod(t, tr, []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "1s", pod: &ready, want: []string{"reached scheduled 1s from created +1s", "reached initialized 1s from scheduled +0s",
			"reached containers_ready 1s from initialized +0s", "reached ready 1s from containers_ready +0s"}},
		{at: "10s", pod: &lost},
		{at: "20s"},
		{at: "30s", pod: &ready},
		{at: "40s", pod: &lost},
	})
	if got := tr.NotReady()["ns"][PodReadinessFailing]; got != 1 {
		t.Fatalf("readiness_failing = %d, want 1", got)
	}
	s := tr.Stalled(at("101s"))
	if len(s) != 1 || s[0].Age != 61*time.Second || s[0].Stage != PodStageContainersReady {
		t.Fatalf("stalled = %+v, want one since +40s at stage containers_ready", s)
	}
}

// Restart semantics: pods of the initial list, and pods first seen more
// than 10 s after their creation (a watch gap), are not observed; their
// not-ready spell is timed from the API side for the stalled gauge.
func TestPodsOfTheInitialListAreNotObserved(t *testing.T) {
	tr := newPodTracker()
	notReady := withFacts(startingPod("scheduled@0s", "initialized@1s", "-containers_ready@2s", "-ready@2s"), func(f *PodFacts) {
		f.Phase = "Running"
		f.Containers = []ContainerState{{Running: true}}
	})
	runPod(t, tr, []podStep{
		{at: "1h", pod: &notReady, listed: true, want: []string{"recovered"}},
		{at: "1h1s"},
		{at: "1h2s", pod: pp(startingPod("scheduled@0s", "initialized@1s", "containers_ready@1h2s", "ready@1h2s"))},
		{at: "1h3s"},
	})
	tr = newPodTracker()
	tr.Observe(notReady, ListedAt(at("1h")))
	s := tr.Stalled(at("1h"))
	if len(s) != 1 || s[0].Age != time.Hour-2*time.Second || s[0].Reason != PodReadinessFailing {
		t.Fatalf("stalled = %+v, want readiness_failing since the Ready condition's transition at +2s", s)
	}
	late := startingPod()
	runPod(t, newPodTracker(), []podStep{
		{at: "30s", pod: &late, want: []string{"recovered"}}, // first seen live, 30 s after its creation (a resumed watch's backlog)
		{at: "35s"},
		{at: "36s", pod: pp(startingPod("scheduled@0s"))},
	})
	// Within 10 s it is live: creation timestamps are truncated to the second.
	runPod(t, newPodTracker(), []podStep{
		{at: "900ms", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "1s", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 100ms from created +100ms"}},
	})
}

// A node losing readiness changes the reason of its pods without a pod
// update: the collector observes the same record again with the new facts.
func TestNodeNotReadyRefreshesTheReason(t *testing.T) {
	tr := newPodTracker()
	p := startingPod("scheduled@0s")
	tr.Observe(p, LiveAt(at("0s")))
	if got := tr.NotReady()["ns"]; got[PodOther] != 1 {
		t.Fatalf("not ready = %v", got)
	}
	if evs := tr.Observe(withFacts(p, func(f *PodFacts) { f.NodeNotReady = true }), LiveAt(at("1s"))); len(evs) != 0 {
		t.Fatalf("re-observing produced events: %v", formatPod(evs))
	}
	if got := tr.NotReady()["ns"]; got[PodNodeNotReady] != 1 || got[PodOther] != 0 {
		t.Fatalf("not ready = %v, want node_not_ready", got)
	}
}

func TestPodStalledLongestFirst(t *testing.T) {
	tr := newPodTracker()
	for i, ns := range []string{"a", "b", "c"} {
		p := startingPod()
		p.UID, p.Namespace = fmt.Sprint("u", i), ns
		tr.Observe(p, LiveAt(at(fmt.Sprintf("%ds", i))))
	}
	s := tr.Stalled(at("62s"))
	if len(s) != 2 || s[0].Pod.UID != "u0" || s[1].Pod.UID != "u1" {
		t.Fatalf("stalled = %+v, want u0 then u1 (longest first)", s)
	}
	if got := tr.NotReady(); len(got) != 3 || got["c"][PodOther] != 1 {
		t.Fatalf("not ready = %v, want one pod starting in each of a, b, c", got)
	}
}
