package tracker

import (
	"testing"
	"time"
)

// Write patterns production clusters produce all day: an HPA or
// `kubectl scale` writing spec.replicas through /scale, CI and GitOps tools
// writing annotations (a Deployment's generation moves on those too), pause
// and resume, rollbacks, partitions and OnDelete.

// stuck is a Deployment whose new template (t2) never gets ready pods.
func stuck(gen, obs int64, n int32) Workload {
	return with(deploy(gen, obs, n, 0, 0), func(w *Workload) {
		w.TemplateHash = "t2"
		w.PodReason = PodReadinessFailing
		w.Status.Replicas = n + 1 // old pods stay while the new ones fail
	})
}

func TestScaleWritesDuringStuckTemplateRolloutRetarget(t *testing.T) {
	// The template write at +0s never converges; an HPA flips replicas
	// between 2 and 3 every 15 s (each write bumps the generation and, via
	// /scale, leaves no managedFields time: SpecWritten stays at +0s). The
	// template episode keeps its start and its crossings; nothing is
	// superseded or recovered; every threshold is crossed once, as template.
	tr := newTracker()
	tr.Observe(deploy(1, 1, 2, 2, 2), ListedAt(at("-1h")))
	steps := []step{
		{at: "0s", w: p(stuck(2, 1, 2))},
		{at: "50ms", w: p(stuck(2, 2, 2)), want: []string{"reached observed 50ms"}},
		{at: "2s", tick: true, want: []string{"crossed updated >1", "crossed available >1"}},
	}
	n := int32(2)
	for i, gen := 0, int64(3); i < 6; i, gen = i+1, gen+1 {
		n = 5 - n // 3, 2, 3, ...
		sec := 15 * (i + 1)
		steps = append(steps,
			step{at: dur(sec), w: p(stuck(gen, gen-1, n))},
			step{at: dur(sec) + "+20ms", w: p(stuck(gen, gen, n))})
	}
	run(t, tr, steps[:3])
	var crossed []string
	for _, s := range steps[3:] {
		evs := tr.Observe(*s.w, LiveAt(atPlus(s.at)))
		for _, e := range evs {
			if e.Type != ThresholdCrossed {
				t.Fatalf("at %s: unexpected event %v", s.at, format([]Event{e}))
			}
			if e.Episode.Change != ChangeTemplate || e.Episode.Generation != 2 {
				t.Errorf("crossing of %+v, want the template episode of generation 2", e.Episode)
			}
			crossed = append(crossed, format([]Event{e})...)
		}
		for _, e := range tr.Tick(atPlus(s.at)) {
			if e.Type == ThresholdCrossed {
				crossed = append(crossed, format([]Event{e})...)
			}
		}
	}
	want := []string{"crossed updated >5", "crossed available >5", "crossed updated >30", "crossed available >30"}
	if !equal(crossed, want) {
		t.Errorf("crossings across the scale writes = %v, want %v (once each)", crossed, want)
	}
	open := tr.Open()
	if len(open) != 1 || open[0].Change != ChangeTemplate || open[0].Generation != 2 || open[0].Target != 8 || !open[0].Start.Equal(t0) {
		t.Fatalf("open = %+v, want the template episode of generation 2 re-targeted to 8, started at +0s", open)
	}
	s := tr.Stalled(at("95s"))
	if len(s) != 1 || s[0].Age != 95*time.Second || s[0].Stage != StageUpdated || s[0].Reason != PodReadinessFailing {
		t.Fatalf("stalled = %+v, want one, 95 s old, at updated, readiness_failing", s)
	}
	// The template is fixed (t3): that supersedes; its stall age still
	// counts from the oldest write not converged.
	fixed := with(deploy(9, 8, 3, 0, 0), func(w *Workload) { w.TemplateHash = "t3" })
	if got := format(tr.Observe(fixed, LiveAt(at("100s")))); !equal(got, []string{"closed superseded"}) {
		t.Errorf("template fix: %v, want the stuck episode superseded", got)
	}
	if s := tr.Stalled(at("101s")); len(s) != 1 || s[0].Age != 101*time.Second || s[0].Episode.Generation != 9 {
		t.Errorf("stalled after the fix = %+v, want generation 9, age 101 s", s)
	}
}

func TestScaleThenScaleIsOneEpisode(t *testing.T) {
	// Two scale writes 2 s apart, the first not converged yet: one scale
	// episode, timed from the first write, converging on the second.
	run(t, newTracker(), []step{
		{at: "-1h", w: p(deploy(1, 1, 2, 2, 2)), initial: true},
		{at: "0s", w: p(with(deploy(2, 1, 4, 2, 2), func(w *Workload) { w.Status.Replicas = 2 }))},
		{at: "100ms", w: p(with(deploy(2, 2, 4, 2, 2), func(w *Workload) { w.Status.Replicas = 2 })), want: []string{"reached observed 100ms"}},
		{at: "2s", w: p(with(deploy(3, 2, 5, 2, 2), func(w *Workload) { w.Status.Replicas = 4 }))},
		{at: "2.1s", w: p(deploy(3, 3, 5, 5, 3)), want: []string{"crossed updated >1", "reached updated 2.1s"}},
		{at: "3s", w: p(deploy(3, 3, 5, 5, 5)), want: []string{"crossed available >1", "reached available 3s", "closed converged"}},
	})
}

