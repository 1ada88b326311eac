// Package retries is the collector of controller retries as the API shows
// them: the occurrences of Warning Events (events.k8s.io/v1, field selector
// type=Warning), per controller, reason and regarding kind; the gaps between
// occurrences on one object; the objects failing now. It is a lower bound:
// event recorders drop and batch occurrences (docs/retries.md). The counting
// is in package tracker (retries.go), the reading of an Event in package
// records (warning.go, shared with the timelines collector); this package
// adapts the shared Warning Events informer to them and its counts to
// metrics.
package retries

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Retries

// The retries families; their detail is in docs/metrics.md.
var (
	controllerRetries = metric.Family{
		Name: "kube_convergence_controller_retries_total", Type: metric.Counter,
		Help:   "Warning Event occurrences counted while the exporter watched, by controller, reason and kind: a lower bound on a controller's failed attempts.",
		Labels: []string{"controller", "reason", "kind"},
	}
	retryInterval = metric.Family{
		Name: "kube_convergence_controller_retry_interval_seconds", Type: metric.Histogram,
		Help:   "Gap between two consecutive live occurrences of a Warning Event on the same object, reason and controller, as received.",
		Labels: []string{"controller", "kind"},
	}
	retryIntervalsRecorderLimited = metric.Family{
		Name: "kube_convergence_controller_retry_intervals_recorder_limited_total", Type: metric.Counter,
		Help:   "Gaps between Warning Event occurrences that the event recorder times, not the controller; left out of the retry interval histogram.",
		Labels: []string{"controller", "kind"},
	}
	failingObjects = metric.Family{
		Name: "kube_convergence_controller_failing_objects", Type: metric.Gauge,
		Help:   "Objects failing now: last Warning occurrence younger than retries.failingWindow (35m after an open events.k8s.io series' write).",
		Labels: []string{"controller", "reason", "kind"},
	}
	longestFailing = metric.Family{
		Name: "kube_convergence_controller_longest_failing_seconds", Type: metric.Gauge,
		Help:   "Among the objects failing now, the longest run of Warning occurrences on one object, from its first occurrence to its last.",
		Labels: []string{"controller", "reason", "kind"},
	}
	retryEventsTracked = metric.Family{
		Name: "kube_convergence_controller_retry_events_tracked", Type: metric.Gauge,
		Help: "Warning Event UIDs whose last count the retries collector holds.",
	}

	retriesDesc  = controllerRetries.Desc()
	intervalDesc = retryInterval.Desc()
	limitedDesc  = retryIntervalsRecorderLimited.Desc()
	failingDesc  = failingObjects.Desc()
	longestDesc  = longestFailing.Desc()
	trackedDesc  = retryEventsTracked.Desc()
)

// Collector counts retries from Warning Events.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time

	mu      sync.Mutex // guards tr and failing
	tr      *tracker.RetryTracker
	failing *collectors.ZeroKept[tracker.RetryKey]
	created *collectors.CreatedTimes
}

// New returns the retries collector.
func New(cfg *config.Config, logger *slog.Logger, now func() time.Time) *Collector {
	return &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		tr: tracker.NewRetryTracker(tracker.RetryConfig{
			FailingWindow: time.Duration(cfg.Retries.FailingWindow),
			MaxReasons:    cfg.Retries.MaxReasons,
			// The per-label caps allow maxReasons^3 label sets: cap the
			// sets themselves like the other per-object families.
			MaxLabelSets: cfg.Stall.SeriesLimit,
		}),
		failing: collectors.NewZeroKept[tracker.RetryKey](),
		created: collectors.NewCreatedTimes(now()),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: Warning Events only.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.WarningEvents}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error { return metric.Register(reg, c) }

// Start implements collectors.Collector. The handler is attached once the
// informer has synced: its replay of the cache is the initial list, which
// sets every Event's baseline.
func (c *Collector) Start(_ context.Context, f *informers.Factory) error {
	if _, err := informers.Watch(f, Name, informers.WarningEvents, c.handlers()); err != nil {
		return fmt.Errorf("retries: %w", err)
	}
	return nil
}

// handlers observe Warning Events. An Event that expired (--event-ttl) and
// was written again under its name while the watch was down (the recorders
// create it again when their PATCH gets NotFound) is gone, then new: its
// old uid is forgotten.
func (c *Collector) handlers() informers.Handlers[eventsv1.Event] {
	return informers.Handlers[eventsv1.Event]{
		Changed: func(_, e *eventsv1.Event, seen informers.Seen) {
			if e.Type != "Warning" {
				return
			}
			w := records.Warning(e)
			c.mu.Lock()
			c.tr.Observe(w, seen)
			c.mu.Unlock()
		},
		Gone: func(e *eventsv1.Event, _ informers.Seen) {
			c.mu.Lock()
			c.tr.Delete(string(e.UID))
			c.mu.Unlock()
		},
		Now: c.now,
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{retriesDesc, intervalDesc, limitedDesc, failingDesc, longestDesc, trackedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the tracker's counts as they are.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The counters and the histogram carry created timestamps, as
	// client_golang's own do (collectors.CreatedTimes).
	created, done := c.created.Scrape(c.now())
	defer done()
	for k, n := range c.tr.Counts() {
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(retriesDesc, prometheus.CounterValue, float64(n),
			created("retries", k.Controller, k.Reason, k.Kind), k.Controller, k.Reason, k.Kind)
	}
	for k, h := range c.tr.Intervals() {
		buckets := make(map[float64]uint64, len(tracker.RetryIntervalBuckets))
		var cum uint64
		for i, b := range tracker.RetryIntervalBuckets {
			cum += h.Counts[i]
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogramWithCreatedTimestamp(intervalDesc, h.Count, h.Sum, buckets,
			created("interval", k.Controller, k.Kind), k.Controller, k.Kind)
	}
	for k, n := range c.tr.RecorderLimited() {
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(limitedDesc, prometheus.CounterValue, float64(n),
			created("limited", k.Controller, k.Kind), k.Controller, k.Kind)
	}
	failing := c.tr.FailingSince(c.now()) // releases idle label sets
	counts := make(map[tracker.RetryKey]int, len(failing))
	for k, f := range failing {
		counts[k] = f.Objects
	}
	c.failing.Forget(func(k tracker.RetryKey) bool { return !c.tr.Known(k) })
	// Both gauges share their label sets: 0 once a label set's objects
	// recover, until it is released.
	for k, n := range c.failing.Counts(counts) {
		ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, float64(n), k.Controller, k.Reason, k.Kind)
		ch <- prometheus.MustNewConstMetric(longestDesc, prometheus.GaugeValue, failing[k].Longest.Seconds(), k.Controller, k.Reason, k.Kind)
	}
	events, _ := c.tr.Tracked()
	ch <- prometheus.MustNewConstMetric(trackedDesc, prometheus.GaugeValue, float64(events))
}

// Families implements metric.Declared: every family is computed at scrape
// time.
func (c *Collector) Families() []metric.Family {
	return []metric.Family{controllerRetries, retryInterval, retryIntervalsRecorderLimited, failingObjects, longestFailing, retryEventsTracked}
}
