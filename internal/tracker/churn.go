package tracker

import (
	"sort"
	"time"
)

// Write churn: how often objects are written without progress and by
// whom, and field ownership that moves back and forth between two writers
// (a fight). Every write the tracker sees is a live watch event; list
// cycles only set baselines (a relist shows the state after a gap, not the
// writes in it).
//
// A write is progress when it moves the object's state to one it has not
// had recently: the state asked for (Progress.Spec) or the state reported
// towards it (Progress.Status). A write that moves neither (a restamped
// time or annotation, a counter without progress) or moves one back to a
// state among its last recentStates (a field toggled back and forth, two
// writers fighting over it) is the loop the hot-object window counts. A
// write that changes nothing never reaches the watch: the API server does
// not store it.

// hotBuckets splits the hot-object window into this many buckets: a count
// over the window is exact to one bucket (5 %).
const hotBuckets = 20

// maxManagers bounds the field manager names the tracker interns: a field
// manager name is chosen by each client, so a hostile or buggy one could
// invent a new name per write.
const maxManagers = 1000

// ChurnConfig configures a ChurnTracker.
type ChurnConfig struct {
	// Window over which writes per object are counted; HotWrites is the
	// count above which an object is hot.
	Window    time.Duration
	HotWrites int
	// FlapWindow: a move of ownership A→B followed by B→A within it is a
	// flap.
	FlapWindow time.Duration
	// MaxPairs caps the distinct manager pairs counted; later pairs fold
	// into other/other.
	MaxPairs int
}

// HotKey is one object and writer whose writes are counted.
type HotKey struct{ Kind, Namespace, Name, Manager string }

// Progress is an object's state before or after a write, as two hashes the
// collector computes per kind: Spec, the state asked for (replicas, the
// pod template: what metadata.generation covers, without what only
// restamps it), and Status, the state reported towards it
// (observedGeneration, replica counts, conditions' status and reason; no
// times).
type Progress struct{ Spec, Status uint32 }

// recentStates is how many distinct states of each part an object
// remembers: a return to one of them is a toggle. Four catch a field
// toggled between two values, or cycled through three, by one writer or
// two; a rollout's states never return (observedGeneration and
// updatedReplicas only grow).
const recentStates = 4

// recent is a part's last distinct states (16 bytes and two counters).
type recent struct {
	states  [recentStates]uint32
	n, next uint8
}

func (r *recent) has(x uint32) bool {
	for _, s := range r.states[:r.n] {
		if s == x {
			return true
		}
	}
	return false
}

func (r *recent) add(x uint32) {
	r.states[r.next] = x
	r.next = (r.next + 1) % recentStates
	r.n = min(r.n+1, recentStates)
}

// moved reports whether a write from `from` to `to` is progress of this
// part: it changed, to a state not among the recent ones.
func (r *recent) moved(from, to uint32) bool {
	if !r.has(from) {
		r.add(from)
	}
	if from == to || r.has(to) {
		return false
	}
	r.add(to)
	return true
}

// HotObject is a hot object with its write count over the window.
type HotObject struct {
	HotKey
	Writes int
}

// FlapKey is the label set of the flaps counter: A < B.
type FlapKey struct{ Kind, A, B string }

// ManagedEntry is one managedFields entry: its manager and the hashes of
// the leaf field paths it owns.
type ManagedEntry struct {
	Manager string
	Leaves  []uint64
}

type objectName struct{ kind, namespace, name string }

// objectWrites is what the tracker holds of an object written in the
// window: about 60 bytes, plus a count ring per manager with writes
// counted.
type objectWrites struct {
	managers     map[string]*hotCounts // nil until a write is counted
	spec, status recent
	last         int64 // absolute bucket of the newest write
}

type hotCounts struct {
	counts [hotBuckets]uint16
	last   int64 // absolute index of the newest bucket
}

// pathOwner is the owner of one leaf path: the manager index that owns it
// alone (paths owned by several are not held), the one it moved from at its last move (-1:
// unknown) and when.
type pathOwner struct {
	owner, from int32
	at          int64
}

type ownership struct {
	kind        string
	fingerprint uint64 // of the managedFields last read, see Unchanged
	seen        int64  // last receipt (Unix ns), see PruneOwnership
	paths       map[uint64]pathOwner
}

// maxObjectPaths caps the leaf paths held per object. A Deployment has a
// few dozen to a few hundred (its pod template); a custom resource's schema
// is its author's, and one with a large list (thousands of entries) would
// cost 24 bytes per leaf and per object. Paths beyond the cap are not
// tracked (the ones held are kept, so the set is stable across writes).
const maxObjectPaths = 2048

// ChurnTracker counts writes and ownership flaps. Not safe for concurrent
// use.
type ChurnTracker struct {
	cfg         ChurnConfig
	bucketWidth int64 // ns
	hot         map[objectName]*objectWrites
	owners      map[string]*ownership // by object UID
	managers    map[string]int32
	names       []string // by manager index; "" for a released index
	free        []int32  // released indexes, reused first
	flaps       map[FlapKey]uint64
	pairs       map[[2]string]bool
}

