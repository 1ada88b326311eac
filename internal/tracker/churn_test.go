package tracker

import (
	"fmt"
	"testing"
	"time"
)

func churnTracker() *ChurnTracker {
	return NewChurnTracker(ChurnConfig{Window: time.Minute, HotWrites: 30, FlapWindow: 10 * time.Minute, MaxPairs: 2})
}

// same is a state a write leaves as it was: a loop write.
var same = Progress{Spec: 1, Status: 1}

// Which writes count: only those that move neither part to a state the
// object has not had recently. Each case is a sequence of states written
// by one manager 100 ms apart, with the writes it must count.
func TestWriteProgress(t *testing.T) {
	st := func(s ...uint32) []Progress { // status states, spec unchanged
		out := make([]Progress, len(s))
		for i, x := range s {
			out[i] = Progress{Spec: 7, Status: x}
		}
		return out
	}
	cases := []struct {
		name   string
		states []Progress // the object's states, the first before any write
		counts []bool     // per write (len(states)-1)
	}{{
		name:   "a rollout: every status write reports a new state",
		states: st(1, 2, 3, 4, 5, 6, 7, 8),
		counts: []bool{false, false, false, false, false, false, false},
	}, {
		name:   "a restamp: the state does not move",
		states: st(1, 1, 1, 1),
		counts: []bool{true, true, true},
	}, {
		name:   "a toggle between two states: every return counts",
		states: st(1, 2, 1, 2, 1),
		counts: []bool{false, true, true, true},
	}, {
		name:   "a cycle of three states",
		states: st(1, 2, 3, 1, 2, 3),
		counts: []bool{false, false, true, true, true},
	}, {
		name:   "a return after more distinct states than remembered is progress",
		states: st(1, 2, 3, 4, 5, 1),
		counts: []bool{false, false, false, false, false},
	}, {
		// Two writers take spec.replicas in turn; the controller's status
		// writes follow each (observedGeneration moves): the spec's
		// returns count, the status writes never do.
		name: "a spec toggled while the status follows",
		states: []Progress{
			{Spec: 1, Status: 10},
			{Spec: 2, Status: 10}, // a: spec 1 → 2, new
			{Spec: 2, Status: 11}, // controller
			{Spec: 1, Status: 11}, // b: back to 1
			{Spec: 1, Status: 12}, // controller
			{Spec: 2, Status: 12}, // a: back to 2
			{Spec: 2, Status: 13}, // controller
		},
		counts: []bool{false, false, true, false, true, false},
	}, {
		name:   "a write that moves one part back and the other forward is progress",
		states: []Progress{{1, 1}, {2, 2}, {1, 3}},
		counts: []bool{false, false},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := churnTracker()
			k := HotKey{"Deployment", "ns", "web", "writer"}
			for i := 1; i < len(c.states); i++ {
				at := r0.Add(time.Duration(i) * 100 * time.Millisecond)
				if got := tr.Write(k, at, c.states[i-1], c.states[i]); got != c.counts[i-1] {
					t.Errorf("write %d (%v → %v): counted %v, want %v", i, c.states[i-1], c.states[i], got, c.counts[i-1])
				}
			}
		})
	}
}

// An object's states are forgotten with its writes: a toggle after a
// window without writes starts from a new baseline; one within is
// remembered even when no write was counted (the object held no manager).
func TestWriteStatesForgotten(t *testing.T) {
	tr := churnTracker() // window 1 minute
	k := HotKey{"Deployment", "ns", "web", "writer"}
	a, b := Progress{1, 1}, Progress{1, 2}
	tr.Write(k, r0, a, b) // progress
	tr.Hot(r0.Add(30 * time.Second))
	if !tr.Write(k, r0.Add(40*time.Second), b, a) {
		t.Error("a toggle 40 s later (within the window) not counted")
	}
	tr.Hot(r0.Add(3 * time.Minute))
	if len(tr.hot) != 0 {
		t.Fatalf("after the window: %d objects held", len(tr.hot))
	}
	if tr.Write(k, r0.Add(3*time.Minute), a, b) {
		t.Error("the first write after the window judged against forgotten states")
	}
}

