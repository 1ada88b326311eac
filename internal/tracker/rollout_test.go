package tracker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The tests read as timelines: at a time after t0 (the write, as the
// exporter received it), the tracker sees a record and emits events, shown
// as short strings:
//
//	"reached observed 200ms"    a stage reached, duration from the write
//	"crossed available >1"      a threshold (seconds) passed before the stage
//	"closed converged"          an episode ended
//	"recovered"                 an episode in flight found late
//	"stalled updated other"     passed the stall threshold: next stage, reason
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

var thresholds = []float64{1, 5, 30}

func newTracker() *RolloutTracker {
	return NewRolloutTracker(RolloutConfig{
		Thresholds: thresholds,
		StallAfter: func(Kind) time.Duration { return time.Minute },
	})
}

func at(d string) time.Time {
	dd, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return t0.Add(dd)
}

func format(evs []Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		switch e.Type {
		case StageReached:
			out = append(out, fmt.Sprintf("reached %s %v", e.Stage, e.Duration))
		case ThresholdCrossed:
			out = append(out, fmt.Sprintf("crossed %s >%g", e.Stage, thresholds[e.Threshold]))
		case EpisodeClosed:
			out = append(out, fmt.Sprintf("closed %s", e.Outcome))
		case EpisodeRecovered:
			out = append(out, "recovered")
		case EpisodeStalled:
			out = append(out, fmt.Sprintf("stalled %s %s", e.Stage, e.Reason))
		case EpisodeOpened:
			// Not shown: every timeline opens episodes; TestOpenedEvents checks them.
		}
	}
	return out
}

// deploy builds a Deployment record: generation gen, observed obs, spec
// replicas n with `updated` and `available` replicas, created at t0.
func deploy(gen, obs int64, n, updated, available int32) Workload {
	return Workload{
		Kind: Deployment, UID: "u1", Namespace: "ns", Name: "web",
		Generation: gen, ObservedGeneration: obs, Created: t0, SpecWritten: t0,
		TemplateHash: "t1", OtherHash: "o1", SpecReplicas: n,
		Status: Status{Replicas: n, UpdatedReplicas: updated, AvailableReplicas: available,
			HasProgressing: true, ProgressingReason: progressing(updated, available, n)},
		Endpoints: EndpointsNoService,
	}
}

func progressing(updated, available, n int32) string {
	if updated == n && available == n {
		return "NewReplicaSetAvailable"
	}
	return "ReplicaSetUpdated"
}

func with(w Workload, f func(*Workload)) Workload { f(&w); return w }

type step struct {
	at      string
	w       *Workload // observe this record (nil: see tick/del)
	initial bool
	tick    bool
	del     bool
	want    []string
}

func run(t *testing.T, tr *RolloutTracker, steps []step) {
	t.Helper()
	var all []Event
	defer func() { checkOrder(t, all) }()
	for i, s := range steps {
		now := at(s.at)
		var evs []Event
		switch {
		case s.tick:
			evs = tr.Tick(now)
		case s.del:
			evs = tr.Delete("u1", Seen{At: now})
		default:
			evs = tr.Observe(*s.w, Seen{At: now, Live: !s.initial})
		}
		all = append(all, evs...)
		if got, want := strings.Join(format(evs), "; "), strings.Join(s.want, "; "); got != want {
			t.Errorf("step %d at +%s:\n got: %s\nwant: %s", i, s.at, got, want)
		}
	}
}

func p(w Workload) *Workload { return &w }

func TestDeploymentCreateConverges(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 3, 0, 0))},
		{at: "100ms", w: p(deploy(1, 1, 3, 0, 0)), want: []string{"reached observed 100ms"}},
		{at: "400ms", w: p(deploy(1, 1, 3, 3, 0)), want: []string{"reached updated 400ms"}},
		{at: "1s", tick: true}, // nothing is over 1 s yet: no crossing
		{at: "1.5s", tick: true, want: []string{"crossed available >1", "crossed endpoints_ready >1"}[:1]},
		{at: "3s", w: p(deploy(1, 1, 3, 3, 3)), want: []string{"reached available 3s", "closed converged"}},
	})
}

func TestCrossingsFlushedBeforeAStageWithoutTick(t *testing.T) {
	// No tick ran between the write and the stage 6 s later: the stage still
	// counts as bad for 1 s and 5 s (crossed) and good for 30 s (bucket).
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 1, 0, 0))},
		{at: "6s", w: p(deploy(1, 1, 1, 1, 1)), want: []string{
			"crossed observed >1", "crossed observed >5", "reached observed 6s",
			"crossed updated >1", "crossed updated >5", "reached updated 6s",
			"crossed available >1", "crossed available >5", "reached available 6s",
			"closed converged"}},
	})
}

