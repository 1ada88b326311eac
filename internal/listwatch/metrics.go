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
)

// Label values. They are a public interface: dashboards and rules match them.
const (
	reasonInitial = "initial" // relist: first cycle of a wrapper
	reasonExpired = "expired" // relist and restart: 410 Gone
	reasonError   = "error"   // relist and restart: any other failure

	restartTimeout = "timeout"
	restartClosed  = "closed"
)

var (
	relistReasons  = []string{reasonInitial, reasonExpired, reasonError}
	restartReasons = []string{restartTimeout, restartClosed, reasonError, reasonExpired}
)

// lagBuckets are in seconds. managedFields times have one-second precision
// (RFC 3339, truncated), so an observation is the true lag plus 0 to 1 s:
// buckets finer than half a second would only sort that truncation noise. The
// top matches the 300 s of kubeproxy_network_programming_duration_seconds.
var lagBuckets = []float64{0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300}

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
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_watch_relists_total",
			Help: "List cycles (full re-reads of the collection by LIST or by a WatchList stream with sendInitialEvents=true) started by the informer's reflector, by cause: " +
				"initial = the first cycle of this informer; expired = the previous watch or list failed with 410 Gone (its resource version is older than the watch cache or etcd still holds); " +
				"error = anything else forced it: another failed LIST or WATCH request, or a watch stream that ended within 1 s of its request without any event (client-go's VeryShortWatchError). " +
				"A cycle counts once however many requests it takes: LIST pages, the immediate retry after a 410, a WatchList stream's fall-back to LIST. " +
				"A watch resumed from its last resource version is not a relist.",
		}, []string{"resource", "reason"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_watch_restarts_total",
			Help: "Watch streams (WatchList streams included) that ended, by reason: timeout = the server closed it without error at or after its requested timeoutSeconds; " +
				"closed = it ended earlier without error: a broken connection or an API server shutting down (client-go ends the stream cleanly on both), the client stopping it, " +
				"or the empty stream client-go returns after retrying a failing watch request for about 10 s (one per 10 s while the API server is unreachable); " +
				"error = an ERROR event other than 410 (including stream decode errors); expired = an ERROR event with 410 Gone.",
		}, []string{"resource", "reason"}),
		bookmarks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_watch_bookmarks_total",
			Help: "BOOKMARK events received on watch streams, including the initial-events-end bookmark of WatchList streams.",
		}, []string{"resource"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_watch_events_total",
			Help: "ADDED, MODIFIED and DELETED events received on watch streams, including the initial events of WatchList (sendInitialEvents=true) streams; objects returned by LIST are not counted.",
		}, []string{"resource", "type"}),
		lastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kube_convergence_watch_last_event_timestamp_seconds",
			Help: "Unix time in seconds when the last ADDED, MODIFIED, DELETED or BOOKMARK watch event was received. Absent until the first one.",
		}, []string{"resource"}),
		initialSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kube_convergence_watch_initial_sync_duration_seconds",
			Help: "Duration of the last completed list cycle, from its first request (LIST or WatchList stream) to its last LIST page or initial-events-end bookmark, retries within the cycle included. Absent until the first cycle completes.",
		}, []string{"resource"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kube_convergence_watch_delivery_lag_seconds",
			Help: "Estimated delay between an API write and receipt of its watch event: receive time minus the newest metadata.managedFields[].time of the object, " +
				"observed for live ADDED and MODIFIED events (not DELETED, not LIST results, not the initial events of a WatchList stream) whose newest managedFields time is newer than any seen before for the object's UID. " +
				"An estimate with one-second precision: managedFields times are truncated to the second, so values read up to 1 s high; clock skew between API server and exporter adds to it; negative values are observed as 0.",
			Buckets: lagBuckets,
		}, []string{"resource"}),
		now: now,
	}
	if reg != nil {
		reg.MustRegister(m.relists, m.restarts, m.bookmarks, m.events, m.lastEvent, m.initialSync, m.lag)
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
