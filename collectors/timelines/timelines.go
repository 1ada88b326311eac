// Package timelines is the collector of the timeline store's own evidence
// and health: it feeds the store the Warning Events about the objects of
// open episodes (from the shared Warning Events informer, so also when the
// retries collector is disabled) and exposes how much the store's bounds
// cut. The rollouts and resources collectors feed the rest of each
// timeline from the informers they already read; the store is in package
// timeline.
package timelines

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Timelines

// Collector feeds Warning Events to a timeline store and exposes its bounds.
type Collector struct {
	store  *timeline.Store
	logger *slog.Logger
	now    func() time.Time

	dropped, evicted prometheus.CounterFunc
	bytes            prometheus.GaugeFunc
}

// The timeline store's families; their detail is in docs/metrics.md.
var (
	entriesDropped = metric.Family{
		Name: "kube_convergence_timeline_entries_dropped_total", Type: metric.Counter,
		Help: "Timeline entries not kept because their episode already held --timelines.max-entries, or cut from open episodes to keep --timelines.max-bytes.",
	}
	episodesEvicted = metric.Family{
		Name: "kube_convergence_timeline_episodes_evicted_total", Type: metric.Counter,
		Help: "Closed episodes evicted from the timeline store to keep --timelines.retained, --timelines.retained-per-object and --timelines.max-bytes.",
	}
	storeBytes = metric.Family{
		Name: "kube_convergence_timeline_bytes", Type: metric.Gauge,
		Help: "Memory the timeline store holds, as it counts it against --timelines.max-bytes.",
	}
)

// New returns the collector of store.
func New(store *timeline.Store, logger *slog.Logger, now func() time.Time) *Collector {
	return &Collector{
		store:   store,
		logger:  logger.With("collector", Name),
		now:     now,
		dropped: entriesDropped.NewCounterFunc(func() float64 { d, _ := store.Stats(); return float64(d) }),
		evicted: episodesEvicted.NewCounterFunc(func() float64 { _, e := store.Stats(); return float64(e) }),
		bytes:   storeBytes.NewGaugeFunc(func() float64 { return float64(store.Bytes()) }),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: Warning Events, the informer
// the retries collector shares.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.WarningEvents}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	return metric.Register(reg, metric.Declare(c.dropped, entriesDropped), metric.Declare(c.evicted, episodesEvicted), metric.Declare(c.bytes, storeBytes))
}

// Start implements collectors.Collector. Events of the initial list are
// offered too, but AddRelated keeps only those about an open episode, and
// the rollouts collector recovers its episodes only once pods and
// ReplicaSets have synced, mostly after this list was delivered: a
// recovered episode shows the occurrences that follow its recovery (an
// update with a higher count), not the ones before (docs/timelines.md).
func (c *Collector) Start(_ context.Context, f *informers.Factory) error {
	if _, err := informers.Watch(f, Name, informers.WarningEvents, c.handlers()); err != nil {
		return fmt.Errorf("timelines: %w", err)
	}
	return nil
}

func (c *Collector) handlers() informers.Handlers[eventsv1.Event] {
	return informers.Handlers[eventsv1.Event]{Changed: c.onEvent, Now: c.now}
}

// onEvent adds a Warning Event's new occurrences to the episode of its
// regarding object: a Pod or ReplicaSet of the workload, or the workload.
// An update that adds no occurrence (a metadata write) adds nothing. An
// Event recreated under its name during a watch gap comes as a new Event
// (old is nil): its count starts again.
func (c *Collector) onEvent(old, e *eventsv1.Event, seen informers.Seen) {
	if e.Type != "Warning" || e.Regarding.UID == "" {
		return
	}
	w := records.Warning(e)
	if old != nil && records.Warning(old).Count >= w.Count && old.Note == e.Note {
		return
	}
	entry := timeline.Entry{
		Time: seen.At, Type: timeline.EntryEvent,
		Object: &timeline.ObjectRef{Kind: e.Regarding.Kind, Namespace: e.Regarding.Namespace,
			Name: e.Regarding.Name, UID: string(e.Regarding.UID)},
		Reason: e.Reason, Message: e.Note, Controller: w.Controller, Count: int64(w.Count),
	}
	if !w.LastSeen.IsZero() {
		last := w.LastSeen
		entry.APITime = &last
	}
	c.store.AddRelated(string(e.Regarding.UID), entry)
}