func TestEndpointsStage(t *testing.T) {
	withSvc := func(w Workload, e Endpoints) *Workload { w.Endpoints = e; return &w }
	run(t, newTracker(), []step{
		{at: "0s", w: withSvc(deploy(1, 0, 2, 0, 0), EndpointsPending)},
		{at: "2s", w: withSvc(deploy(1, 1, 2, 2, 2), EndpointsPending), want: []string{
			"crossed observed >1", "reached observed 2s", "crossed updated >1", "reached updated 2s",
			"crossed available >1", "reached available 2s"}},
		// endpoints_ready is still open; a tick past 5 s crosses it alone.
		{at: "5.5s", tick: true, want: []string{"crossed endpoints_ready >1", "crossed endpoints_ready >5"}},
		{at: "6s", w: withSvc(deploy(1, 1, 2, 2, 2), EndpointsReady), want: []string{"reached endpoints_ready 6s", "closed converged"}},
	})
}

func TestNoServiceSkipsEndpointsAndNeverCountsThem(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 2, 0, 0))}, // the create, not observed yet
		{at: "0s", w: p(deploy(1, 1, 2, 0, 0)), want: []string{"reached observed 0s"}},
		{at: "2s", tick: true, want: []string{"crossed updated >1", "crossed available >1"}},
		{at: "3s", w: p(deploy(1, 1, 2, 2, 2)), want: []string{"reached updated 3s", "reached available 3s", "closed converged"}},
	})
}

func TestSupersededThenConverged(t *testing.T) {
	gen2 := with(deploy(2, 1, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t2" })
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 3, 0, 0))},
		{at: "200ms", w: p(deploy(1, 1, 3, 1, 0)), want: []string{"reached observed 200ms"}},
		// A second apply 300 ms after the first, before it converged.
		{at: "300ms", w: &gen2, want: []string{"closed superseded"}},
		{at: "500ms", w: p(with(gen2, func(w *Workload) {
			w.ObservedGeneration = 2
			w.Status.UpdatedReplicas = 1
			w.Status.ProgressingReason = "ReplicaSetUpdated"
		})),
			want: []string{"reached observed 200ms"}},
		{at: "2.3s", w: p(with(gen2, func(w *Workload) { w.ObservedGeneration = 2 })), want: []string{
			"crossed updated >1", "reached updated 2s", "crossed available >1", "reached available 2s", "closed converged"}},
	})
}

func TestChangeClassification(t *testing.T) {
	base := deploy(1, 1, 3, 3, 3)
	for _, tc := range []struct {
		name string
		next Workload
		want Change
	}{
		{"template", with(base, func(w *Workload) { w.Generation = 2; w.TemplateHash = "t2" }), ChangeTemplate},
		{"template and replicas", with(base, func(w *Workload) { w.Generation = 2; w.TemplateHash = "t2"; w.SpecReplicas = 5 }), ChangeTemplate},
		{"scale", with(base, func(w *Workload) { w.Generation = 2; w.SpecReplicas = 5 }), ChangeScale},
		{"strategy", with(base, func(w *Workload) { w.Generation = 2; w.OtherHash = "o2" }), ChangeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.Observe(base, ListedAt(at("0s")))
			tr.Observe(tc.next, LiveAt(at("1s")))
			open := tr.Open()
			if len(open) != 1 || open[0].Change != tc.want || open[0].Generation != 2 {
				t.Fatalf("open episodes = %+v, want one of generation 2 with change %s", open, tc.want)
			}
		})
	}
}

func TestDeletedMidRollout(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 3, 0, 0))},
		{at: "0s", w: p(deploy(1, 1, 3, 1, 0)), want: []string{"reached observed 0s"}},
		{at: "1.2s", del: true, want: []string{"crossed updated >1", "crossed available >1", "closed deleted"}},
		{at: "2s", del: true}, // already forgotten
	})
}

