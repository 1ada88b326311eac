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

// fill stores n closed Deployment episodes of entries entries each, shaped
// like the feed's: a write, then pod evidence (an object reference and a
// message of their own per entry, as the informers hand them), stages, the
// close.
func fill(s *Store, n, entries int) {
	for i := range n {
		uid := fmt.Sprintf("0b7c1e3a-5d2f-4c8e-9a61-%012d", i)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: "shop", Name: fmt.Sprintf("web-%d", i),
			Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: t0.Add(time.Duration(i) * time.Second)}
		s.ObserveEpisodes([]tracker.Event{opened(ep)})
		api := ep.Start.Truncate(time.Second)
		s.Add(uid, Entry{Time: ep.Start, APITime: &api, Type: EntryWrite, Generation: 2, Managers: []string{"kubectl-client-side-apply"}})
		for j := range entries - 6 {
			pod := fmt.Sprintf("web-%d-7d9f8c6b5-%05d", i, j)
			s.Add(uid, Entry{Time: ep.Start.Add(time.Duration(j) * time.Millisecond), Type: EntryEvent,
				Object: &ObjectRef{Kind: "Pod", Namespace: "shop", Name: pod, UID: fmt.Sprintf("9f3a%032d", j)},
				Reason: "FailedCreate", Message: "Error creating: pods \"" + pod + "\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1",
				Controller: "replicaset-controller", Count: int64(j)})
		}
		d := time.Second
		s.ObserveEpisodes([]tracker.Event{
			reachedAfter(ep, tracker.StageObserved, d), reachedAfter(ep, tracker.StageUpdated, 2*d),
			reachedAfter(ep, tracker.StageAvailable, 3*d), reachedAfter(ep, tracker.StageEndpointsReady, 4*d),
			{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: ep.Start.Add(4 * d)},
		})
	}
}

// fillPods stores n closed Deployment episodes of pods pods each, with the
// entries the rollout collector writes per pod (created, scheduled, ready,
// a ready endpoint), each event's object reference and strings of its own
// as the informers hand them: the store's shape in a rollout of many pods.
func fillPods(s *Store, n, pods int) {
	for i := range n {
		uid := fmt.Sprintf("0b7c1e3a-5d2f-4c8e-9a61-%012d", i)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: "shop", Name: fmt.Sprintf("web-%d", i),
			Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: t0.Add(time.Duration(i) * time.Second)}
		s.ObserveEpisodes([]tracker.Event{opened(ep)})
		for j := range pods {
			at := ep.Start.Add(time.Duration(j) * time.Millisecond)
			ref := func() *ObjectRef {
				return &ObjectRef{Kind: "Pod", Namespace: strings.Clone("shop"), Name: fmt.Sprintf("web-%d-7d9f8c6b5-%05d", i, j), UID: fmt.Sprintf("9f3a%032d", j)}
			}
			created, scheduled, ready := at.Truncate(time.Second), at.Add(time.Millisecond).Truncate(time.Second), at.Add(time.Second).Truncate(time.Second)
			r := ref()
			s.Add(uid, Entry{Time: at, Type: EntryObject, Object: r, Reason: "created", APITime: &created})
			s.Add(uid, Entry{Time: at, Type: EntryScheduled, Object: r, Node: fmt.Sprintf("node-%d", j%30), APITime: &scheduled})
			s.Add(uid, Entry{Time: at.Add(time.Second), Type: EntryReady, Object: ref(), Reason: "ready", APITime: &ready})
			s.Add(uid, Entry{Time: at.Add(time.Second), Type: EntryEndpoint, Object: ref(), Reason: "ready", Message: strings.Clone("web"), APITime: &ready})
		}
		s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: ep.Start.Add(5 * time.Second)}})
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStoreMemory reports the heap held by a full store of 1000
// closed episodes (--timelines.retained's default), per episode and per
// entry: the entries-free cost of an episode from a store of 6-entry
// episodes (write, 4 stages, close), the cost of an entry from the
// difference with 200-entry ones (--timelines.max-entries' default).
func BenchmarkStoreMemory(b *testing.B) {
	const n = 1000
	for _, entries := range []int{6, 50, 200} {
		b.Run(fmt.Sprintf("episodes=%d/entries=%d", n, entries), func(b *testing.B) {
			storeMemory(b, n, float64(entries), "B/entry", func(s *Store) { fill(s, n, entries) })
		})
	}
	// Pods' entries: 4 per pod, 10 and 50 pods per episode.
	for _, pods := range []int{10, 50} {
		b.Run(fmt.Sprintf("episodes=%d/pods=%d", n, pods), func(b *testing.B) {
			storeMemory(b, n, float64(pods), "B/pod", func(s *Store) { fillPods(s, n, pods) })
		})
	}
}

