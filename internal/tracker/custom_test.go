package tracker

import (
	"testing"
	"time"
)

// cert builds a custom resource record of kind Certificate.cert-manager.io:
// generation gen, observedGeneration obs, ready or not for reason.
func cert(gen, obs int64, ready bool, reason string) Workload {
	return Workload{
		Kind: "Certificate.cert-manager.io", UID: "u1", Namespace: "ns", Name: "tls",
		Generation: gen, ObservedGeneration: obs, Created: t0, SpecWritten: t0,
		Custom: &Custom{Ready: ready, Reason: reason},
	}
}

func TestCustomStages(t *testing.T) {
	if got := Stages("Certificate.cert-manager.io"); len(got) != 2 || got[0] != StageObserved || got[1] != StageReady {
		t.Fatalf("custom stages = %v, want [observed ready]", got)
	}
}

// The injected truth: the controller observes after d1 = 300 ms and sets
// Ready after d2 = 1.2 s more; the stages are timed at d1 and d1 + d2.
func TestCustomCreateObservedThenReady(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(cert(1, 0, false, ""))}, // created, empty status
		{at: "300ms", w: p(cert(1, 1, false, ReasonConditionMissing)), want: []string{"reached observed 300ms"}},
		{at: "1.5s", w: p(cert(1, 1, true, "")), want: []string{"crossed ready >1", "reached ready 1.5s", "closed converged"}},
	})
}

// Every new generation of a custom resource supersedes the episode in
// flight (its spec is opaque: no template to compare), and its change is
// other, never template.
func TestCustomNewGenerationSupersedes(t *testing.T) {
	tr := newTracker()
	run(t, tr, []step{
		{at: "0s", w: p(cert(1, 1, true, ""))}, // settled at first sight
		{at: "1s", w: p(cert(2, 1, true, ""))},
		{at: "1.2s", w: p(cert(3, 1, true, "")), want: []string{"closed superseded"}},
	})
	open := tr.Open()
	if len(open) != 1 || open[0].Change != ChangeOther || open[0].Generation != 3 {
		t.Fatalf("open = %+v, want one episode of generation 3 with change other", open)
	}
}

// A status without any observedGeneration skips the observed stage; ready
// then needs the conditions' lastTransitionTime at or after the write.
func TestCustomWithoutObservedGeneration(t *testing.T) {
	stale := func(w Workload) *Workload {
		w.Custom.ObservedUnknown = true
		w.Custom.ReadySince = t0.Add(-time.Hour) // Ready since before the write
		w.SpecWritten = t0
		return &w
	}
	fresh := func(w Workload) *Workload {
		w.Custom.ObservedUnknown = true
		w.Custom.ReadySince = t0.Add(2 * time.Second)
		return &w
	}
	run(t, newTracker(), []step{
		{at: "0s", w: p(cert(1, 0, false, ""))},
		// Ready, but since before the write: not this write's convergence.
		{at: "1s", w: stale(cert(1, 0, true, ""))},
		{at: "2s", w: fresh(cert(1, 0, true, "")), want: []string{"crossed ready >1", "reached ready 2s", "closed converged"}},
	})
}

// Stall reasons: not_observed first; then the record's reason; Stalled=True
// is reported at once, before the threshold (1 min here).
func TestCustomStallReasons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     Workload
		at      time.Duration
		want    string // "" = not stalled
		wantAge time.Duration
	}{
		{"not observed, under threshold", cert(1, 0, false, ReasonStalled), 30 * time.Second, "", 0},
		{"not observed, past threshold", cert(1, 0, false, ReasonStalled), 61 * time.Second, ReasonNotObserved, 61 * time.Second},
		{"stalled reported at once", cert(1, 1, false, ReasonStalled), 2 * time.Second, ReasonStalled, 2 * time.Second},
		{"reconciling waits for the threshold", cert(1, 1, false, ReasonReconciling), 30 * time.Second, "", 0},
		{"reconciling", cert(1, 1, false, ReasonReconciling), 61 * time.Second, ReasonReconciling, 61 * time.Second},
		{"condition false", cert(1, 1, false, ReasonConditionFalse), 61 * time.Second, ReasonConditionFalse, 61 * time.Second},
		{"no reason found", cert(1, 1, false, ""), 61 * time.Second, ReasonOther, 61 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			first := cert(1, 0, false, "")
			tr.Observe(first, LiveAt(t0))
			tr.Observe(tc.rec, LiveAt(t0.Add(time.Second)))
			st := tr.Stalled(t0.Add(tc.at))
			switch {
			case tc.want == "" && len(st) != 0:
				t.Fatalf("stalled = %+v, want none", st)
			case tc.want == "":
			case len(st) != 1:
				t.Fatalf("stalled = %+v, want one", st)
			case st[0].Reason != tc.want || st[0].Age != tc.wantAge:
				t.Fatalf("stalled reason %q age %v, want %q %v", st[0].Reason, st[0].Age, tc.want, tc.wantAge)
			}
		})
	}
}

// A deleted CRD closes the episodes in flight as deleted.
func TestCustomDeleted(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(cert(1, 0, false, ""))},
		{at: "500ms", del: true, want: []string{"closed deleted"}},
	})
}

// Found at start already observed and not ready: recovered, the observed
// stage passed, not re-observed.
func TestCustomRecoveredAtStart(t *testing.T) {
	run(t, newTracker(), []step{
		{at: "0s", w: p(cert(2, 2, false, ReasonConditionFalse)), initial: true, want: []string{"recovered"}},
		{at: "3s", w: p(cert(2, 2, true, "")), want: []string{"reached ready 3s", "closed converged"}},
	})
}
