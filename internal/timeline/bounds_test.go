package timeline

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// One object rolled out every 100 ms for 100 s (1,000 episodes) beside 900
// objects with one closed episode each: the flapping object keeps its own
// newest RetainedPerObject, and the others keep theirs (the global FIFO
// alone evicted 899 of them).
func TestStoreFlappingObjectKeepsOthersTimelines(t *testing.T) {
	s := NewStore(Config{})
	for i := range 900 {
		ep := deploy(fmt.Sprintf("o%03d", i), 1, time.Duration(i)*time.Millisecond)
		s.ObserveEpisodes([]tracker.Event{opened(ep), closedAt(ep, tracker.OutcomeConverged, time.Second)})
	}
	flap := tracker.Episode{Kind: tracker.Deployment, UID: "flap", Namespace: "shop", Name: "flapper", Change: tracker.ChangeTemplate}
	for g := int64(1); g <= 1000; g++ {
		ep := flap
		ep.Generation, ep.Target, ep.Start = g, g, at(time.Second+time.Duration(g)*100*time.Millisecond)
		s.ObserveEpisodes([]tracker.Event{opened(ep)})
		s.Add("flap", Entry{Time: ep.Start, Type: EntryWrite, Generation: g})
		s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeSuperseded, At: ep.Start.Add(50 * time.Millisecond)}})
	}
	now := at(200 * time.Second)
	for i := range 900 {
		if got := s.List(Query{UID: fmt.Sprintf("o%03d", i)}, now); len(got) != 1 {
			t.Fatalf("object o%03d keeps %d episodes, want its one", i, len(got))
		}
	}
	var gens []int64
	for _, e := range s.Object("Deployment", "shop", "flapper", now) {
		gens = append(gens, e.Generation)
	}
	if want := []int64{1000, 999, 998, 997, 996}; !slices.Equal(gens, want) {
		t.Errorf("flapping object keeps generations %v, want its newest %v", gens, want)
	}
	if _, ev := s.Stats(); ev != 995 {
		t.Errorf("evicted %d, want 995 (the flapping object's own)", ev)
	}
	// The FIFO does not keep the 995 evicted out of order.
	if n := len(s.closed) - s.first; n > 2*s.closedLive+64 {
		t.Errorf("closed FIFO holds %d records for %d retained", n, s.closedLive)
	}
}

// stuck opens n episodes that never close, each a rollout of 10 pods
// crash-looping: the write, each pod's creation (relating it), then
// BackOff Events about them up to entries entries (strings of their own,
// as the informers hand them).
func stuck(s *Store, n, entries int) {
	for i := range n {
		uid := fmt.Sprintf("stuck-%05d", i)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: fmt.Sprintf("ns-%02d", i%50), Name: fmt.Sprintf("web-%05d", i),
			Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: at(time.Duration(i) * time.Millisecond)}
		s.ObserveEpisodes([]tracker.Event{opened(ep)})
		s.Add(uid, Entry{Time: ep.Start, Type: EntryWrite, Generation: 2, Managers: []string{"kubectl-client-side-apply"}})
		pod := func(j int) *ObjectRef {
			return &ObjectRef{Kind: "Pod", Namespace: ep.Namespace, Name: fmt.Sprintf("web-%05d-7d9f8c6b5-%05d", i, j%10), UID: fmt.Sprintf("9f3a%016d%016d", i, j%10)}
		}
		for j := range entries - 1 {
			t := ep.Start.Add(time.Duration(j+1) * time.Millisecond)
			if j < 10 {
				s.Add(uid, Entry{Time: t, Type: EntryObject, Object: pod(j), Reason: "created"})
				continue
			}
			p := pod(j)
			s.AddRelated(p.UID, Entry{Time: t, Type: EntryEvent, Object: p,
				Reason: "BackOff", Message: "Back-off restarting failed container app in pod " + p.Name,
				Controller: "kubelet", Count: int64(j)})
		}
	}
}

