// Package listwatch instruments the List and Watch calls under the exporter's
// informers: relists and why they happened, watch stream restarts, events,
// bookmarks, the initial sync duration and an estimate of watch delivery lag.
//
// client-go removed its reflector metrics in 2019 (memory leaks) and nothing
// upstream counts relists today (KEP-4346 still landing), so the wrapper infers
// them from the sequence of calls the reflector makes; listerWatcher documents
// the state machine. docs/watch.md says what each number means for a cluster,
// with what e2e/watch_test.go measured against a real API server.
package listwatch

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// Label values. They are a public interface: dashboards and rules match them.
const (
	reasonInitial = "initial" // relist: first cycle of a wrapper
	reasonExpired = "expired" // relist and restart: 410 Gone
	reasonError   = "error"   // relist and restart: any other failure
	// relist: 410 Gone on the resume right after a stream that ended at its
	// timeout, before any event: the resource was quiet for longer than the
	// server's history (Events, served from etcd), and nothing was missed.
	reasonIdle = "idle"

	restartTimeout = "timeout"
	restartClosed  = "closed"
)

var (
	relistReasons  = []string{reasonInitial, reasonExpired, reasonIdle, reasonError}
	restartReasons = []string{restartTimeout, restartClosed, reasonError, reasonExpired}
)

// lagBuckets are in seconds. managedFields times have one-second precision
// (RFC 3339, truncated), so an observation is the true lag plus 0 to 1 s:
// buckets finer than half a second would only sort that truncation noise. The
// top matches the 300 s of kubeproxy_network_programming_duration_seconds.
var lagBuckets = []float64{0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300}

// The list/watch families. Their detail (what counts as a relist, which
// stream end is which reason, how the lag is estimated) is in
// docs/metrics.md and docs/watch.md.
var (
	watchRelists = metric.Family{
		Name: "kube_convergence_watch_relists_total", Type: metric.Counter,
		Help:   "List cycles (full re-reads of the collection by LIST or a WatchList stream) started by an informer's reflector, by cause.",
		Labels: []string{"resource", "reason"},
	}
	watchRestarts = metric.Family{
		Name: "kube_convergence_watch_restarts_total", Type: metric.Counter,
		Help:   "Watch streams, WatchList streams included, that ended, by reason.",
		Labels: []string{"resource", "reason"},
	}
	watchBookmarks = metric.Family{
		Name: "kube_convergence_watch_bookmarks_total", Type: metric.Counter,
		Help:   "BOOKMARK events received on watch streams, including the initial-events-end bookmark of WatchList streams.",
		Labels: []string{"resource"},
	}
	watchEvents = metric.Family{
		Name: "kube_convergence_watch_events_total", Type: metric.Counter,
		Help:   "ADDED, MODIFIED and DELETED events received on watch streams, WatchList initial events included; LIST results are not counted.",
		Labels: []string{"resource", "type"},
	}
	watchLastEvent = metric.Family{
		Name: "kube_convergence_watch_last_event_timestamp_seconds", Type: metric.Gauge,
		Help:   "Unix time in seconds when the last ADDED, MODIFIED, DELETED or BOOKMARK watch event was received.",
		Labels: []string{"resource"},
	}
	watchInitialSync = metric.Family{
		Name: "kube_convergence_watch_initial_sync_duration_seconds", Type: metric.Gauge,
		Help:   "Duration of the last completed list cycle, from its first request to its last LIST page or initial-events-end bookmark.",
		Labels: []string{"resource"},
	}
	watchDeliveryLag = metric.Family{
		Name: "kube_convergence_watch_delivery_lag_seconds", Type: metric.Histogram,
		Help:   "Estimate, to the second, of the delay between an API write and the receipt of its watch event, from the object's managedFields times.",
		Labels: []string{"resource"},
	}
)

