package informers

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// handlerLagBuckets are in seconds: watch delivery on an idle API server is
// 3-10 ms (client-go v0.37.2 informer, measured on the sandbox), so the
// exporter's own delay is worth seeing from half a millisecond; the top is
// the liveness timeout's order of magnitude.
var handlerLagBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// handlerLag's detail is in docs/metrics.md.
var handlerLag = metric.Family{
	Name: "kube_convergence_handler_lag_seconds", Type: metric.Histogram,
	Help:   "Time from the receipt of a live watch event until the collector's handler finished with it: the exporter's own delay.",
	Labels: []string{"collector"},
}

// handlers holds what the wrapped event handlers of every collector report:
// the handler lag histogram and each handler's progress, for liveness.
type handlers struct {
	lag *prometheus.HistogramVec
	now func() time.Time

	mu   sync.Mutex
	list []*handler
}

func newHandlers(now func() time.Time) *handlers {
	return &handlers{
		now: now,
		lag: handlerLag.NewHistogramVec(prometheus.HistogramOpts{Buckets: handlerLagBuckets}),
	}
}

// handler is one wrapped ResourceEventHandler. A shared informer calls each
// handler from one goroutine of its own, in order, so a handler runs at most
// one call at a time.
type handler struct {
	collector string
	inner     cache.ResourceEventHandler
	lag       prometheus.Observer
	now       func() time.Time
	// started is the Unix nanosecond start of the call in progress, 0 when
	// idle: a call that never returns (a deadlock, an endless loop) is what
	// a wedged exporter looks like from here.
	started atomic.Int64
	// behind is the lag (ns) of the last live event handled and handledAt
	// when (Unix ns): a handler that keeps up this far behind its events has
	// a backlog that old.
	behind, handledAt atomic.Int64
}

// newHandler wraps inner, a collector's event handler, so that its delay
// and liveness are measured once it is attached (track).
func (f *Factory) newHandler(collector string, inner cache.ResourceEventHandler) *handler {
	return &handler{collector: collector, inner: inner, lag: f.handlers.lag.WithLabelValues(collector), now: f.handlers.now}
}

// track watches the liveness of h, now attached to its informer.
func (f *Factory) track(h *handler) {
	f.handlers.mu.Lock()
	f.handlers.list = append(f.handlers.list, h)
	f.handlers.mu.Unlock()
}

// forget stops watching the liveness of h, detached from its informer.
func (f *Factory) forget(h *handler) {
	f.handlers.mu.Lock()
	defer f.handlers.mu.Unlock()
	for i, w := range f.handlers.list {
		if w == h {
			f.handlers.list = append(f.handlers.list[:i], f.handlers.list[i+1:]...)
			return
		}
	}
}

// OnAdd implements cache.ResourceEventHandler.
func (h *handler) OnAdd(obj any, isInInitialList bool) {
	h.begin()
	h.inner.OnAdd(obj, isInInitialList)
	h.end(obj, isInInitialList)
}

// OnUpdate implements cache.ResourceEventHandler.
func (h *handler) OnUpdate(oldObj, newObj any) {
	h.begin()
	h.inner.OnUpdate(oldObj, newObj)
	h.end(newObj, false)
}

// OnDelete implements cache.ResourceEventHandler.
func (h *handler) OnDelete(obj any) {
	h.begin()
	h.inner.OnDelete(obj)
	// A tombstone stands for a delete seen by a relist, not a live event.
	_, tomb := obj.(cache.DeletedFinalStateUnknown)
	h.end(obj, tomb)
}

func (h *handler) begin() { h.started.Store(h.now().UnixNano()) }

func (h *handler) end(obj any, notLive bool) {
	done := h.now()
	h.started.Store(0)
	at, listed := Received(obj)
	if notLive || listed || at.IsZero() {
		return
	}
	lag := max(done.Sub(at), 0)
	h.lag.Observe(lag.Seconds())
	h.behind.Store(int64(lag))
	h.handledAt.Store(done.UnixNano())
}

// Wedged reports whether a collector's event handling has stopped making
// progress: a handler call has been running for longer than timeout, or the
// last live event a handler finished (within the last timeout) had waited
// longer than timeout since its receipt, so its queue holds events that old.
// A quiet cluster, or an API server that is down, delivers no events and is
// never wedged: that is readiness, not liveness.
func (f *Factory) Wedged(now time.Time, timeout time.Duration) (collector string, stuck time.Duration, wedged bool) {
	f.handlers.mu.Lock()
	defer f.handlers.mu.Unlock()
	for _, h := range f.handlers.list {
		if s := h.started.Load(); s != 0 {
			if d := now.Sub(time.Unix(0, s)); d > timeout && d > stuck {
				collector, stuck, wedged = h.collector, d, true
			}
		}
		if at := h.handledAt.Load(); at != 0 && now.Sub(time.Unix(0, at)) <= timeout {
			if d := time.Duration(h.behind.Load()); d > timeout && d > stuck {
				collector, stuck, wedged = h.collector, d, true
			}
		}
	}
	return collector, stuck, wedged
}

// Register registers the factory's own metrics (handler lag, unexpected
// objects) on reg.
func (f *Factory) Register(reg prometheus.Registerer) error {
	if err := reg.Register(metric.Declare(f.handlers.lag, handlerLag)); err != nil {
		return err
	}
	return reg.Register(metric.Declare(f.unexpected, unexpectedObjects))
}
