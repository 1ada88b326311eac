package tracker

import (
	"slices"
	"testing"
)

// OpenOf and OpenIn answer from the index of open episodes: an episode is
// found by its uid and its namespace from its opening to its close or the
// object's deletion, and in no other namespace.
func TestOpenByUIDAndNamespace(t *testing.T) {
	tr := newTracker()
	obj := func(uid, ns string) Workload {
		return with(deploy(1, 1, 2, 2, 2), func(w *Workload) { w.UID, w.Namespace, w.Name = uid, ns, uid })
	}
	uids := func(eps []Episode) []string {
		var out []string
		for _, ep := range eps {
			out = append(out, ep.UID)
		}
		slices.Sort(out)
		return out
	}
	// Settled at first sight, then a template change of a, b (namespace
	// x) and c (namespace y).
	for _, w := range []Workload{obj("a", "x"), obj("b", "x"), obj("c", "y")} {
		tr.Observe(w, Seen{At: at("0s")})
	}
	if got := tr.OpenIn("x"); got != nil {
		t.Fatalf("settled: OpenIn(x) = %v, want none", uids(got))
	}
	rolling := func(w Workload) Workload {
		w.Generation, w.TemplateHash, w.SpecWritten = 2, "t2", at("1s")
		w.Status.UpdatedReplicas, w.Status.ProgressingReason = 0, "ReplicaSetUpdated"
		return w
	}
	for _, w := range []Workload{obj("a", "x"), obj("b", "x"), obj("c", "y")} {
		tr.Observe(rolling(w), Seen{At: at("1s"), Live: true})
	}
	if got, want := uids(tr.OpenIn("x")), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("OpenIn(x) = %v, want %v", got, want)
	}
	if got, want := uids(tr.OpenIn("y")), []string{"c"}; !slices.Equal(got, want) {
		t.Fatalf("OpenIn(y) = %v, want %v", got, want)
	}
	if ep, ok := tr.OpenOf("b"); !ok || ep.Namespace != "x" || ep.Target != 2 {
		t.Fatalf("OpenOf(b) = %+v, %v; want the episode of generation 2 in x", ep, ok)
	}
	// a converges, b is deleted: only c stays open, and x has no entry.
	done := with(rolling(obj("a", "x")), func(w *Workload) {
		w.ObservedGeneration = 2
		w.Status.UpdatedReplicas, w.Status.ProgressingReason = 2, "NewReplicaSetAvailable"
	})
	tr.Observe(done, Seen{At: at("5s"), Live: true})
	if _, ok := tr.OpenOf("a"); ok {
		t.Fatal("OpenOf(a) found an episode after a converged")
	}
	tr.Delete("b", Seen{At: at("6s"), Live: true})
	if got := tr.OpenIn("x"); got != nil {
		t.Fatalf("OpenIn(x) = %v after a converged and b was deleted, want none", uids(got))
	}
	if _, ok := tr.inFlightIn["x"]; ok {
		t.Fatal("the namespace index keeps an empty entry for x")
	}
	if got, want := uids(tr.Open()), []string{"c"}; !slices.Equal(got, want) {
		t.Fatalf("Open() = %v, want %v", got, want)
	}
}