func TestHotWrites(t *testing.T) {
	tr := churnTracker()
	k := HotKey{"Service", "ns", "web", "kce-hot-writer"}
	// A status write every 0.5 s for 20 s: 40 writes.
	for i := range 40 {
		tr.Write(k, r0.Add(time.Duration(i)*500*time.Millisecond), same, same)
	}
	// One write by another manager: counted apart, not hot.
	tr.Write(HotKey{"Service", "ns", "web", "kube-controller-manager"}, r0, same, same)
	hot := tr.Hot(r0.Add(20 * time.Second))
	if len(hot) != 1 || hot[0].HotKey != k || hot[0].Writes != 40 {
		t.Fatalf("hot at +20s: %+v, want %v with 40 writes", hot, k)
	}
	// 50 s later the window (1 m, 20 buckets of 3 s) holds the writes of
	// the last 10 s of the loop: 20 ± one bucket (6 writes).
	hot = tr.Hot(r0.Add(70 * time.Second))
	if len(hot) != 0 {
		t.Errorf("hot at +70s: %+v, want none (about 20 writes left, threshold 30)", hot)
	}
	tr.Write(k, r0.Add(70*time.Second), same, same)
	if n := tr.hot[objectName{"Service", "ns", "web"}].managers[k.Manager].sum(); n < 14 || n > 27 {
		t.Errorf("writes in the window at +70s: %d, want 20 ± 6 (+1)", n)
	}
	// After the window nothing is left and the entries are forgotten.
	if hot := tr.Hot(r0.Add(3 * time.Minute)); len(hot) != 0 || len(tr.hot) != 0 {
		t.Errorf("after the window: hot %+v, %d objects kept", hot, len(tr.hot))
	}
	// Exactly at the threshold is not hot; one more is.
	for i := range 30 {
		tr.Write(k, r0.Add(10*time.Minute+time.Duration(i)*time.Millisecond), same, same)
	}
	if hot := tr.Hot(r0.Add(10*time.Minute + time.Second)); len(hot) != 0 {
		t.Errorf("30 writes, threshold 30: hot %+v", hot)
	}
	tr.Write(k, r0.Add(10*time.Minute+time.Second), same, same)
	if hot := tr.Hot(r0.Add(10*time.Minute + time.Second)); len(hot) != 1 || hot[0].Writes != 31 {
		t.Errorf("31 writes, threshold 30: hot %+v", hot)
	}
	tr.ForgetObject("Service", "ns", "web")
	if hot := tr.Hot(r0.Add(10*time.Minute + time.Second)); len(hot) != 0 {
		t.Errorf("after delete: hot %+v", hot)
	}
}

// replicas is the hash of the leaf path .spec.replicas in these tests.
const replicas uint64 = 1

func owned(entries ...any) []ManagedEntry {
	var out []ManagedEntry
	for i := 0; i < len(entries); i += 2 {
		out = append(out, ManagedEntry{Manager: entries[i].(string), Leaves: entries[i+1].([]uint64)})
	}
	return out
}