func TestAnnotationOnConvergedDeploymentIsALiveOtherEpisode(t *testing.T) {
	// `kubectl annotate` two minutes after the create: the generation moves,
	// the newest f:spec time is the create. A live `other` episode, closed
	// as soon as the controller observes it; not recovered.
	tr := newTracker()
	created := with(deploy(1, 1, 2, 2, 2), func(w *Workload) { w.SpecWritten = t0 })
	tr.Observe(created, ListedAt(at("0s")))
	annotated := with(created, func(w *Workload) { w.Generation = 2 })
	var evs []Event
	evs = append(evs, tr.Observe(annotated, LiveAt(at("120s")))...)
	evs = append(evs, tr.Observe(with(annotated, func(w *Workload) { w.ObservedGeneration = 2 }), LiveAt(at("120.03s")))...)
	if got := format(evs); !equal(got, []string{"reached observed 30ms", "reached updated 30ms", "reached available 30ms", "closed converged"}) {
		t.Errorf("annotate: %v", got)
	}
	for _, e := range evs {
		if e.Episode.Recovered || e.Episode.Change != ChangeOther {
			t.Errorf("event %v of episode %+v, want a live other episode", format([]Event{e}), e.Episode)
		}
	}
}

func TestPauseSetImageResumeIsOneTemplateRollout(t *testing.T) {
	// kubectl rollout pause; set image; resume. The template episode opened
	// by set image closes as paused; the resume (compared with the template
	// the Deployment last converged on, not with the previous generation)
	// is the template rollout that really happens, timed from the resume.
	pausedStatus := func(w *Workload) {
		w.ObservedGeneration = w.Generation
		w.Status.ProgressingReason = "DeploymentPaused"
	}
	paused := with(deploy(2, 1, 2, 2, 2), func(w *Workload) { w.Paused = true })
	image := with(paused, func(w *Workload) { w.Generation = 3; w.TemplateHash = "t2" })
	resumed := with(image, func(w *Workload) { w.Generation = 4; w.Paused = false })
	tr := newTracker()
	run(t, tr, []step{
		{at: "-1h", w: p(deploy(1, 1, 2, 2, 2)), initial: true},
		{at: "0s", w: &paused},
		{at: "10ms", w: p(with(paused, pausedStatus)), want: []string{"reached observed 10ms", "reached updated 10ms", "closed paused"}},
		{at: "10s", w: &image},
		{at: "10.01s", w: p(with(image, func(w *Workload) { pausedStatus(w); w.Status.UpdatedReplicas = 0 })), want: []string{"reached observed 10ms", "closed paused"}},
		{at: "20s", w: &resumed},
	})
	open := tr.Open()
	if len(open) != 1 || open[0].Change != ChangeTemplate || open[0].Generation != 4 || !open[0].Start.Equal(at("20s")) {
		t.Fatalf("open after resume = %+v, want a template episode of generation 4 from +20s", open)
	}
	run(t, tr, []step{
		{at: "20.02s", w: p(with(resumed, func(w *Workload) { w.ObservedGeneration = 4; w.Status.UpdatedReplicas = 1 })), want: []string{"reached observed 20ms"}},
		{at: "23s", w: p(with(deploy(4, 4, 2, 2, 2), func(w *Workload) { w.TemplateHash = "t2" })), want: []string{
			"crossed updated >1", "reached updated 3s", "crossed available >1", "reached available 3s", "closed converged"}},
	})
}

func TestRollbackWhileRollingSupersedes(t *testing.T) {
	// t1 -> t2 (not converged) -> back to t1: a new revision for the
	// rollout in flight, so it supersedes, and it is a template change
	// (the t2 pods must go) although t1 is what the object converged on.
	tr := newTracker()
	run(t, tr, []step{
		{at: "-1h", w: p(deploy(1, 1, 2, 2, 2)), initial: true},
		{at: "0s", w: p(with(deploy(2, 1, 2, 2, 2), func(w *Workload) { w.TemplateHash = "t2" }))},
		{at: "1s", w: p(deploy(3, 1, 2, 2, 2)), want: []string{"closed superseded"}},
	})
	if open := tr.Open(); len(open) != 1 || open[0].Change != ChangeTemplate {
		t.Fatalf("open = %+v, want a template episode", open)
	}
}