func TestPausedDeploymentClosesWhenObserved(t *testing.T) {
	// Pausing sets Progressing to reason DeploymentPaused, so a paused
	// Deployment is never `available` in our sense: the episode closes as
	// paused once observed, whatever it changed; it is not slow.
	paused := with(deploy(2, 1, 3, 3, 3), func(w *Workload) { w.Paused = true; w.OtherHash = "o2"; w.SpecWritten = at("10s") })
	pausedStatus := func(w *Workload) {
		w.ObservedGeneration = w.Generation
		w.Status.ProgressingReason = "DeploymentPaused"
	}
	newTemplate := with(paused, func(w *Workload) { w.Generation = 3; w.TemplateHash = "t2"; w.SpecWritten = at("20s") })
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 1, 3, 3, 3)), initial: true},
		{at: "10s", w: &paused},
		{at: "10.1s", w: p(with(paused, pausedStatus)), want: []string{"reached observed 100ms", "reached updated 100ms", "closed paused"}},
		// A template change while paused: observed, nothing rolls.
		{at: "20s", w: &newTemplate},
		{at: "20.2s", w: p(with(newTemplate, func(w *Workload) { pausedStatus(w); w.Status.UpdatedReplicas = 0 })), want: []string{"reached observed 200ms", "closed paused"}},
		{at: "30s", tick: true},
	})
}

func TestOnDeleteTemplateChangeIsManual(t *testing.T) {
	sts := func(gen, obs int64, tmpl, cur, upd string, ready, updated int32) Workload {
		return Workload{Kind: StatefulSet, UID: "u1", Namespace: "ns", Name: "db", Generation: gen, ObservedGeneration: obs,
			Created: t0, SpecWritten: t0, TemplateHash: tmpl, OtherHash: "o", SpecReplicas: 2, OnDelete: true,
			Status: Status{CurrentRevision: cur, UpdateRevision: upd, ReadyReplicas: ready, UpdatedReplicas: updated}}
	}
	run(t, newTracker(), []step{
		{at: "0s", w: p(sts(1, 1, "a", "r1", "r1", 2, 2)), initial: true},
		{at: "1s", w: p(sts(2, 1, "b", "r1", "r1", 2, 2))},
		{at: "1.5s", w: p(sts(2, 2, "b", "r1", "r2", 2, 0)), want: []string{"reached observed 500ms", "closed manual"}},
		// A scale of an OnDelete StatefulSet is completed by the controller: timed.
		{at: "2s", w: p(sts(3, 2, "b", "r1", "r2", 2, 0))},
	})
}

func TestStatefulSetReadyAndPartition(t *testing.T) {
	sts := func(gen, obs int64, part int32, cur, upd string, ready, updated int32) Workload {
		return Workload{Kind: StatefulSet, UID: "u1", Namespace: "ns", Name: "db", Generation: gen, ObservedGeneration: obs,
			Created: t0, SpecWritten: t0, TemplateHash: fmt.Sprint(gen), OtherHash: "o", SpecReplicas: 3,
			Status: Status{CurrentRevision: cur, UpdateRevision: upd, ReadyReplicas: ready, UpdatedReplicas: updated, Partition: part}}
	}
	t.Run("rolling update completes when currentRevision moves", func(t *testing.T) {
		run(t, newTracker(), []step{
			{at: "0s", w: p(sts(1, 1, 0, "r1", "r1", 3, 3)), initial: true},
			{at: "1s", w: p(sts(2, 1, 0, "r1", "r1", 3, 3))}, // the spec write
			{at: "1s", w: p(sts(2, 2, 0, "r1", "r2", 3, 1)), want: []string{"reached observed 0s"}},
			{at: "1.6s", w: p(sts(2, 2, 0, "r1", "r2", 3, 3))}, // all updated, currentRevision not moved yet
			{at: "1.8s", w: p(sts(2, 2, 0, "r2", "r2", 3, 3)), want: []string{"reached ready 800ms", "closed converged"}},
		})
	})
	t.Run("partition 2 of 3: one updated and all ready", func(t *testing.T) {
		run(t, newTracker(), []step{
			{at: "0s", w: p(sts(1, 1, 0, "r1", "r1", 3, 3)), initial: true},
			{at: "1s", w: p(sts(2, 1, 2, "r1", "r1", 3, 3))},
			{at: "1s", w: p(sts(2, 2, 2, "r1", "r2", 2, 0)), want: []string{"reached observed 0s"}},
			{at: "1.5s", w: p(sts(2, 2, 2, "r1", "r2", 3, 1)), want: []string{"reached ready 500ms", "closed converged"}},
		})
	})
}