// 5,000 stuck rollouts of 100 entries each (about 150 MB unbounded) in a
// 32 MiB store: the store's count stays within the budget, the heap the
// store holds too, and every episode keeps its first entry (the write) and
// its last, with the rest counted as dropped.
func TestStoreBudgetBoundsStuckRollouts(t *testing.T) {
	const budget = 32 << 20
	before := heap()
	s := NewStore(Config{MaxBytes: budget})
	stuck(s, 5000, 100)
	held := heap() - before
	if b := s.Bytes(); b > budget {
		t.Errorf("Bytes = %d, over the budget %d", b, budget)
	}
	if held > budget {
		t.Errorf("the store holds %d bytes of heap, over the budget %d (its own count: %d)", held, budget, s.Bytes())
	}
	t.Logf("5,000 stuck rollouts in a %d-byte budget: %d bytes counted, %d bytes of heap held", budget, s.Bytes(), held)
	eps := s.List(Query{}, at(time.Hour))
	if len(eps) != 5000 {
		t.Fatalf("%d open episodes listed, want 5000", len(eps))
	}
	var trimmed int
	for _, e := range eps {
		if e.Entries[0].Type != EntryWrite {
			t.Fatalf("%s lost its first entry: %v", e.UID, types(e.Entries))
		}
		if len(e.Entries)+e.EntriesDropped != 100 {
			t.Fatalf("%s: %d entries + %d dropped, want 100", e.UID, len(e.Entries), e.EntriesDropped)
		}
		if e.EntriesDropped > 0 {
			trimmed++
			if len(e.Entries) != 2 || e.Entries[1].Count != 98 {
				t.Fatalf("%s trimmed to %d entries, the last %+v; want the first and the last (count 98)", e.UID, len(e.Entries), e.Entries[len(e.Entries)-1])
			}
		}
	}
	if trimmed == 0 || uint64(trimmed) != s.Trimmed() {
		t.Errorf("%d episodes trimmed, Trimmed() = %d", trimmed, s.Trimmed())
	}
	// A trimmed episode goes on with its last entry replaced.
	e := s.List(Query{UID: "stuck-00000"}, at(time.Hour))[0]
	s.Add("stuck-00000", Entry{Time: at(time.Minute), Type: EntryReady, Reason: "ready"})
	e2 := s.List(Query{UID: "stuck-00000"}, at(time.Hour))[0]
	if e.EntriesDropped > 0 && (len(e2.Entries) != 2 || e2.Entries[1].Type != EntryReady || e2.EntriesDropped != e.EntriesDropped+1) {
		t.Errorf("after one more entry: %v, %d dropped", types(e2.Entries), e2.EntriesDropped)
	}
	runtime.KeepAlive(s)
}

// Closed episodes go first when the budget is reached: the open ones keep
// every entry while closed ones can be evicted.
func TestStoreBudgetEvictsClosedBeforeTrimmingOpen(t *testing.T) {
	s := NewStore(Config{MaxBytes: 1 << 20})
	fill(s, 200, 50) // closed, about 2 MB
	if s.Bytes() > 1<<20 {
		t.Errorf("Bytes = %d, over 1 MiB", s.Bytes())
	}
	_, evicted := s.Stats()
	if evicted == 0 {
		t.Fatal("nothing evicted: the budget is not reached, make the fill larger")
	}
	stuck(s, 5, 20)
	for _, e := range s.List(Query{State: StateInProgress}, at(time.Hour)) {
		if len(e.Entries) != 20 || e.EntriesDropped != 0 {
			t.Errorf("%s: %d entries, %d dropped, want all 20 while closed episodes remain", e.UID, len(e.Entries), e.EntriesDropped)
		}
	}
	if s.Trimmed() != 0 {
		t.Errorf("Trimmed = %d, want 0", s.Trimmed())
	}
}