// Metrics holds the list/watch metrics of the exporter's informers.
type Metrics struct {
	relists     *prometheus.CounterVec
	restarts    *prometheus.CounterVec
	bookmarks   *prometheus.CounterVec
	events      *prometheus.CounterVec
	lastEvent   *prometheus.GaugeVec
	initialSync *prometheus.GaugeVec
	lag         *prometheus.HistogramVec

	now func() time.Time // injectable for tests: delivery lag and durations
}

// NewMetrics builds the metrics and registers them on reg. With a nil reg the
// metrics are not registered but still usable (tests, dry runs).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return newMetrics(reg, time.Now)
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) *Metrics {
	m := &Metrics{
		relists:     watchRelists.NewCounterVec(),
		restarts:    watchRestarts.NewCounterVec(),
		bookmarks:   watchBookmarks.NewCounterVec(),
		events:      watchEvents.NewCounterVec(),
		lastEvent:   watchLastEvent.NewGaugeVec(),
		initialSync: watchInitialSync.NewGaugeVec(),
		lag:         watchDeliveryLag.NewHistogramVec(prometheus.HistogramOpts{Buckets: lagBuckets}),
		now:         now,
	}
	if reg != nil {
		reg.MustRegister(
			metric.Declare(m.relists, watchRelists),
			metric.Declare(m.restarts, watchRestarts),
			metric.Declare(m.bookmarks, watchBookmarks),
			metric.Declare(m.events, watchEvents),
			metric.Declare(m.lastEvent, watchLastEvent),
			metric.Declare(m.initialSync, watchInitialSync),
			metric.Declare(m.lag, watchDeliveryLag),
		)
	}
	return m
}

// Wrap returns lw instrumented for resource, in the API server's own form
// ("pods", "deployments.apps", "endpointslices.discovery.k8s.io"). Wrap once
// per informer: the relist state machine assumes one reflector behind it.
// Several wrappers of one resource add up in its counters.
func (m *Metrics) Wrap(resource string, lw cache.ListerWatcher) cache.ListerWatcher {
	return &listerWatcher{
		lw:         lw,
		ctxLW:      cache.ToListerWatcherWithContext(lw),
		m:          m.forResource(resource),
		now:        m.now,
		nextReason: reasonInitial,
	}
}

// resourceMetrics are one resource's children, resolved once so that the per
// event path does no label lookup.
type resourceMetrics struct {
	relists   map[string]prometheus.Counter
	restarts  map[string]prometheus.Counter
	events    map[watch.EventType]prometheus.Counter
	bookmarks prometheus.Counter

	// The gauges are created on first use (sync.OnceValue: one atomic load
	// afterwards), see forResource.
	lastEvent   func() prometheus.Gauge
	initialSync func() prometheus.Gauge
	lag         prometheus.Observer
}

// forResource resolves and zero-initialises every known label combination of
// the counters and the histogram, so rate() has a starting point. The two
// gauges are left absent until set: a 0 timestamp would read as "no event
// since 1970" to a staleness alert.
func (m *Metrics) forResource(resource string) *resourceMetrics {
	r := &resourceMetrics{
		relists:  make(map[string]prometheus.Counter, len(relistReasons)),
		restarts: make(map[string]prometheus.Counter, len(restartReasons)),
		events: map[watch.EventType]prometheus.Counter{
			watch.Added:    m.events.WithLabelValues(resource, "added"),
			watch.Modified: m.events.WithLabelValues(resource, "modified"),
			watch.Deleted:  m.events.WithLabelValues(resource, "deleted"),
		},
		bookmarks:   m.bookmarks.WithLabelValues(resource),
		lastEvent:   sync.OnceValue(func() prometheus.Gauge { return m.lastEvent.WithLabelValues(resource) }),
		initialSync: sync.OnceValue(func() prometheus.Gauge { return m.initialSync.WithLabelValues(resource) }),
		lag:         m.lag.WithLabelValues(resource),
	}
	for _, reason := range relistReasons {
		r.relists[reason] = m.relists.WithLabelValues(resource, reason)
	}
	for _, reason := range restartReasons {
		r.restarts[reason] = m.restarts.WithLabelValues(resource, reason)
	}
	return r
}