func TestDaemonSet(t *testing.T) {
	ds := func(gen, obs int64, desired, updated, available, unavailable int32) Workload {
		return Workload{Kind: DaemonSet, UID: "u1", Namespace: "ns", Name: "agent", Generation: gen, ObservedGeneration: obs,
			Created: t0, SpecWritten: t0, TemplateHash: fmt.Sprint(gen), OtherHash: "o",
			Status: Status{DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available, NumberUnavailable: unavailable}}
	}
	run(t, newTracker(), []step{
		{at: "0s", w: p(ds(1, 1, 4, 4, 4, 0)), initial: true},
		{at: "1s", w: p(ds(2, 1, 4, 4, 4, 0))}, // the spec write
		{at: "1s", w: p(ds(2, 2, 4, 1, 4, 0)), want: []string{"reached observed 0s"}},
		{at: "1.3s", w: p(ds(2, 2, 4, 4, 3, 1)), want: []string{"reached updated 300ms"}},
		{at: "1.7s", w: p(ds(2, 2, 4, 4, 4, 0)), want: []string{"reached available 700ms", "closed converged"}},
	})
}

func TestRestartRecoversInFlightOnceAndSkipsConverged(t *testing.T) {
	// The exporter restarts at +20s. Object u1 was written at t0 (API side)
	// and is mid-rollout: observed, not available. It is recovered; only the
	// stages still ahead are observed, timed from the API-side write; it
	// crosses no threshold (its predecessor counted 1 s and 5 s; a recovered
	// age is on the API server's clock and stays out of the SLIs).
	tr := newTracker()
	midway := deploy(2, 2, 3, 1, 2)
	midway.SpecWritten = t0
	run(t, tr, []step{
		{at: "20s", w: &midway, initial: true, want: []string{"recovered"}},
		{at: "25s", w: p(with(midway, func(w *Workload) { w.Status.UpdatedReplicas = 3 })), want: []string{"reached updated 25s"}},
		{at: "31s", w: p(deploy(2, 2, 3, 3, 3)), want: []string{"reached available 31s", "closed converged"}},
	})
	if open := tr.Open(); len(open) != 0 {
		t.Fatalf("open after convergence: %+v", open)
	}
	// A converged object in the initial list is not observed at all.
	tr2 := newTracker()
	if evs := tr2.Observe(deploy(5, 5, 3, 3, 3), ListedAt(at("1h"))); len(evs) != 0 || len(tr2.Open()) != 0 {
		t.Fatalf("converged object observed at start: %v", format(evs))
	}
}

func TestLateGenerationAfterWatchGapIsRecovered(t *testing.T) {
	// The watch was cut from +5s to +60s; generation 2 was written at +10s
	// (API side) and is seen at +61s after the relist: its episode starts at
	// the API-side write and is marked recovered, and the stages it already
	// passed during the gap are not invented.
	gen2 := with(deploy(2, 2, 3, 3, 1), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("10s") })
	tr := newTracker()
	run(t, tr, []step{
		{at: "0s", w: p(deploy(1, 1, 3, 3, 3)), initial: true},
		{at: "61s", w: &gen2, initial: true, want: []string{"recovered"}},
		{at: "62s", w: p(with(gen2, func(w *Workload) {
			w.Status.AvailableReplicas = 3
			w.Status.ProgressingReason = "NewReplicaSetAvailable"
		})),
			want: []string{"reached available 52s", "closed converged"}},
	})
}

func TestLiveWriteIsLiveWhateverItsAPITime(t *testing.T) {
	// A live generation is timed from receipt, however old its API-side
	// time: a /scale write leaves no managedFields time (the newest f:spec
	// time is the template write of days ago), an annotation write touches
	// no f:spec at all, and the API server's clock may be skewed.
	for _, tc := range []struct {
		name string
		next Workload
		want Change
	}{
		{"scale via /scale, spec time 3 days old", with(deploy(2, 1, 5, 3, 3), func(w *Workload) { w.SpecWritten = at("-72h") }), ChangeScale},
		{"annotation only, spec time 3 days old", with(deploy(2, 1, 3, 3, 3), func(w *Workload) { w.SpecWritten = at("-72h") }), ChangeOther},
		{"template, API clock 30 s behind", with(deploy(2, 1, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("-29s") }), ChangeTemplate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.Observe(with(deploy(1, 1, 3, 3, 3), func(w *Workload) { w.SpecWritten = at("-72h") }), ListedAt(at("-1h")))
			if evs := format(tr.Observe(tc.next, LiveAt(at("1s")))); len(evs) != 0 {
				t.Fatalf("unexpected events %v", evs)
			}
			open := tr.Open()
			if len(open) != 1 || open[0].Recovered || !open[0].Start.Equal(at("1s")) || open[0].Change != tc.want {
				t.Fatalf("open = %+v, want a live %s episode started at +1s", open, tc.want)
			}
		})
	}
}