// NewChurnTracker returns an empty tracker.
func NewChurnTracker(cfg ChurnConfig) *ChurnTracker {
	return &ChurnTracker{
		cfg:         cfg,
		bucketWidth: max(int64(cfg.Window)/hotBuckets, 1),
		hot:         map[objectName]*objectWrites{},
		owners:      map[string]*ownership{},
		managers:    map[string]int32{},
		flaps:       map[FlapKey]uint64{},
		pairs:       map[[2]string]bool{},
	}
}

// advance moves h's ring to bucket b, clearing the buckets in between.
func (h *hotCounts) advance(b int64) {
	if b <= h.last {
		return
	}
	for i := h.last + 1; i <= b && i <= h.last+hotBuckets; i++ {
		h.counts[i%hotBuckets] = 0
	}
	h.last = b
}

func (h *hotCounts) sum() int {
	n := 0
	for _, c := range h.counts {
		n += int(c)
	}
	return n
}

// Write judges one live write of an object by manager at `at`, from the
// state `from` to `to`, and counts it when it is not progress (see
// Progress). It reports whether it counted it.
func (t *ChurnTracker) Write(k HotKey, at time.Time, from, to Progress) bool {
	o := objectName{k.Kind, k.Namespace, k.Name}
	b := at.UnixNano() / t.bucketWidth
	w := t.hot[o]
	if w == nil {
		w = &objectWrites{}
		t.hot[o] = w
	}
	w.last = max(w.last, b)
	// Both parts are judged (and remembered), whichever made progress.
	spec := w.spec.moved(from.Spec, to.Spec)
	status := w.status.moved(from.Status, to.Status)
	if spec || status {
		return false
	}
	if w.managers == nil {
		w.managers = map[string]*hotCounts{}
	}
	h := w.managers[k.Manager]
	if h == nil {
		h = &hotCounts{last: b}
		w.managers[k.Manager] = h
	}
	h.advance(b)
	if c := &h.counts[b%hotBuckets]; b > h.last-hotBuckets && *c < ^uint16(0) {
		*c++
	}
	return true
}

// Busy reports whether the object's live writes counted in the window
// (not progress), all managers together, exceed half of HotWrites at `at`:
// the objects whose writer is worth attributing precisely (a fight
// mis-attributed by a time tie splits its writes between the two
// managers).
func (t *ChurnTracker) Busy(kind, namespace, name string, at time.Time) bool {
	w := t.hot[objectName{kind, namespace, name}]
	if w == nil {
		return false
	}
	b := at.UnixNano() / t.bucketWidth
	n := 0
	for _, h := range w.managers {
		h.advance(b)
		n += h.sum()
	}
	return n > t.cfg.HotWrites/2
}

// Hot returns the (object, manager) pairs with more than HotWrites writes
// counted in the window ending at now, most writes first, and forgets the
// managers with none left and the objects not written in the window.
func (t *ChurnTracker) Hot(now time.Time) []HotObject {
	b := now.UnixNano() / t.bucketWidth
	var out []HotObject
	for o, w := range t.hot {
		for m, h := range w.managers {
			h.advance(b)
			n := h.sum()
			if n == 0 {
				delete(w.managers, m)
				continue
			}
			if n > t.cfg.HotWrites {
				out = append(out, HotObject{HotKey{o.kind, o.namespace, o.name, m}, n})
			}
		}
		if len(w.managers) == 0 {
			w.managers = nil
			if w.last <= b-hotBuckets {
				delete(t.hot, o)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Writes != out[j].Writes {
			return out[i].Writes > out[j].Writes
		}
		a, b := out[i].HotKey, out[j].HotKey
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Manager < b.Manager
	})
	return out
}

// ForgetObject drops the write counts and states of a deleted object.
func (t *ChurnTracker) ForgetObject(kind, namespace, name string) {
	delete(t.hot, objectName{kind, namespace, name})
}

func (t *ChurnTracker) manager(name string) int32 {
	if i, ok := t.managers[name]; ok {
		return i
	}
	if len(t.managers) >= maxManagers {
		name = LabelOther
		if i, ok := t.managers[name]; ok {
			return i
		}
	}
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		t.managers[name] = i
		t.names[i] = name
		return i
	}
	i := int32(len(t.names))
	t.managers[name] = i
	t.names = append(t.names, name)
	return i
}

// releaseManagers frees the indexes no held path refers to (as owner or as
// the owner it moved from), so that managers of forgotten objects no longer
// count against maxManagers.
func (t *ChurnTracker) releaseManagers() {
	used := make([]bool, len(t.names))
	for _, st := range t.owners {
		for _, p := range st.paths {
			if p.owner >= 0 {
				used[p.owner] = true
			}
			if p.from >= 0 {
				used[p.from] = true
			}
		}
	}
	for i, name := range t.names {
		if name != "" && !used[i] {
			delete(t.managers, name)
			t.names[i] = ""
			t.free = append(t.free, int32(i))
		}
	}
}

