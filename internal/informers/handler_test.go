package informers

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func stamped(name string, at time.Time, listed bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Stamp(p, at, listed)
	return p
}

func TestHandlerLagAndLiveness(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	f := New(nil, nil, slog.New(slog.DiscardHandler))
	f.handlers.now = clk.Now
	reg := prometheus.NewRegistry()
	if err := f.Register(reg); err != nil {
		t.Fatal(err)
	}
	var block sync.Mutex
	h := f.tracked("pods", cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { clk.Step(30 * time.Millisecond) }, // the handler's own work
		AddFunc:    func(any) { block.Lock(); block.Unlock() },         //nolint:staticcheck,gocritic // SA2001, badLock: waits until the test unlocks
	})

	// A live event received 20 ms before its handler started: lag 50 ms.
	clk.Step(20 * time.Millisecond)
	h.OnUpdate(nil, stamped("a", t0, false))
	// Listed, initial and unstamped objects are not observed.
	h.OnUpdate(nil, stamped("b", clk.Now(), true))
	h.OnAdd(stamped("c", clk.Now(), false), true)
	h.OnUpdate(nil, &corev1.Pod{})
	want := `
# HELP kube_convergence_handler_lag_seconds Time from the receipt of a live watch event until the collector's handler finished with it: the exporter's own delay.
# TYPE kube_convergence_handler_lag_seconds histogram
`
	if n := testutil.CollectAndCount(reg, "kube_convergence_handler_lag_seconds"); n != 1 {
		t.Fatalf("%d handler lag series, want 1", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want+histLine(0.05)), "kube_convergence_handler_lag_seconds"); err != nil {
		t.Error(err)
	}

	if c, _, wedged := f.Wedged(clk.Now(), time.Minute); wedged {
		t.Errorf("wedged (%s) after handlers that returned", c)
	}
	// A handler that never returns: wedged once the call is older than the
	// timeout, not before.
	block.Lock()
	done := make(chan struct{})
	go func() { h.OnAdd(stamped("d", clk.Now(), false), false); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for f.handlers.list[0].started.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("handler call did not start")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Minute)
	if _, _, wedged := f.Wedged(clk.Now(), time.Minute); wedged {
		t.Error("wedged at exactly the timeout")
	}
	clk.Step(time.Second)
	if c, stuck, wedged := f.Wedged(clk.Now(), time.Minute); !wedged || c != "pods" || stuck != 61*time.Second {
		t.Errorf("Wedged = %s %v %v, want pods 61s true", c, stuck, wedged)
	}
	block.Unlock()
	<-done

	// A handler keeping up 2 minutes behind its events has a backlog that
	// old: wedged while that is recent.
	h.OnUpdate(nil, stamped("e", clk.Now().Add(-2*time.Minute), false))
	if _, _, wedged := f.Wedged(clk.Now(), time.Minute); !wedged {
		t.Error("not wedged with a 2-minute backlog")
	}
	clk.Step(2 * time.Minute)
	if c, _, wedged := f.Wedged(clk.Now(), time.Minute); wedged {
		t.Errorf("still wedged (%s) 2 minutes after the backlog was handled", c)
	}
}

// histLine renders the one expected observation of the pods histogram.
func histLine(v float64) string {
	var b strings.Builder
	for _, le := range handlerLagBuckets {
		n := 0
		if v <= le {
			n = 1
		}
		b.WriteString(`kube_convergence_handler_lag_seconds_bucket{collector="pods",le="` + strconv.FormatFloat(le, 'g', -1, 64) + `"} ` + strconv.Itoa(n) + "\n")
	}
	b.WriteString(`kube_convergence_handler_lag_seconds_bucket{collector="pods",le="+Inf"} 1` + "\n")
	b.WriteString(`kube_convergence_handler_lag_seconds_sum{collector="pods"} ` + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
	b.WriteString(`kube_convergence_handler_lag_seconds_count{collector="pods"} 1` + "\n")
	return b.String()
}

// tracked is a handler measured as an attached watch's is.
func (f *Factory) tracked(collector string, inner cache.ResourceEventHandler) *handler {
	h := f.newHandler(collector, inner)
	f.track(h)
	return h
}