func TestStalledReasonsMostSpecificFirst(t *testing.T) {
	base := deploy(1, 1, 3, 0, 0)
	for _, tc := range []struct {
		name string
		w    Workload
		want string
	}{
		{"not observed wins", with(base, func(w *Workload) { w.ObservedGeneration = 0; w.ReplicaFailure = true }), "not_observed"},
		{"replica failure before pods", with(base, func(w *Workload) { w.ReplicaFailure = true; w.PodReason = "unschedulable" }), "replica_failure"},
		{"pod reason before deadline", with(base, func(w *Workload) { w.PodReason = "readiness_failing"; w.ProgressDeadlineExceeded = true }), "readiness_failing"},
		{"deadline", with(base, func(w *Workload) { w.ProgressDeadlineExceeded = true }), "progress_deadline_exceeded"},
		{"other", base, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.Observe(tc.w, LiveAt(at("0s")))
			if s := tr.Stalled(at("59s")); len(s) != 0 {
				t.Fatalf("stalled before the threshold: %+v", s)
			}
			s := tr.Stalled(at("61s"))
			if len(s) != 1 || s[0].Reason != tc.want || s[0].Age != 61*time.Second {
				t.Fatalf("stalled = %+v, want reason %s age 61s", s, tc.want)
			}
			wantStage := StageUpdated
			if tc.want == "not_observed" {
				wantStage = StageObserved
			}
			if s[0].Stage != wantStage {
				t.Errorf("stage = %s, want %s", s[0].Stage, wantStage)
			}
		})
	}
}

func TestOlderGenerationIgnored(t *testing.T) {
	tr := newTracker()
	tr.Observe(deploy(3, 3, 1, 1, 1), ListedAt(at("0s")))
	if evs := tr.Observe(deploy(2, 2, 1, 0, 0), LiveAt(at("1s"))); len(evs) != 0 || len(tr.Open()) != 0 {
		t.Fatalf("older generation changed state: %v", format(evs))
	}
}

func TestOpenedEvents(t *testing.T) {
	tr := newTracker()
	count := func(evs []Event) (opened, recovered int) {
		for _, e := range evs {
			switch e.Type {
			case EpisodeOpened:
				opened++
			case EpisodeRecovered:
				recovered++
			}
		}
		return opened, recovered
	}
	if o, r := count(tr.Observe(deploy(1, 0, 1, 0, 0), LiveAt(at("0s")))); o != 1 || r != 0 {
		t.Errorf("live create: opened %d recovered %d", o, r)
	}
	gen2 := with(deploy(2, 1, 1, 1, 1), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("1s") })
	if o, r := count(tr.Observe(gen2, LiveAt(at("1s")))); o != 1 || r != 0 {
		t.Errorf("new generation: opened %d recovered %d", o, r)
	}
	tr2 := newTracker()
	if o, r := count(tr2.Observe(deploy(3, 2, 1, 0, 0), ListedAt(at("1m")))); o != 1 || r != 1 {
		t.Errorf("recovered at start: opened %d recovered %d", o, r)
	}
	if o, _ := count(newTracker().Observe(deploy(5, 5, 1, 1, 1), ListedAt(at("1m")))); o != 0 {
		t.Errorf("a converged object opened an episode")
	}
}

func TestStalledEventOncePerEpisode(t *testing.T) {
	stuck := with(deploy(1, 1, 3, 0, 0), func(w *Workload) { w.ReplicaFailure = true })
	gen2 := with(deploy(2, 1, 3, 0, 0), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("2m") })
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 0, 3, 0, 0))},
		{at: "1s", w: p(stuck), want: []string{"reached observed 1s"}},
		{at: "60s", tick: true, want: []string{"crossed updated >1", "crossed updated >5", "crossed updated >30", "crossed available >1", "crossed available >5", "crossed available >30"}},
		// The threshold is 1m: at exactly 1m the episode is not stalled yet.
		{at: "61s", tick: true, want: []string{"stalled updated replica_failure"}},
		{at: "90s", tick: true},
		// A new revision keeps the stall age (the oldest unconverged write)
		// but is a new episode: it reports its own stall at the next tick.
		{at: "2m", w: p(gen2), want: []string{"closed superseded"}},
		{at: "2m1s", tick: true, want: []string{"stalled observed not_observed"}},
		{at: "3m", tick: true, want: []string{"crossed observed >1", "crossed observed >5", "crossed observed >30", "crossed updated >1", "crossed updated >5", "crossed updated >30", "crossed available >1", "crossed available >5", "crossed available >30"}},
	})
}

