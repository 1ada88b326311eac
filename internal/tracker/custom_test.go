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

// noOG is a record of a custom resource whose status holds no observed
// generation at all (a phase-only operator judged by a ready: expression,
// KEDA's ScaledObject): ready or not, readiness since readySince.
func noOG(gen int64, ready bool, readySince time.Time) *Workload {
	w := cert(gen, 0, ready, "")
	w.Custom.ObservedUnknown = true
	w.Custom.ReadySince = readySince
	w.SpecWritten = t0 // generation 2 is written at t0, generation 1 two minutes before
	if gen == 1 {
		w.SpecWritten = t0.Add(-2 * time.Minute)
	}
	return &w
}

// Without an observed generation, the observed stage is skipped and a spec
// write is judged by the readiness transition it causes, timed on receipt:
// the injected truth is the receipt of each record.
func TestCustomWithoutObservedGeneration(t *testing.T) {
	long := t0.Add(-240 * time.Hour) // Ready since long before every write
	t.Run("create, then ready", func(t *testing.T) {
		run(t, newTracker(), []step{
			{at: "0s", w: p(cert(1, 0, false, ""))}, // created: empty status
			{at: "300ms", w: noOG(1, false, time.Time{})},
			{at: "2s", w: noOG(1, true, long), want: []string{"crossed ready >1", "reached ready 2s", "closed converged"}},
		})
	})
	t.Run("ready at first sight is settled", func(t *testing.T) {
		tr := newTracker()
		// Ready stayed True through its last spec write: its
		// lastTransitionTime is older than the write, which says nothing.
		run(t, tr, []step{{at: "0s", w: noOG(7, true, long), initial: true}})
		if open, st := tr.Open(), tr.Stalled(at("1h")); len(open) != 0 || len(st) != 0 {
			t.Fatalf("open %+v, stalled %+v: want none", open, st)
		}
	})
	t.Run("write, not ready, then ready: timed from the write's receipt", func(t *testing.T) {
		run(t, newTracker(), []step{
			{at: "-1m", w: noOG(1, true, long), initial: true},
			{at: "0s", w: noOG(2, true, long)},         // the spec write: ready on its old status
			{at: "800ms", w: noOG(2, true, long)},      // a status write that changes nothing judged
			{at: "2s", w: noOG(2, false, time.Time{})}, // the controller took it up
			{at: "4.5s", w: noOG(2, true, at("4s")), want: []string{"crossed ready >1", "reached ready 4.5s", "closed converged"}},
		})
	})
	t.Run("a write that leaves it ready invents nothing", func(t *testing.T) {
		tr := newTracker()
		run(t, tr, []step{
			{at: "-1m", w: noOG(1, true, long), initial: true},
			{at: "0s", w: noOG(2, true, long)},
			{at: "30s", w: noOG(2, true, long)},
			{at: "10m", tick: true},
		})
		if open, st := tr.Open(), tr.Stalled(at("10m")); len(open) != 0 || len(st) != 0 {
			t.Fatalf("open %+v, stalled %+v: want none", open, st)
		}
	})
	t.Run("a write while not ready opens at once and stalls for real", func(t *testing.T) {
		tr := newTracker()
		run(t, tr, []step{
			{at: "-1m", w: noOG(1, false, time.Time{}), initial: true, want: []string{"recovered"}},
			{at: "-30s", w: noOG(1, true, at("-30s")), want: []string{"reached ready 1m30s", "closed converged"}},
			{at: "-10s", w: noOG(1, false, time.Time{})},
			{at: "0s", w: noOG(2, false, time.Time{})},
			{at: "61s", tick: true, want: []string{"crossed ready >1", "crossed ready >5", "crossed ready >30", "stalled ready other"}},
		})
		if st := tr.Stalled(at("61s")); len(st) != 1 || st[0].Age != 61*time.Second {
			t.Fatalf("stalled %+v, want one of 61s", st)
		}
	})
	t.Run("not ready after a watch gap: recovered, never live", func(t *testing.T) {
		run(t, newTracker(), []step{
			{at: "-1m", w: noOG(1, true, long), initial: true},
			{at: "0s", w: noOG(2, true, long)},
			{at: "5s", w: noOG(2, false, time.Time{}), initial: true, want: []string{"recovered"}},
			{at: "9s", w: noOG(2, true, at("8s")), want: []string{"reached ready 9s", "closed converged"}},
		})
	})
}

// A custom resource being deleted (a deletionTimestamp, which bumps its
// generation) closes its episode as deleted and opens none: its
// controller finalizes it, and waiting for it to converge would invent
// a stall.
func TestCustomTerminating(t *testing.T) {
	tr := newTracker()
	gone := func(w Workload) *Workload { w.Custom.Terminating = true; return &w }
	run(t, tr, []step{
		{at: "0s", w: p(cert(2, 1, false, ""))},
		{at: "1s", w: p(cert(2, 2, false, ReasonReconciling)), want: []string{"reached observed 1s"}},
		{at: "3s", w: gone(cert(3, 2, false, ReasonReconciling)), want: []string{"crossed ready >1", "closed deleted"}},
		{at: "20m", w: gone(cert(3, 3, false, ReasonConditionFalse))},
		{at: "21m", del: true},
	})
	if open, st := tr.Open(), tr.Stalled(at("20m")); len(open) != 0 || len(st) != 0 {
		t.Fatalf("open %+v, stalled %+v: want none", open, st)
	}
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
