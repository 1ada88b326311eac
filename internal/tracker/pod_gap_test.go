package tracker

import (
	"testing"
	"time"
)

// Watch gaps for pods. "listed" steps are records
// delivered by a list cycle (initial list or relist); the truth of each
// timeline is written in its comment, and the expected events follow from it
// by hand.

// Cut from +1s to +6s; the pod was created at +2s and turned Ready at +4s,
// both during the cut. The relist at +6s delivers it Ready: its startup is
// not timed (not 0 s, not 4 s), it is counted once as recovered, and it
// never crosses a threshold.
func TestPodCreatedDuringAGapIsRecoveredNotTimed(t *testing.T) {
	ready := startingPod("scheduled@2s", "initialized@2s", "containers_ready@4s", "ready@4s")
	ready.Created = at("2s")
	runPod(t, newPodTracker(), []podStep{
		{at: "6s", pod: &ready, listed: true, want: []string{"recovered"}},
		{at: "7s"},
		{at: "8s", pod: &ready}, // a later live copy: not a new pod
		{at: "20s"},
	})
	// Created at +2s and still starting at the relist: not timed either,
	// neither its later live stages nor any crossing.
	starting := startingPod("scheduled@2s")
	starting.Created = at("2s")
	runPod(t, newPodTracker(), []podStep{
		{at: "6s", pod: &starting, listed: true, want: []string{"recovered"}},
		{at: "9s"},
		{at: "10s", pod: pp(withCreated(startingPod("scheduled@2s", "initialized@2s", "containers_ready@10s", "ready@10s"), "2s"))},
		{at: "20s"},
	})
}

// Created live at 0; Initialized turned True at +3s during a cut from +2s
// to +5s, seen in the relist at +5s: not observed, and neither is the
// interval after it. Ready arrives live at +5.5s: timed from the known
// creation (5.5 s), with no interval. Crossings counted before the cut stand
// and none is invented for the stage reached in the gap.
func TestPodStageReachedDuringAGapIsNotObserved(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "50ms", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 50ms from created +50ms"}},
		{at: "1.5s", want: []string{"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "5s", pod: pp(startingPod("scheduled@0s", "initialized@3s", "-ready@3s")), listed: true},
		{at: "5.5s", pod: pp(startingPod("scheduled@0s", "initialized@3s", "containers_ready@5s", "ready@5s")), want: []string{
			"crossed containers_ready >2", "crossed containers_ready >5", "reached containers_ready 5.5s, no interval",
			"crossed ready >2", "crossed ready >5", "reached ready 5.5s from containers_ready +0s"}},
	})
}

// A starting pod that terminated, or was deleted, during a gap: the change is
// learned from the relist (a listed record, a delete tombstone) at +10s. The
// crossings of the gap are not flushed at the relist time.
func TestPodEndedDuringAGapFlushesNothing(t *testing.T) {
	terminating := withFacts(startingPod("scheduled@0s"), func(f *PodFacts) { f.Terminating = true })
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod("scheduled@0s")), want: []string{"opened", "reached scheduled 0s from created +0s"}},
		{at: "1.5s", want: []string{"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "10s", pod: &terminating, listed: true},
		{at: "20s"},
	})
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod("scheduled@0s")), want: []string{"opened", "reached scheduled 0s from created +0s"}},
		{at: "1.5s", want: []string{"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "10s", del: true, listed: true},
	})
}

func gatedPod() Pod {
	return withFacts(startingPod("-scheduled@0s"), func(f *PodFacts) { f.SchedulingGated = true; f.Containers = nil })
}

func withCreated(p Pod, offset string) Pod { p.Created = at(offset); return p }