func TestOnDeleteScaleConvergesOnReadyReplicas(t *testing.T) {
	// An OnDelete StatefulSet with a pending manual update (current r1,
	// update r2) is scaled 2 -> 3: the controller completes the scale with
	// a pod of either revision; revisions never converge by themselves.
	sts := func(gen, obs int64, n, ready, replicas int32) Workload {
		return Workload{Kind: StatefulSet, UID: "u1", Namespace: "ns", Name: "db", Generation: gen, ObservedGeneration: obs,
			Created: t0, TemplateHash: "b", OtherHash: "o", SpecReplicas: n, OnDelete: true,
			Endpoints: EndpointsPending, EndpointsAnyRevision: EndpointsPending,
			Status: Status{CurrentRevision: "r1", UpdateRevision: "r2", ReadyReplicas: ready, Replicas: replicas, UpdatedReplicas: 0}}
	}
	published := func(w Workload) *Workload { w.EndpointsAnyRevision = EndpointsReady; return &w }
	run(t, newTracker(), []step{
		{at: "-1h", w: p(sts(2, 2, 2, 2, 2)), initial: true}, // settled: the update is the operator's
		{at: "0s", w: p(sts(3, 2, 3, 2, 2))},
		{at: "10ms", w: p(sts(3, 3, 3, 2, 3)), want: []string{"reached observed 10ms"}},
		{at: "800ms", w: p(sts(3, 3, 3, 3, 3)), want: []string{"reached ready 800ms"}},
		{at: "1.5s", w: published(sts(3, 3, 3, 3, 3)), want: []string{"crossed endpoints_ready >1", "reached endpoints_ready 1.5s", "closed converged"}},
	})
}

func TestListedGenerationIsRecoveredAndNeverCrosses(t *testing.T) {
	// A relist delivers generation 2 of a known object, not yet observed by
	// its controller: the exporter did not see the write. Recovered, timed
	// from the API-side write for the recovered family, never crossing;
	// the stall gauge still shows it.
	tr := newTracker()
	tr.Observe(deploy(1, 1, 2, 2, 2), LiveAt(at("0s")))
	gen2 := with(deploy(2, 1, 2, 2, 2), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("8s") })
	run(t, tr, []step{
		{at: "12s", w: &gen2, initial: true, want: []string{"recovered"}},
		// Stalled from its API-side start (8s) plus the 1m threshold.
		{at: "68s", tick: true},
		{at: "69s", tick: true, want: []string{"stalled observed not_observed"}},
		{at: "100s", tick: true},
	})
	open := tr.Open()
	if len(open) != 1 || !open[0].Recovered || !open[0].Start.Equal(at("8s")) || open[0].Change != ChangeTemplate {
		t.Fatalf("open = %+v, want a recovered template episode from +8s", open)
	}
	if s := tr.Stalled(at("100s")); len(s) != 1 || s[0].Age != 92*time.Second {
		t.Fatalf("stalled = %+v, want one, 92 s old", s)
	}
}

func TestRecoveredStartNeverBeforeLastReceipt(t *testing.T) {
	// A /scale write during a watch gap leaves no managedFields time: the
	// newest f:spec time is the create of an hour ago. The exporter saw the
	// object at +5s, so the write came after that.
	tr := newTracker()
	tr.Observe(with(deploy(1, 1, 2, 2, 2), func(w *Workload) { w.SpecWritten = at("-1h") }), LiveAt(at("5s")))
	scaled := with(deploy(2, 2, 6, 2, 2), func(w *Workload) { w.SpecWritten = at("-1h"); w.Status.Replicas = 2 })
	run(t, tr, []step{{at: "20s", w: &scaled, initial: true, want: []string{"recovered"}}})
	if open := tr.Open(); len(open) != 1 || !open[0].Start.Equal(at("5s")) || open[0].Change != ChangeScale {
		t.Fatalf("open = %+v, want a recovered scale episode from +5s (last receipt)", open)
	}
}

func TestStageReceivedBeforeACrossingIsNotCountedTwice(t *testing.T) {
	// Tick at +1.001s crosses 1 s; the status update that reached the
	// stage was received at +0.999s but handled after the tick. Without a
	// clamp the stage would be good for 1 s (le=1 bucket) and bad (crossed).
	tr := newTracker()
	run(t, tr, []step{
		{at: "0s", w: p(deploy(1, 0, 1, 0, 0))},
		{at: "1.001s", tick: true, want: []string{"crossed observed >1", "crossed updated >1", "crossed available >1"}},
		{at: "999ms", w: p(deploy(1, 1, 1, 1, 1)), want: []string{
			"reached observed 1.001s", "reached updated 1.001s", "reached available 1.001s", "closed converged"}},
	})
}

func dur(sec int) string { return (time.Duration(sec) * time.Second).String() }

// atPlus reads "15s+20ms" as 15.02 s after t0.
func atPlus(s string) time.Time {
	var total time.Duration
	for _, part := range splitPlus(s) {
		d, err := time.ParseDuration(part)
		if err != nil {
			panic(err)
		}
		total += d
	}
	return t0.Add(total)
}

func splitPlus(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '+' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