func TestOwnershipFlaps(t *testing.T) {
	other := []uint64{2, 3} // the creator's other fields
	s := time.Second
	type write struct {
		at      time.Duration
		entries []ManagedEntry
		listed  bool
		flaps   int
	}
	cases := []struct {
		name   string
		writes []write
		want   map[FlapKey]uint64
	}{{
		name: "two appliers take spec.replicas in turn with force: every return is a flap",
		writes: []write{
			{at: 0, entries: owned("creator", other, "apply-b", []uint64{replicas})},
			{at: 1 * s, entries: owned("creator", other, "apply-a", []uint64{replicas})},                   // b→a
			{at: 2 * s, entries: owned("creator", other, "apply-b", []uint64{replicas}), flaps: 1},         // a→b after b→a
			{at: 3 * s, entries: owned("creator", other, "apply-a", []uint64{replicas}), flaps: 1},         // b→a after a→b
			{at: 4 * s, entries: owned("creator", other, "apply-a", []uint64{replicas}, "x", []uint64{9})}, // no move
			{at: 5 * s, entries: owned("creator", other, "apply-b", []uint64{replicas}, "x", []uint64{9}), flaps: 1},
		},
		want: map[FlapKey]uint64{{"Deployment", "apply-a", "apply-b"}: 3},
	}, {
		name: "one applier alone: no flap",
		writes: []write{
			{at: 0, entries: owned("creator", other, "apply-a", []uint64{replicas})},
			{at: 1 * s, entries: owned("creator", other, "apply-a", []uint64{replicas})},
			{at: 2 * s, entries: owned("creator", other, "apply-a", []uint64{replicas})},
		},
		want: map[FlapKey]uint64{},
	}, {
		name: "a move and its return 10 minutes apart is no flap; within is",
		writes: []write{
			{at: 0, entries: owned("a", []uint64{replicas})},
			{at: 1 * s, entries: owned("b", []uint64{replicas})},
			{at: 1*s + 10*time.Minute + 1, entries: owned("a", []uint64{replicas})},
			{at: 2*s + 10*time.Minute, entries: owned("b", []uint64{replicas}), flaps: 1},
		},
		want: map[FlapKey]uint64{{"Deployment", "a", "b"}: 1},
	}, {
		name: "a relist in between is a baseline: no move judged across it",
		writes: []write{
			{at: 0, entries: owned("a", []uint64{replicas})},
			{at: 1 * s, entries: owned("b", []uint64{replicas})},
			{at: 2 * s, entries: owned("a", []uint64{replicas}), listed: true},
			{at: 3 * s, entries: owned("b", []uint64{replicas})},
			{at: 4 * s, entries: owned("a", []uint64{replicas}), flaps: 1},
		},
		want: map[FlapKey]uint64{{"Deployment", "a", "b"}: 1},
	}, {
		name: "shared ownership (both applied the same value without force) is no move",
		writes: []write{
			{at: 0, entries: owned("a", []uint64{replicas})},
			{at: 1 * s, entries: owned("a", []uint64{replicas}, "b", []uint64{replicas})},
			{at: 2 * s, entries: owned("a", []uint64{replicas})},
			{at: 3 * s, entries: owned("a", []uint64{replicas}, "b", []uint64{replicas})},
		},
		want: map[FlapKey]uint64{},
	}, {
		name: "many paths moving together count one flap per write",
		writes: []write{
			{at: 0, entries: owned("a", []uint64{1, 2, 3})},
			{at: 1 * s, entries: owned("b", []uint64{1, 2, 3})},
			{at: 2 * s, entries: owned("a", []uint64{1, 2, 3}), flaps: 1},
		},
		want: map[FlapKey]uint64{{"Deployment", "a", "b"}: 1},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := churnTracker()
			total := func() (n int) {
				for _, v := range tr.Flaps() {
					n += int(v)
				}
				return n
			}
			for i, w := range c.writes {
				before := total()
				tr.Ownership("uid-1", "Deployment", uint64(i), w.entries, Seen{At: r0.Add(w.at), Live: !w.listed})
				if got := total() - before; got != w.flaps {
					t.Errorf("write %d (+%v): %d flaps, want %d", i, w.at, got, w.flaps)
				}
			}
			got := tr.Flaps()
			if len(got) != len(c.want) {
				t.Errorf("flaps %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("flaps %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestFlapPairsCapped(t *testing.T) {
	tr := churnTracker() // MaxPairs 2
	fight := func(uid, a, b string) {
		tr.Ownership(uid, "Deployment", 1, owned(a, []uint64{replicas}), LiveAt(r0))
		tr.Ownership(uid, "Deployment", 2, owned(b, []uint64{replicas}), LiveAt(r0.Add(time.Second)))
		tr.Ownership(uid, "Deployment", 3, owned(a, []uint64{replicas}), LiveAt(r0.Add(2*time.Second)))
	}
	fight("1", "b", "a")
	fight("2", "c", "d")
	fight("3", "e", "f")
	fight("4", "a", "b")
	want := map[FlapKey]uint64{{"Deployment", "a", "b"}: 2, {"Deployment", "c", "d"}: 1, {"Deployment", "other", "other"}: 1}
	got := tr.Flaps()
	if len(got) != len(want) {
		t.Fatalf("flaps %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("flaps %v, want %v", got, want)
		}
	}
	if !tr.Unchanged("2", 3, r0.Add(5*time.Minute)) || tr.Unchanged("2", 2, r0) || tr.Unchanged("9", 0, r0) {
		t.Error("Unchanged: want true only for the fingerprint last read of a known object")
	}
	tr.ForgetOwnership("1")
	if objs, _ := tr.OwnershipTracked(); objs != 3 {
		t.Errorf("objects tracked %d after forgetting one of 4", objs)
	}
	// Objects 3 and 4 were last received at +2s, object 2 at +5m: 20
	// minutes (two flap windows) after +2s only object 2 is kept.
	tr.PruneOwnership(r0.Add(20*time.Minute + 2*time.Second))
	if objs, _ := tr.OwnershipTracked(); objs != 3 {
		t.Errorf("objects tracked %d at exactly two flap windows, want 3", objs)
	}
	tr.PruneOwnership(r0.Add(20*time.Minute + 3*time.Second))
	if objs, _ := tr.OwnershipTracked(); objs != 1 || tr.owners["2"] == nil {
		t.Errorf("objects tracked %d after pruning, want object 2 only", objs)
	}
}

// Memory bounds of the ownership state: paths owned by several managers are
// not held, an object holds at most maxObjectPaths paths, and the managers
// of forgotten objects are released from the intern table.
func TestOwnershipMemoryBounds(t *testing.T) {
	tr := churnTracker()
	// Two appliers own .spec.replicas together (same value, no force), a
	// owns 2 more paths alone: 2 paths held, not 3.
	shared := append(owned("a", []uint64{replicas, 11, 12}), owned("b", []uint64{replicas})...)
	tr.Ownership("s", "Deployment", 1, shared, LiveAt(r0))
	if _, paths := tr.OwnershipTracked(); paths != 2 {
		t.Errorf("paths held %d, want 2 (the shared one is not held)", paths)
	}
	// A custom resource with 5000 leaves: capped.
	big := make([]uint64, 5000)
	for i := range big {
		big[i] = uint64(1000 + i)
	}
	tr.Ownership("cr", "Knob.example.com", 1, owned("x", big), LiveAt(r0))
	if n := len(tr.owners["cr"].paths); n != maxObjectPaths {
		t.Errorf("paths of a 5000-leaf object %d, want the cap %d", n, maxObjectPaths)
	}
	// maxManagers distinct managers on objects that are then forgotten: a
	// new manager gets its own name, not other.
	tr2 := churnTracker()
	for i := range maxManagers {
		tr2.Ownership(fmt.Sprint("o", i), "Deployment", 1, owned(fmt.Sprint("m", i), []uint64{replicas}), LiveAt(r0))
	}
	if got := tr2.names[tr2.manager("late")]; got != LabelOther {
		t.Fatalf("manager beyond %d while all are held: %q, want other", maxManagers, got)
	}
	tr2.PruneOwnership(r0.Add(time.Hour)) // every object forgotten
	if got := tr2.names[tr2.manager("late")]; got != "late" {
		t.Errorf("manager after the release: %q, want late", got)
	}
	if len(tr2.managers) != 1 {
		t.Errorf("managers interned %d after the release, want 1", len(tr2.managers))
	}
}
