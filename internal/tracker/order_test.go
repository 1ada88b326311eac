package tracker

import (
	"fmt"
	"strings"
	"testing"
)

// Order follows causality. Receive times are stamped at the watch decoder
// and Tick runs on the collector's clock, so a record received at t1 can be
// handled after a Tick at t2 > t1 (the handler's lag). The steps below run
// in handling order; their times are receive times, so they go back. Each
// event is shown with its At ("@5.1s"); EpisodeOpened shows as "@..." alone.
// Whatever the order, the events of one episode never go back in time, its
// close comes no earlier than the stages that caused it, and a stage is
// never timed before a judgement (crossing, stall) already emitted for it.
func TestTickBetweenReceiptAndHandling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{{
		// The audit's case: the tick at +5.1s counted 5 s crossed; the
		// record that converges the rollout was received at +5.05s. The
		// stages are timed at the crossing (5.1 s), and so is the close:
		// at +5.05s it sorted before them, and the episode lasted 5.05 s
		// while its stages took 5.1 s.
		name: "stage that closes the episode",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "5.1s", tick: true, want: []string{
				"crossed observed >1@5.1s", "crossed observed >5@5.1s", "crossed updated >1@5.1s", "crossed updated >5@5.1s",
				"crossed available >1@5.1s", "crossed available >5@5.1s"}},
			{at: "5.05s", w: p(deploy(1, 1, 3, 3, 3)), want: []string{
				"reached observed 5.1s@5.1s", "reached updated 5.1s@5.1s", "reached available 5.1s@5.1s", "closed converged@5.1s"}},
		},
	}, {
		// Only the last stage was still open at the tick.
		name: "last stage after earlier ones",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "2s", w: p(deploy(1, 1, 3, 3, 0)), want: []string{
				"crossed observed >1@2s", "reached observed 2s@2s", "crossed updated >1@2s", "reached updated 2s@2s"}},
			{at: "5.1s", tick: true, want: []string{"crossed available >1@5.1s", "crossed available >5@5.1s"}},
			{at: "5.05s", w: p(deploy(1, 1, 3, 3, 3)), want: []string{"reached available 5.1s@5.1s", "closed converged@5.1s"}},
		},
	}, {
		// Every threshold was crossed at +31s; the tick at +60.1s judged the
		// episode stalled and crossed nothing. The record that converges it,
		// received at +60.05s, is timed at the stall: the stall said it had
		// not converged at +60.1s.
		name: "stall judged by the tick",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "100ms", w: p(deploy(1, 1, 3, 0, 0)), want: []string{"reached observed 100ms@100ms"}},
			{at: "31s", tick: true, want: []string{
				"crossed updated >1@31s", "crossed updated >5@31s", "crossed updated >30@31s",
				"crossed available >1@31s", "crossed available >5@31s", "crossed available >30@31s"}},
			{at: "60.1s", tick: true, want: []string{"stalled updated other@1m0.1s"}},
			{at: "60.05s", w: p(deploy(1, 1, 3, 3, 3)), want: []string{
				"reached updated 1m0.1s@1m0.1s", "reached available 1m0.1s@1m0.1s", "closed converged@1m0.1s"}},
		},
	}, {
		// A deletion received before the tick that crossed 1 s.
		name: "deletion",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "1.1s", tick: true, want: []string{"crossed observed >1@1.1s", "crossed updated >1@1.1s", "crossed available >1@1.1s"}},
			{at: "1.05s", del: true, want: []string{"closed deleted@1.1s"}},
		},
	}, {
		// A new revision received before the tick: the old episode closes
		// at the tick's judgement; the new one starts at its write's
		// receipt, which the tick did not judge.
		name: "superseding write",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "1.1s", tick: true, want: []string{"crossed observed >1@1.1s", "crossed updated >1@1.1s", "crossed available >1@1.1s"}},
			{at: "1.05s", w: p(with(deploy(2, 0, 3, 0, 0), func(w *Workload) { w.TemplateHash = "t2" })), want: []string{
				"closed superseded@1.1s", "@1.05s"}},
			{at: "1.5s", w: p(with(deploy(2, 2, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t2" })), want: []string{
				"reached observed 450ms@1.5s", "reached updated 450ms@1.5s", "reached available 450ms@1.5s", "closed converged@1.5s"}},
		},
	}, {
		// A tick that judged nothing leaves the receive time standing.
		name: "tick that emitted nothing",
		steps: []step{
			{at: "0s", w: p(deploy(1, 0, 3, 0, 0)), want: []string{"@0s"}},
			{at: "0.95s", tick: true},
			{at: "0.9s", w: p(deploy(1, 1, 3, 3, 3)), want: []string{
				"reached observed 900ms@900ms", "reached updated 900ms@900ms", "reached available 900ms@900ms", "closed converged@900ms"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { runAt(t, newTracker(), tc.steps) })
	}
}

// runAt is run with each event's At shown.
func runAt(t *testing.T, tr *RolloutTracker, steps []step) {
	t.Helper()
	var all []Event
	for i, s := range steps {
		now := at(s.at)
		var evs []Event
		switch {
		case s.tick:
			evs = tr.Tick(now)
		case s.del:
			evs = tr.Delete("u1", Seen{At: now, Live: true})
		default:
			evs = tr.Observe(*s.w, Seen{At: now, Live: !s.initial})
		}
		all = append(all, evs...)
		got := make([]string, len(evs))
		for j, e := range evs {
			got[j] = fmt.Sprintf("%s@%v", strings.Join(format([]Event{e}), ""), e.At.Sub(t0))
		}
		if got, want := strings.Join(got, "; "), strings.Join(s.want, "; "); got != want {
			t.Errorf("step %d at +%s:\n got: %s\nwant: %s", i, s.at, got, want)
		}
	}
	checkOrder(t, all)
}

// checkOrder checks the order invariant on the events of a run, in
// emission order: per episode, At never goes back, and a stage's At is its
// start plus its Duration (so the close, no earlier than any stage, lasts
// at least as long as each).
func checkOrder(t *testing.T, evs []Event) {
	t.Helper()
	type key struct {
		uid string
		gen int64
	}
	last := map[key]Event{}
	for _, e := range evs {
		k := key{e.Episode.UID, e.Episode.Generation}
		if e.Type == StageReached && !e.At.Equal(e.Episode.Start.Add(e.Duration)) {
			t.Errorf("%s at %v, its start plus its duration is %v", format([]Event{e}), e.At.Sub(t0), e.Episode.Start.Add(e.Duration).Sub(t0))
		}
		if prev, ok := last[k]; ok && e.At.Before(prev.At) {
			t.Errorf("episode %s/%d: %v at %v after %v at %v", k.uid, k.gen, format([]Event{e}), e.At.Sub(t0), format([]Event{prev}), prev.At.Sub(t0))
		}
		last[k] = e
	}
}

// The same for pod startups, whose events carry durations: a stage is
// never timed before a crossing already counted for the startup, nor
// before a stage already reached (every stage crossed 1 s at the tick at
// +1.2s; initialized, received at +1.1s, was timed 1.1 s after scheduled's
// 1.2 s, with its negative interval shown as 0).
func TestPodTickBetweenReceiptAndHandling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []podStep
	}{{
		name: "stage after a clamped one",
		steps: []podStep{
			{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
			{at: "1.2s", want: []string{"crossed scheduled >1", "crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
			{at: "0.9s", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 1.2s from created +1.2s"}},
			{at: "1.1s", pod: pp(startingPod("scheduled@0s", "initialized@1s")), want: []string{"reached initialized 1.2s from scheduled +0s"}},
		},
	}, {
		// Received above the threshold the tick crossed last (2 s), but
		// before the tick: timed at the tick, which judged it not reached.
		name: "stage above the crossed threshold",
		steps: []podStep{
			{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
			{at: "50ms", pod: pp(startingPod("scheduled@0s")), want: []string{"reached scheduled 50ms from created +50ms"}},
			{at: "2.1s", want: []string{
				"crossed initialized >1", "crossed initialized >2", "crossed containers_ready >1", "crossed containers_ready >2",
				"crossed ready >1", "crossed ready >2"}},
			{at: "2.05s", pod: pp(startingPod("scheduled@0s", "initialized@2s", "containers_ready@2s", "ready@2s")), want: []string{
				"reached initialized 2.1s from scheduled +2.05s", "reached containers_ready 2.1s from initialized +0s", "reached ready 2.1s from containers_ready +0s"}},
		},
	}, {
		// ready_to_start_containers was not reported at the tick, which
		// crossed nothing for it; received at +0.9s with scheduled, which
		// the tick judged: timed at the tick too, after its crossing of
		// 1 s is flushed, so it still counts once (bad), not neither.
		name: "stage the tick did not judge",
		steps: []podStep{
			{at: "0s", pod: pp(startingPod()), want: []string{"opened"}},
			{at: "1.2s", want: []string{"crossed scheduled >1", "crossed initialized >1", "crossed containers_ready >1", "crossed ready >1"}},
			{at: "0.9s", pod: pp(startingPod("scheduled@0s", "ready_to_start_containers@0s")), want: []string{
				"reached scheduled 1.2s from created +1.2s",
				"crossed ready_to_start_containers >1", "reached ready_to_start_containers 1.2s from scheduled +0s"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { runPod(t, newPodTracker(), tc.steps) })
	}
}

// The same for endpoint propagation: a pair is never timed before a
// crossing already counted for its pending spell, and a new spell starts
// with no judgement.
func TestEndpointTickBetweenReceiptAndHandling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []epStep
	}{{
		name: "publication above the crossed threshold",
		steps: []epStep{
			{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
			{at: "1.1s", want: []string{"crossed web/p1 >1"}},
			{at: "2.1s", want: []string{"crossed web/p1 >2"}},
			{at: "2.05s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 2.1s"}},
		},
	}, {
		// Not Ready and Ready again, both received before the tick that
		// crossed the first spell: the second spell is timed on its own.
		name: "new spell after a crossed one",
		steps: []epStep{
			{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
			{at: "1.1s", want: []string{"crossed web/p1 >1"}},
			{at: "1.05s", pod: served("p1", "not-ready", "web")},
			{at: "1.08s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
			{at: "1.09s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 10ms"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { runEndpoints(t, newEndpointTracker(), tc.steps) })
	}
}