// Bytes follows what is stored: back to zero once everything is evicted.
func TestStoreBytesAccounting(t *testing.T) {
	s := NewStore(Config{Retained: 3, MaxEntries: 10})
	if s.Bytes() != 0 {
		t.Fatalf("empty store counts %d bytes", s.Bytes())
	}
	fill(s, 3, 40)
	three := s.Bytes()
	fill(s, 3, 40) // the same uids again: each evicts one
	if s.Bytes() != three {
		t.Errorf("Bytes = %d after replacing every episode with its like, want %d", s.Bytes(), three)
	}
	stuck(s, 1, 500)
	// Its 10 entries, and a relation per pod (10).
	open := s.Bytes() - three
	if want := int64(10 * relationSize); open <= want || open > want+8*1024 {
		t.Errorf("an open episode of 500 entries cut to 10, of 10 pods, counts %d bytes, want %d and at most 8 KiB more", open, want)
	}
	s.ObserveEpisodes([]tracker.Event{closedAt(deploy("stuck-00000", 2, 0), tracker.OutcomeDeleted, time.Hour)})
	s.ObserveEpisodes([]tracker.Event{opened(deploy("x", 1, 0))}) // pushes nothing out: 4 retained, 3 closed
	if got := s.Bytes() - three; got <= 0 || got > 8*1024 {
		t.Errorf("closed, its relations forgotten, it counts %d bytes", got)
	}
}

// One object's episodes come a page at a time, newest first, each page's
// next continuing where it stopped, even while new episodes open.
func TestStoreObjectPages(t *testing.T) {
	s := NewStore(Config{RetainedPerObject: 100})
	ep := tracker.Episode{Kind: tracker.Deployment, UID: "u", Namespace: "shop", Name: "web", Change: tracker.ChangeTemplate}
	for g := int64(1); g <= 45; g++ {
		e := ep
		e.Generation, e.Target, e.Start = g, g, at(time.Duration(g)*time.Second)
		s.ObserveEpisodes([]tracker.Event{opened(e), {Type: tracker.EpisodeClosed, Episode: e, Outcome: tracker.OutcomeSuperseded, At: e.Start.Add(time.Millisecond)}})
	}
	q := Query{Kind: "Deployment", Namespace: "shop", Name: "web", Limit: 20}
	var gens []int64
	for page := 0; ; page++ {
		sel := s.Select(q, at(time.Hour))
		if sel.Total() != 45-20*page {
			t.Errorf("page %d: Total %d, want %d", page, sel.Total(), 45-20*page)
		}
		for i := range sel.Len() {
			gens = append(gens, sel.Header(i).Generation)
		}
		if page == 0 {
			e := ep
			e.Generation, e.Target, e.Start = 46, 46, at(time.Minute)
			s.ObserveEpisodes([]tracker.Event{opened(e)}) // newer: not on the next pages
		}
		if sel.Next() == 0 {
			break
		}
		q.Before = sel.Next()
	}
	want := make([]int64, 0, 45)
	for g := int64(45); g >= 1; g-- {
		want = append(want, g)
	}
	if !slices.Equal(gens, want) {
		t.Errorf("pages gave generations %v, want 45 down to 1 once each", gens)
	}
}

