package serve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/timelines"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

// BenchmarkMetricsWithAPIClients is a scrape of /metrics (the timeline
// store's families, Go and process collectors) with a full timeline store,
// idle and while 8 clients read the largest timeline answers in a loop
// (issue 25: within 10 % of idle). It reports the p99 of the scrapes'
// wall-clock latency and of their own thread's CPU time: on 2 shared cores
// the wall clock also counts waiting for a core the 8 clients keep busy,
// the thread's CPU time does not, and a scrape waiting on a lock would show
// in the wall clock only.
func BenchmarkMetricsWithAPIClients(b *testing.B) {
	store := fullStore()
	for _, clients := range []int{0, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			o := handlerOptions("/metrics", true, true)
			c := timelines.New(store, o.Logger, time.Now)
			reg := o.Registerer
			if err := c.Register(reg); err != nil {
				b.Fatal(err)
			}
			o.Timelines = timelineweb.Options{Source: store, Now: time.Now}
			h, err := Handler(o)
			if err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, timelineweb.APIPath+"?limit=1000", nil)
					for {
						select {
						case <-stop:
							return
						default:
						}
						h.ServeHTTP(&discard{header: http.Header{}}, req)
					}
				})
			}
			req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, "/metrics", nil)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			lat := make([]time.Duration, 0, b.N)
			cpu := make([]time.Duration, 0, b.N)
			for b.Loop() {
				w := &discard{header: http.Header{}}
				t, c := time.Now(), threadCPU(b)
				h.ServeHTTP(w, req)
				lat = append(lat, time.Since(t))
				cpu = append(cpu, threadCPU(b)-c)
				if w.code != 0 && w.code != http.StatusOK {
					b.Fatalf("/metrics = %d", w.code)
				}
			}
			close(stop)
			wg.Wait()
			b.ReportMetric(p99ms(lat), "p99-ms")
			b.ReportMetric(p99ms(cpu), "p99-thread-cpu-ms")
		})
	}
}

// discard is a ResponseWriter that drops the answer.
type discard struct {
	header http.Header
	code   int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

func p99ms(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)*99/100].Microseconds()) / 1000
}

// threadCPU is the CPU time the calling thread used so far.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