// Ownership reads the managedFields of object uid (of kind) received at
// `at`, and counts its flaps: leaf paths whose sole owner moved back to the
// manager it had moved away from within the flap window (at most one per
// manager pair and write). listed: delivered by a
// list cycle, or the first state the tracker sees of the object: a
// baseline, no move is judged across it.
// fingerprint identifies the managedFields it was read from (see
// Unchanged).
func (t *ChurnTracker) Ownership(uid, kind string, fingerprint uint64, entries []ManagedEntry, seen Seen) {
	at, listed := seen.At, !seen.Live
	cur := map[uint64]int32{}
	for _, e := range entries {
		m := t.manager(e.Manager)
		for _, p := range e.Leaves {
			if o, ok := cur[p]; ok && o != m {
				cur[p] = -1 // shared
			} else {
				cur[p] = m
			}
		}
	}
	st := t.owners[uid]
	if st == nil {
		st = &ownership{kind: kind, paths: make(map[uint64]pathOwner, len(cur))}
		t.owners[uid] = st
		listed = true
	}
	st.fingerprint = fingerprint
	st.seen = max(st.seen, at.UnixNano())
	now := at.UnixNano()
	var counted [][2]int32
	for p, owner := range cur {
		prev, ok := st.paths[p]
		switch {
		case owner < 0:
			// Several owners: no move to judge, and nothing to keep (a
			// path owned alone again later starts from a baseline).
			delete(st.paths, p)
		case !ok:
			if len(st.paths) < maxObjectPaths {
				st.paths[p] = pathOwner{owner: owner, from: -1}
			}
		case prev.owner == owner:
		case listed:
			st.paths[p] = pathOwner{owner: owner, from: -1}
		default:
			if prev.from == owner && now-prev.at <= int64(t.cfg.FlapWindow) {
				pair := [2]int32{min(prev.owner, owner), max(prev.owner, owner)}
				seen := false
				for _, c := range counted {
					seen = seen || c == pair
				}
				if !seen {
					counted = append(counted, pair)
					t.flap(kind, t.names[prev.owner], t.names[owner])
				}
			}
			st.paths[p] = pathOwner{owner: owner, from: prev.owner, at: now}
		}
	}
	for p := range st.paths {
		if _, ok := cur[p]; !ok {
			delete(st.paths, p)
		}
	}
}

func (t *ChurnTracker) flap(kind, a, b string) {
	if b < a {
		a, b = b, a
	}
	pair := [2]string{a, b}
	if !t.pairs[pair] {
		if len(t.pairs) >= t.cfg.MaxPairs {
			a, b = LabelOther, LabelOther
		} else {
			t.pairs[pair] = true
		}
	}
	t.flaps[FlapKey{kind, a, b}]++
}

// Unchanged reports whether object uid's managedFields still have the
// fingerprint last read: then no ownership moved, and decoding them again
// (about 140 µs and 700 allocations for a Deployment,
// BenchmarkOwnershipUpdate) can be skipped. Most writes are status writes by
// the same controller, which leave the field sets as they were.
// It records the receipt at `at` either way.
func (t *ChurnTracker) Unchanged(uid string, fingerprint uint64, at time.Time) bool {
	st := t.owners[uid]
	if st == nil {
		return false
	}
	st.seen = max(st.seen, at.UnixNano())
	return st.fingerprint == fingerprint
}

// PruneOwnership forgets objects not received for two flap windows: a flap
// needs two moves within one window, so such an object's next write can
// only start a new fight, and its state is only a baseline, which its next
// write sets again (a fight resumed after the pause is counted one move
// later). It bounds the memory of objects whose deletion the tracker never
// hears of (custom resources, whose informers belong to another collector).
func (t *ChurnTracker) PruneOwnership(now time.Time) {
	limit := now.UnixNano() - 2*int64(t.cfg.FlapWindow)
	for uid, st := range t.owners {
		if st.seen < limit {
			delete(t.owners, uid)
		}
	}
	t.releaseManagers()
}

// ForgetOwnership drops the ownership of a deleted object.
func (t *ChurnTracker) ForgetOwnership(uid string) { delete(t.owners, uid) }

// Flaps returns the flaps counted per label set (the tracker's own map).
func (t *ChurnTracker) Flaps() map[FlapKey]uint64 { return t.flaps }

// OwnershipTracked returns the number of objects and leaf paths whose
// ownership is held.
func (t *ChurnTracker) OwnershipTracked() (objects, paths int) {
	for _, o := range t.owners {
		paths += len(o.paths)
	}
	return len(t.owners), paths
}