// A selection's entries are those of the moment it was taken, copied
// after the lock: writes that follow (appends, dropped chunks, a trim, the
// close, eviction) do not change it. Run with -race.
func TestStoreSelectionIsASnapshot(t *testing.T) {
	s := NewStore(Config{MaxEntries: 40, Retained: 1})
	ep := deploy("u", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	for i := range 100 {
		s.Add("u", Entry{Time: at(time.Duration(i) * time.Millisecond), Type: EntryReady, Message: fmt.Sprint(i)})
	}
	sel := s.Select(Query{UID: "u"}, at(time.Second))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 100; i < 2000; i++ {
			s.Add("u", Entry{Time: at(time.Duration(i) * time.Millisecond), Type: EntryReady, Message: fmt.Sprint(i)})
		}
		s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeConverged, 3*time.Second)})
		other := deploy("v", 1, time.Second)
		s.ObserveEpisodes([]tracker.Event{opened(other), closedAt(other, tracker.OutcomeConverged, 4*time.Second)}) // evicts u
	})
	var got []string
	for range 50 {
		got = got[:0]
		for _, e := range sel.Episode(0).Entries {
			got = append(got, e.Message)
		}
	}
	wg.Wait()
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint(i))
	}
	for i := 80; i < 100; i++ {
		want = append(want, fmt.Sprint(i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("snapshot entries changed under writes:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	if len(s.List(Query{UID: "u"}, at(time.Hour))) != 0 {
		t.Error("u not evicted: the test did not exercise eviction")
	}
}

// Kinds lists the kinds of the retained episodes, from the index.
func TestStoreKinds(t *testing.T) {
	s := NewStore(Config{Retained: 1})
	cert := tracker.Episode{Kind: "Certificate.cert-manager.io", UID: "c", Namespace: "shop", Name: "tls", Generation: 1, Start: t0}
	s.ObserveEpisodes([]tracker.Event{opened(cert), opened(deploy("d", 1, 0))})
	if got := s.Kinds(); !slices.Equal(got, []string{"Certificate.cert-manager.io", "Deployment"}) {
		t.Errorf("Kinds = %v", got)
	}
	if got := s.List(Query{Kind: "Certificate.cert-manager.io"}, t0); len(got) != 1 || got[0].UID != "c" {
		t.Errorf("by kind: %v", uids(got))
	}
	s.ObserveEpisodes([]tracker.Event{closedAt(cert, tracker.OutcomeConverged, time.Second)})
	other := cert
	other.UID, other.Name = "c2", "tls2"
	s.ObserveEpisodes([]tracker.Event{opened(other), closedAt(other, tracker.OutcomeConverged, 2*time.Second)}) // evicts c
	d := deploy("d", 1, 0)
	s.ObserveEpisodes([]tracker.Event{closedAt(d, tracker.OutcomeConverged, 3*time.Second)}) // evicts c2
	if got := s.Kinds(); !slices.Equal(got, []string{"Deployment"}) {
		t.Errorf("Kinds after evicting the certificates = %v", got)
	}
}

// Bytes is an upper bound of the heap the store holds, in the shapes the
// feed gives it: closed episodes of Events, of pods, open ones.
func TestStoreBytesBoundsTheHeap(t *testing.T) {
	for name, fill := range map[string]func(*Store){
		"1000 closed of 200 event entries": func(s *Store) { fill(s, 1000, 200) },
		"1000 closed of 10 pods":           func(s *Store) { fillPods(s, 1000, 10) },
		"1000 closed of 50 pods":           func(s *Store) { fillPods(s, 1000, 50) },
		"2000 open of 100 entries":         func(s *Store) { stuck(s, 2000, 100) },
	} {
		before := heap()
		s := NewStore(Config{MaxBytes: 1 << 30})
		fill(s)
		held := heap() - before
		if held > uint64(s.Bytes()) {
			t.Errorf("%s: %d bytes of heap held, %d counted", name, held, s.Bytes())
		}
		t.Logf("%s: %d bytes of heap held, %d counted (%.2f)", name, held, s.Bytes(), float64(s.Bytes())/float64(held))
		runtime.KeepAlive(s)
	}
}

// An object recreated while its episode was open has two episodes of its
// name: the older one, closing last, is the object's newest closed and
// stays; RetainedPerObject evicts the other.
func TestStoreCloseKeepsTheEpisodeItCloses(t *testing.T) {
	s := NewStore(Config{RetainedPerObject: 1})
	old, recreated := deploy("old", 1, 0), deploy("new", 1, time.Second)
	recreated.Name = old.Name
	s.ObserveEpisodes([]tracker.Event{opened(old), opened(recreated), closedAt(recreated, tracker.OutcomeConverged, 2*time.Second)})
	s.ObserveEpisodes([]tracker.Event{closedAt(old, tracker.OutcomeDeleted, 3*time.Second)})
	got := s.Object("Deployment", "shop", old.Name, at(time.Hour))
	if len(got) != 1 || got[0].UID != "old" || got[0].Outcome != string(tracker.OutcomeDeleted) {
		t.Errorf("the object keeps %q, want the episode just closed, old/1", uids(got))
	}
	if _, ev := s.Stats(); ev != 1 {
		t.Errorf("evicted %d, want 1", ev)
	}
}

// checkCounted checks that every object reference the store keeps is
// counted: by its entry, or by a kept entry before it that holds it (an
// entry flagged sharedObj counts nothing for it), and that Bytes is what
// the retained records count, each recounted from what it keeps.
func checkCounted(t *testing.T, s *Store, when string) {
	t.Helper()
	var sum int64
	for _, rs := range s.byUID {
		for _, r := range rs {
			var kept []entry
			kept = append(kept, r.head...)
			skip := r.tailLen - r.tailShown
			for _, c := range r.tail {
				kept = append(kept, c...)
			}
			n := recordSize(r) + entriesSize(r.head) + int64(len(s.relatedOf[r.ep.UID]))*relationSize
			for _, c := range r.tail {
				n += entriesSize(c)
			}
			if r.bytes != n {
				t.Errorf("%s: %s counts %d bytes, its records and entries %d", when, r.ep.UID, r.bytes, n)
			}
			sum += r.bytes
			for i, e := range kept {
				if e.flags&sharedObj == 0 || e.obj == nil {
					continue
				}
				if !slices.ContainsFunc(kept[:i], func(x entry) bool { return x.obj == e.obj }) {
					t.Errorf("%s: %s: entry %d (of %d kept, %d not shown) shares an object no entry before it counts", when, r.ep.UID, i, len(kept), skip)
				}
			}
		}
	}
	if s.Bytes() != sum {
		t.Errorf("%s: Bytes = %d, the records count %d", when, s.Bytes(), sum)
	}
}

// An entry sharing its object reference with an earlier one counts it
// again once that one is gone: its tail chunk dropped, not shown at the
// close, cut by a trim.
func TestStoreCountsSharedObjectsOnceTheirHolderIsGone(t *testing.T) {
	// Head 3, tail 3: chunks of 3, the oldest dropped as entries come.
	s := NewStore(Config{MaxEntries: 6})
	ep := deploy("u", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	pod := func(j int) *ObjectRef {
		return &ObjectRef{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-7d9f8c6b5-%05d", j/5), UID: fmt.Sprintf("pod-%d", j/5)}
	}
	for j := range 40 {
		s.Add("u", Entry{Time: at(time.Duration(j) * time.Millisecond), Type: EntryEvent, Object: pod(j), Reason: "BackOff"})
		checkCounted(t, s, fmt.Sprintf("open, entry %d", j))
	}
	s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeConverged, time.Second)})
	checkCounted(t, s, "closed")

	// Trimmed: its entries cut to the first and the last, each one added
	// then replacing the last.
	s = NewStore(Config{MaxBytes: 1})
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	for j := range 20 {
		s.Add("u", Entry{Time: at(time.Duration(j) * time.Millisecond), Type: EntryEvent, Object: pod(j), Reason: "BackOff"})
		checkCounted(t, s, fmt.Sprintf("trimmed, entry %d", j))
	}
	if s.Trimmed() == 0 {
		t.Fatal("never trimmed")
	}
}

// Starts that Unix nanoseconds cannot hold (a zero Start, years before
// 1678 or after 2262, for which UnixNano is undefined) sort as the
// earliest or the latest there is, not where an overflow puts them.
func TestStoreSortsStartsOutOfUnixNanoRange(t *testing.T) {
	s := NewStore(Config{})
	for _, ep := range []tracker.Episode{deploy("zero", 1, 0), deploy("now", 1, 0), deploy("y1600", 1, 0), deploy("y3000", 1, 0)} {
		switch ep.UID {
		case "zero":
			ep.Start = time.Time{}
		case "y1600":
			ep.Start = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)
		case "y3000":
			ep.Start = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		s.ObserveEpisodes([]tracker.Event{opened(ep)})
	}
	// Clamped alike, y1600 and zero come newest opened first.
	want := []string{"y3000/1", "now/1", "y1600/1", "zero/1"}
	if got := uids(s.List(Query{Sort: SortStart}, at(time.Hour))); !slices.Equal(got, want) {
		t.Errorf("by start: %v, want %v", got, want)
	}
}