func TestBlockingAtAnyAge(t *testing.T) {
	tr := newTracker()
	if _, ok := tr.Blocking("u1", at("0s")); ok {
		t.Fatal("blocking reported for an unknown object")
	}
	tr.Observe(deploy(1, 0, 3, 0, 0), LiveAt(at("0s")))
	if b, ok := tr.Blocking("u1", at("1s")); !ok || b.Stage != StageObserved || b.Reason != ReasonNotObserved || b.Age != time.Second {
		t.Errorf("blocking at 1s = %+v %v, want observed not_observed 1s", b, ok)
	}
	tr.Observe(with(deploy(1, 1, 3, 0, 0), func(w *Workload) { w.ReplicaFailure = true }), LiveAt(at("2s")))
	if b, ok := tr.Blocking("u1", at("3s")); !ok || b.Stage != StageUpdated || b.Reason != ReasonReplicaFailure {
		t.Errorf("blocking at 3s = %+v %v, want updated replica_failure", b, ok)
	}
	tr.Observe(deploy(1, 1, 3, 3, 3), LiveAt(at("4s")))
	if b, ok := tr.Blocking("u1", at("5s")); ok {
		t.Errorf("blocking after convergence = %+v", b)
	}
}

func TestEventsCarryTheirTime(t *testing.T) {
	tr := newTracker()
	evs := tr.Observe(deploy(1, 0, 3, 0, 0), LiveAt(at("0s")))
	evs = append(evs, tr.Observe(deploy(1, 1, 3, 3, 3), LiveAt(at("1500ms")))...)
	evs = append(evs, tr.Observe(deploy(2, 1, 3, 3, 3), LiveAt(at("3s")))...)
	evs = append(evs, tr.Delete("u1", Seen{At: at("4s")})...)
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s@%v", strings.Join(format([]Event{e}), ""), e.At.Sub(t0)))
	}
	want := []string{"@0s",
		"crossed observed >1@1.5s", "reached observed 1.5s@1.5s", "crossed updated >1@1.5s", "reached updated 1.5s@1.5s",
		"crossed available >1@1.5s", "reached available 1.5s@1.5s", "closed converged@1.5s",
		"@3s", "closed deleted@4s"}
	if !equal(got, want) {
		t.Errorf("events = %v\nwant %v", got, want)
	}
}

// A stage's API-side time is the status write that shows it; a custom
// resource's ready stage is its condition's transition; endpoints_ready
// has none.
func TestStageAPITime(t *testing.T) {
	tr := newTracker()
	tr.Observe(with(deploy(1, 0, 1, 0, 0), func(w *Workload) { w.Endpoints = EndpointsPending }), LiveAt(at("0s")))
	done := with(deploy(1, 1, 1, 1, 1), func(w *Workload) { w.StatusWritten = at("2s"); w.Endpoints = EndpointsPending })
	evs := tr.Observe(done, LiveAt(at("2500ms")))
	evs = append(evs, tr.Observe(with(done, func(w *Workload) { w.Endpoints = EndpointsReady }), LiveAt(at("3s")))...)
	var got []string
	for _, e := range evs {
		if e.Type == StageReached {
			got = append(got, fmt.Sprintf("%s@%v", e.Stage, e.APITime.Sub(t0)))
		}
	}
	want := []string{"observed@2s", "updated@2s", "available@2s", fmt.Sprintf("endpoints_ready@%v", time.Time{}.Sub(t0))}
	if !equal(got, want) {
		t.Errorf("stage API times %v, want %v", got, want)
	}
	c := cert(1, 1, true, "")
	c.StatusWritten, c.Custom.ReadySince = at("5s"), at("4s")
	ctr := newTracker()
	ctr.Observe(cert(1, 0, false, ""), LiveAt(at("0s")))
	for _, e := range ctr.Observe(c, LiveAt(at("6s"))) {
		if e.Type == StageReached {
			wantAt := map[Stage]time.Time{StageObserved: at("5s"), StageReady: at("4s")}[e.Stage]
			if !e.APITime.Equal(wantAt) {
				t.Errorf("custom %s API time %v, want %v", e.Stage, e.APITime, wantAt)
			}
		}
	}
}