// storeMemory reports the heap a store of n episodes filled by fill holds,
// per episode and per unit (of which an episode holds per).
func storeMemory(b *testing.B, n int, per float64, unit string, fill func(*Store)) {
	var perEpisode float64
	for range b.N {
		before := heap()
		s := NewStore(Config{Retained: n})
		fill(s)
		perEpisode = float64(heap()-before) / float64(n)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perEpisode, "B/episode")
	b.ReportMetric(perEpisode/per, unit)
}

// BenchmarkStoreAdd is the cost of one entry on the feed's path.
func BenchmarkStoreAdd(b *testing.B) {
	s := NewStore(Config{})
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	e := Entry{Time: t0, Type: EntryReady, Object: &ObjectRef{Kind: "Pod", Name: "web-1", UID: "p1"}, Reason: "ready"}
	b.ReportAllocs()
	for b.Loop() {
		s.Add("u1", e)
	}
}

// BenchmarkStoreList reads a full store of 1000 closed 50-entry episodes:
// the API's default list (100 longest), a namespace's 1000, one uid.
func BenchmarkStoreList(b *testing.B) {
	s := NewStore(Config{Retained: 1000})
	fill(s, 1000, 50)
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"default-100", Query{Limit: 100}},
		{"all-1000", Query{Namespace: "shop", Limit: 1000}},
		{"uid", Query{UID: fmt.Sprintf("0b7c1e3a-5d2f-4c8e-9a61-%012d", 500)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(s.List(tc.q, now)) == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}

// BenchmarkStoreSelectLock is how long a timeline API request holds the
// store's lock, with a full store (1000 closed episodes of 200 entries and
// 20 open ones): Select runs under the lock from its start to its snapshot
// (the entries are copied after it, by Selection.Episode, measured apart as
// copy-us). It reports the p99 of the b.N calls (issue 25: under 1 ms).
func BenchmarkStoreSelectLock(b *testing.B) {
	s := NewStore(Config{MaxBytes: 1 << 30})
	fill(s, 1000, 200)
	stuck(s, 20, 200)
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"default-100", Query{Limit: 100}},
		{"all-1000", Query{Limit: 1000}},
		{"namespace", Query{Namespace: "ns-07", Limit: 100}},
		{"kind", Query{Kind: "Deployment", Limit: 100}},
		{"uid", Query{UID: fmt.Sprintf("0b7c1e3a-5d2f-4c8e-9a61-%012d", 500)}},
		{"object-page", Query{Kind: "Deployment", Namespace: "shop", Name: "web-500", Limit: 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			held := make([]time.Duration, 0, b.N)
			var copied time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t := time.Now()
				sel := s.Select(tc.q, now)
				held = append(held, time.Since(t))
				if sel.Len() == 0 {
					b.Fatal("empty")
				}
				t = time.Now()
				_ = sel.Episode(0)
				copied += time.Since(t)
			}
			slices.Sort(held)
			b.ReportMetric(float64(held[len(held)*99/100].Nanoseconds())/1000, "p99-lock-us")
			b.ReportMetric(float64(copied.Nanoseconds())/1000/float64(len(held)), "copy-us/episode")
		})
	}
}

// BenchmarkStoreAddWhileReading is a collector's Add (what a handler waits
// for) while 8 readers select and copy full answers of the full store in a
// loop: the p99 of the Add calls' latency. Readers hold the lock only for
// their snapshot, so the writer waits microseconds, not the 322 ms of a
// store that copied entries under its lock.
func BenchmarkStoreAddWhileReading(b *testing.B) {
	for _, readers := range []int{0, 8} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			s := NewStore(Config{MaxBytes: 1 << 30})
			fill(s, 1000, 200)
			stuck(s, 20, 10)
			now := t0.Add(time.Hour)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range readers {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						sel := s.Select(Query{Limit: 1000}, now)
						for i := range sel.Len() {
							_ = sel.Episode(i)
						}
					}
				})
			}
			e := Entry{Time: t0, Type: EntryReady, Object: &ObjectRef{Kind: "Pod", Name: "web-1", UID: "p1"}, Reason: "ready"}
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t := time.Now()
				s.Add("stuck-00003", e)
				lat = append(lat, time.Since(t))
			}
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-us")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds())/1000, "max-us")
		})
	}
}