// A pod created with a scheduling gate at 0 waits in an
// admission queue; its last gate is removed at +20s (as received). While
// gated it crosses nothing and is scheduling_gated, not stalled. Its startup
// starts at +20s: scheduled at +20.05s is 50 ms, Ready at +23s is 3 s.
func TestGatedPodStartsAtTheGateRemoval(t *testing.T) {
	tr := newPodTracker()
	gated := gatedPod()
	runPod(t, tr, []podStep{
		{at: "0s", pod: &gated},
		{at: "5s"},
		{at: "19s"},
	})
	if got := tr.NotReady()["ns"]; got[PodSchedulingGated] != 1 || len(got) != 1 {
		t.Fatalf("not ready = %v, want one scheduling_gated", got)
	}
	if s := tr.Stalled(at("10m")); len(s) != 0 {
		t.Fatalf("a gated pod is stalled: %+v", s)
	}
	runPod(t, tr, []podStep{
		{at: "20s", pod: pp(startingPod("-scheduled@0s")), want: []string{"opened"}},
		{at: "20.05s", pod: pp(startingPod("scheduled@20s")), want: []string{"reached scheduled 50ms from created +50ms"}},
		{at: "21.5s", want: []string{"crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "23s", pod: pp(startingPod("scheduled@20s", "initialized@21s", "containers_ready@23s", "ready@23s")), want: []string{
			"crossed initialized >2", "reached initialized 3s from scheduled +2.95s",
			"crossed containers_ready >2", "reached containers_ready 3s from initialized +0s",
			"crossed ready >2", "reached ready 3s from containers_ready +0s"}},
	})
	// Stalled from the gate removal, not from the creation.
	tr = newPodTracker()
	tr.Observe(gatedPod(), LiveAt(at("0s")))
	tr.Observe(startingPod("-scheduled@0s"), LiveAt(at("20s")))
	if s := tr.Stalled(at("81s")); len(s) != 1 || s[0].Age != 61*time.Second {
		t.Fatalf("stalled = %+v, want 61s since the gate removal", s)
	}
}

// A gated pod delivered by a list (created during a gap, or before the
// exporter started) is still timed when its gate removal arrives live: that
// removal is its start. Ungated during a gap instead: recovered, once.
func TestGatedPodOfAListIsTimedFromALiveGateRemoval(t *testing.T) {
	gated := withCreated(gatedPod(), "-1h")
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: &gated, listed: true},
		{at: "10s", pod: pp(withCreated(startingPod("-scheduled@0s"), "-1h")), want: []string{"opened"}},
		{at: "10.2s", pod: pp(withCreated(startingPod("scheduled@10s"), "-1h")), want: []string{"reached scheduled 200ms from created +200ms"}},
	})
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: &gated, listed: true},
		{at: "10s", pod: pp(withCreated(startingPod("scheduled@8s"), "-1h")), listed: true, want: []string{"recovered"}},
		{at: "10.5s", pod: pp(withCreated(startingPod("scheduled@8s"), "-1h")), listed: true},
		{at: "20s"},
	})
}

// Receive times out of order: Ready was received at +0.9s but handled after
// a Tick at +1.2s had counted every stage's 1 s crossing. The stage is timed
// at the crossing (1.2 s), so it is counted bad for 1 s once, and not also
// good in the le=1 bucket.
func TestStageReceivedBeforeATickThatCrossedIsClamped(t *testing.T) {
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "1.2s", want: []string{"crossed scheduled >1", "crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
		{at: "0.9s", pod: pp(startingPod("scheduled@0s", "initialized@0s", "containers_ready@0s", "ready@0s")), want: []string{
			"reached scheduled 1.2s from created +1.2s", "reached initialized 1.2s from scheduled +0s",
			"reached containers_ready 1.2s from initialized +0s", "reached ready 1.2s from containers_ready +0s"}},
	})
	// No crossing counted yet: the receive time stands.
	runPod(t, newPodTracker(), []podStep{
		{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
		{at: "0.95s"},
		{at: "0.9s", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 900ms from created +900ms"}},
	})
}

// Tick visits due pods only, in deadline order, and a pod with every
// threshold crossed leaves the index: 1,000 stuck pods cross 5 s once each.
func TestPodTickCountsEachCrossingOnce(t *testing.T) {
	tr := newPodTracker()
	for i := range 1000 {
		p := withFacts(startingPod("-scheduled@0s"), func(f *PodFacts) { f.Unschedulable = true })
		p.UID = "u" + string(rune('a'+i%26)) + time.Duration(i).String()
		tr.Observe(p, LiveAt(t0))
	}
	count := map[float64]int{}
	for _, s := range []string{"0.5s", "1.5s", "1.7s", "3s", "10s", "1h"} {
		for _, e := range tr.Tick(at(s)) {
			if e.Type == PodThresholdCrossed && e.Stage == PodStageScheduled {
				count[podThresholds[e.Threshold]]++
			}
		}
	}
	if count[1] != 1000 || count[2] != 1000 || count[5] != 1000 || len(count) != 3 {
		t.Fatalf("crossings of scheduled by threshold = %v, want 1000 each of 1, 2, 5", count)
	}
	if tr.due.len() != 0 {
		t.Fatalf("%d pods left in the deadline index after every threshold was crossed", tr.due.len())
	}
}
