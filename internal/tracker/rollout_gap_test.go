package tracker

import "testing"

// Watch gaps shorter than LateAfter, the common case: an API server restart
// takes seconds and every informer relists after it, and so does a short
// network blip across an etcd compaction. A generation that the controller
// has already observed at first sight can only come from such a relist: the
// live spec write always arrives first, with the old observedGeneration.

func TestShortGapConvergedGenerationIsInvisible(t *testing.T) {
	// Cut from +8s to +14s; generation 2 was written at +10s and converged
	// at +12s, both during the cut. The relist at +14s shows it converged:
	// no episode, no stage timed from the relist (it would read ~0 s).
	gen2 := with(deploy(2, 2, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("10s") })
	tr := newTracker()
	run(t, tr, []step{
		{at: "0s", w: p(deploy(1, 1, 3, 3, 3)), initial: true},
		{at: "14s", w: &gen2},
		{at: "20s", tick: true},
	})
	if open := tr.Open(); len(open) != 0 {
		t.Fatalf("open = %+v, want none", open)
	}
	// The next live write is timed as usual.
	gen3 := with(deploy(3, 2, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t3"; w.SpecWritten = at("30s") })
	run(t, tr, []step{
		{at: "30s", w: &gen3},
		{at: "30.1s", w: p(with(gen3, func(w *Workload) {
			w.ObservedGeneration = 3
			w.Status.UpdatedReplicas = 1
			w.Status.ProgressingReason = "ReplicaSetUpdated"
		})), want: []string{"reached observed 100ms"}},
	})
}

func TestShortGapRollingGenerationIsRecovered(t *testing.T) {
	// Generation 2 written at +10s during the cut, observed, still rolling
	// when the relist delivers it at +14s: recovered, its remaining stages
	// timed from the API-side write (for the recovered family), observed
	// (passed in the gap) not invented, and no threshold crossed: the SLIs
	// count live episodes only.
	gen2 := with(deploy(2, 2, 3, 1, 3), func(w *Workload) {
		w.TemplateHash = "t2"
		w.SpecWritten = at("10s")
		w.Status.ProgressingReason = "ReplicaSetUpdated"
	})
	run(t, newTracker(), []step{
		{at: "0s", w: p(deploy(1, 1, 3, 3, 3)), initial: true},
		{at: "14s", w: &gen2, initial: true, want: []string{"recovered"}},
		{at: "22s", w: p(with(deploy(2, 2, 3, 3, 3), func(w *Workload) { w.TemplateHash = "t2"; w.SpecWritten = at("10s") })),
			want: []string{"reached updated 12s", "reached available 12s", "closed converged"}},
	})
}

func TestShortGapNewObjects(t *testing.T) {
	// Objects created during the cut (at +10s) and delivered by the relist at
	// +14s: one converged (nothing), one still rolling (recovered, change
	// create).
	done := with(deploy(1, 1, 2, 2, 2), func(w *Workload) { w.UID = "done"; w.Created = at("10s"); w.SpecWritten = at("10s") })
	rolling := with(deploy(1, 1, 2, 0, 0), func(w *Workload) { w.UID = "rolling"; w.Created = at("10s"); w.SpecWritten = at("10s") })
	tr := newTracker()
	if evs := tr.Observe(done, LiveAt(at("14s"))); len(evs) != 0 {
		t.Errorf("converged object from the relist: %v, want nothing", format(evs))
	}
	if got := format(tr.Observe(rolling, LiveAt(at("14s")))); len(got) != 1 || got[0] != "recovered" {
		t.Errorf("rolling object from the relist: %v, want recovered", got)
	}
	if open := tr.Open(); len(open) != 1 || open[0].Change != ChangeCreate || !open[0].Start.Equal(at("10s")) {
		t.Errorf("open = %+v, want the rolling create, started at its API-side write", open)
	}
}
