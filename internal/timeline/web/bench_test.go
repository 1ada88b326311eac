package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// retainedStore is a full timeline store at the default
// --timelines.retained: 1000 episodes (980 closed, 20 stalled and open)
// over 20 namespaces and the three workload kinds, fed as the collectors
// feed it, each with entries entries of evidence (a 3-replica rollout
// records about 20: the write, a ReplicaSet, per pod its creation,
// binding, readiness and endpoint, the stages and the close;
// --timelines.max-entries caps at 200).
func retainedStore(entries int) *timeline.Store {
	s := timeline.NewStore(timeline.Config{})
	kinds := []tracker.Kind{tracker.Deployment, tracker.StatefulSet, tracker.DaemonSet}
	for i := range 1000 {
		uid := fmt.Sprintf("0b6f3c7e-%04d-4d1a-9f57-6c0f1e8a%04d", i, i)
		start := t0.Add(time.Duration(i) * time.Second)
		d := time.Duration(float64(i%97)+0.5) * time.Second
		ep := tracker.Episode{
			Kind: kinds[i%3], UID: uid, Namespace: fmt.Sprintf("team-%02d", i%20), Name: fmt.Sprintf("service-%04d", i),
			Generation: int64(i%7 + 1), Target: int64(i%7 + 1), Change: tracker.ChangeTemplate, Start: start, APIStart: start.Truncate(time.Second),
		}
		s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: start}})
		apiTime := start.Truncate(time.Second)
		s.Add(uid, timeline.Entry{Time: start, APITime: &apiTime, Type: timeline.EntryWrite, Generation: ep.Generation, Managers: []string{"kubectl-client-side-apply"}})
		for j := range entries - 1 {
			s.Add(uid, timeline.Entry{
				Time: start.Add(time.Duration(j) * 10 * time.Millisecond), APITime: &apiTime, Type: timeline.EntryReady,
				Object: &timeline.ObjectRef{Kind: "Pod", Namespace: ep.Namespace, Name: ep.Name + "-7c9d5f-" + strconv.Itoa(j)},
				Node:   "kwok-node-0", Reason: "ready", Message: "containers with unready status: [app]",
			})
		}
		reach := func(st tracker.Stage, d time.Duration) tracker.Event {
			return tracker.Event{Type: tracker.StageReached, Episode: ep, Stage: st, Duration: d, At: start.Add(d)}
		}
		s.ObserveEpisodes([]tracker.Event{reach(tracker.StageObserved, d/20), reach(tracker.StageUpdated, d/3)})
		if i%50 == 0 {
			s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeStalled, Episode: ep, Stage: tracker.StageAvailable, Reason: tracker.ReasonReplicaFailure, At: start.Add(5 * time.Minute)}})
			continue
		}
		out := tracker.OutcomeConverged
		if i%10 == 0 {
			out = tracker.OutcomeSuperseded
		}
		s.ObserveEpisodes([]tracker.Event{reach(tracker.StageAvailable, d*4/5), reach(tracker.StageEndpointsReady, d), {Type: tracker.EpisodeClosed, Episode: ep, Outcome: out, At: start.Add(d)}})
	}
	return s
}

// discard is a ResponseWriter that counts the bytes of the answer.
type discard struct {
	header http.Header
	code   int
	n      int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// BenchmarkAPI is the latency of the API at 1000 retained episodes (issue
// 17: p99 < 50 ms), from the request to the last byte of the answer, the
// handler and the store's filtering, sorting and copying included, the
// network not. It reports ns/op, the process's CPU time per request, the
// p99 of the b.N requests' wall-clock latencies and of their own thread's
// CPU time, and the size of an answer. docs/benchmarks.md has the numbers.
func BenchmarkAPI(b *testing.B) {
	for _, entries := range []int{20, 200} {
		src := retainedStore(entries)
		if n := len(src.List(timeline.Query{}, t0)); n != 1000 {
			b.Fatalf("%d episodes in the store, want 1000", n)
		}
		mux := http.NewServeMux()
		Register(mux, Options{Source: src, Now: func() time.Time { return t0.Add(time.Hour) }})
		for _, bc := range []struct{ name, path string }{
			{"list_default", APIPath},
			{"list_filtered", APIPath + "?namespace=team-07&kind=deploy&outcome=converged&state=closed&sort=start&limit=50"},
			{"list_1000", APIPath + "?limit=1000"},
			{"object", APIPath + "/deployments.apps/team-03/service-0123"},
			{"page", PagePath},
		} {
			b.Run(fmt.Sprintf("%s/entries=%d", bc.name, entries), func(b *testing.B) {
				req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, bc.path, nil)
				// The request's own thread's CPU time: what its latency
				// would be on a core of its own (GC assists included, the
				// background GC workers not), where the wall clock of this
				// shared machine also counts the wait for a core.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				lat := make([]time.Duration, 0, b.N)
				cpu := make([]time.Duration, 0, b.N)
				var size int
				b.ReportAllocs()
				cpu0 := processCPU(b)
				for b.Loop() {
					w := &discard{header: http.Header{}}
					t, c := time.Now(), threadCPU(b)
					mux.ServeHTTP(w, req)
					lat = append(lat, time.Since(t))
					cpu = append(cpu, threadCPU(b)-c)
					if w.code != 0 && w.code != http.StatusOK {
						b.Fatalf("GET %s = %d", bc.path, w.code)
					}
					size = w.n
				}
				// The process's CPU time per request (GC included): on a
				// shared machine the wall-clock latencies include waiting
				// for a core, this does not.
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
				b.ReportMetric(p99(lat), "p99-ms")
				b.ReportMetric(p99(cpu), "p99-thread-cpu-ms")
				b.ReportMetric(float64(size), "B/answer")
			})
		}
	}
}

func p99(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)*99/100].Microseconds()) / 1000
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// threadCPU is the CPU time the calling thread used so far, to the
// nanosecond (getrusage's RUSAGE_THREAD counts in scheduler ticks of 4 ms).
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
