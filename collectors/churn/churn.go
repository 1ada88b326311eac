// Package churn is the collector of write churn over the resources the
// exporter already watches (no watch and no RBAC of its own): updates per
// kind and namespace, hot objects with the field manager that writes them,
// and field ownership that moves back and forth between two managers. The
// field manager is read from managedFields by a hook that runs before the
// informers' transform drops them (informers.BeforeCompact, and for custom
// resources informers.CustomResources.BeforeTransform); the cache keeps
// only the writer's name. The counting is in package tracker (churn.go).
package churn

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Churn

// WriterUnknown is the manager label of a write whose object carries no
// timed managedFields entry.
const WriterUnknown = "unknown"

// kinds maps the built-in resources whose writes are counted to their kind
// label and the watch of their type. Warning Events are not here: each
// occurrence is a write, counted by the retries collector.
var kinds = map[informers.Resource]struct {
	name  string
	watch func(c *Collector, f *informers.Factory, r informers.Resource, kind string) error
}{
	informers.Pods:           {"Pod", watchWrites[informers.Pod]},
	informers.Services:       {"Service", watchWrites[corev1.Service]},
	informers.Nodes:          {"Node", watchWrites[corev1.Node]},
	informers.Deployments:    {"Deployment", watchWrites[appsv1.Deployment]},
	informers.StatefulSets:   {"StatefulSet", watchWrites[appsv1.StatefulSet]},
	informers.DaemonSets:     {"DaemonSet", watchWrites[appsv1.DaemonSet]},
	informers.ReplicaSets:    {"ReplicaSet", watchWrites[appsv1.ReplicaSet]},
	informers.EndpointSlices: {"EndpointSlice", watchWrites[discoveryv1.EndpointSlice]},
	informers.Namespaces:     {"Namespace", watchWrites[corev1.Namespace]},
}

// ownershipKinds are the kinds whose field ownership is tracked: workloads
// that several writers (a GitOps tool, an HPA, a human with kubectl) may
// fight over. Never Pods: thousands per cluster, one writer per field.
var ownershipKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// The churn families; their detail is in docs/metrics.md.
var (
	objectUpdates = metric.Family{
		Name: "kube_convergence_object_updates_total", Type: metric.Counter,
		Help:   "Updates of watched objects received live (watch MODIFIED events), by whether metadata.generation moved.",
		Labels: []string{"kind", "namespace", "generation_changed"},
	}
	hotObjectWrites = metric.Family{
		Name: "kube_convergence_hot_object_writes", Type: metric.Gauge,
		Help:   "Writes to one object by one field manager in the last churn.window that moved it to no new state, exposed only above churn.hotWrites; capped.",
		Labels: []string{"kind", "namespace", "name", "manager"},
	}
	ownershipFlaps = metric.Family{
		Name: "kube_convergence_field_ownership_flaps_total", Type: metric.Counter,
		Help:   "Writes that gave a field path's sole ownership back to the manager it had moved from within churn.flapWindow: two writers fighting.",
		Labels: []string{"kind", "manager_a", "manager_b"},
	}
	ownershipDecodeErrors = metric.Family{
		Name: "kube_convergence_field_ownership_decode_errors_total", Type: metric.Counter,
		Help: "managedFields entries whose fieldsV1 could not be decoded; their fields are left out of ownership.",
	}
	hotObjectWritesDropped = metric.Family{
		Name: "kube_convergence_hot_object_writes_series_dropped_total", Type: metric.Counter,
		Help: "Hot (object, manager) pairs left out of kube_convergence_hot_object_writes by stall.seriesLimit, counted once per pair while it stays hot.",
	}

	updatesDesc      = objectUpdates.Desc()
	hotDesc          = hotObjectWrites.Desc()
	flapsDesc        = ownershipFlaps.Desc()
	decodeErrorsDesc = ownershipDecodeErrors.Desc()
)

type updateKey struct {
	kind, namespace string
	generation      bool
}

// Collector counts write churn.
type Collector struct {
	cfg       *config.Config
	logger    *slog.Logger
	now       func() time.Time
	resources []informers.Resource
	created   *collectors.CreatedTimes

	mu           sync.Mutex // guards everything below
	tr           *tracker.ChurnTracker
	updates      map[updateKey]uint64
	hotCap       *collectors.SeriesCap
	decodeErrors uint64
	// writers holds, per object UID, the managedFields entries of the last
	// version of busy objects (tracker.Busy), to attribute their next write
	// to the entry that changed (informers.Writer).
	writers map[string]writerState
}

type writerState struct {
	entries informers.ManagerEntries
	seen    time.Time
}

// New returns the churn collector over watched, the resources the other
// enabled collectors read; those in churn.exclude and those without a kind
// here are left alone.
func New(cfg *config.Config, watched []informers.Resource, logger *slog.Logger, now func() time.Time) *Collector {
	var rs []informers.Resource
	for _, r := range watched {
		if _, ok := kinds[r]; ok && !cfg.ChurnExcluded(r.String()) {
			rs = append(rs, r)
		}
	}
	return &Collector{
		cfg:       cfg,
		logger:    logger.With("collector", Name),
		now:       now,
		resources: rs,
		created:   collectors.NewCreatedTimes(now()),
		tr: tracker.NewChurnTracker(tracker.ChurnConfig{
			Window:     time.Duration(cfg.Churn.Window),
			HotWrites:  cfg.Churn.HotWrites,
			FlapWindow: time.Duration(cfg.Churn.FlapWindow),
			MaxPairs:   cfg.Churn.MaxPairs,
		}),
		updates: map[updateKey]uint64{},
		writers: map[string]writerState{},
		hotCap:  collectors.NewSeriesCap(hotObjectWritesDropped, cfg.Stall.SeriesLimit),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: a subset of what the other
// collectors watch, so no new watch and no new RBAC.
func (c *Collector) Resources() []informers.Resource { return c.resources }

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	return metric.Register(reg, c, c.hotCap.Dropped())
}

// Start implements collectors.Collector. Ownership state of objects not
// received for two flap windows is pruned every flap window, apart from
// scrapes.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	go c.pruneEvery(ctx, time.Duration(c.cfg.Churn.FlapWindow))
	// Custom resources (those configured under resources:): ownership
	// only, read from every informer the factory's custom resource tracker
	// runs. Their writes are not counted: those informers come and go with
	// their CRDs.
	f.CustomResources().BeforeTransform(func(ci informers.CustomInformer) informers.Hook {
		return c.hookOf(records.KindLabel(ci.Resource.Group, ci.Kind), true)
	})
	for _, r := range c.resources {
		k := kinds[r]
		f.BeforeCompact(r, c.hook(k.name))
		if err := k.watch(c, f, r, k.name); err != nil {
			return fmt.Errorf("churn: %w", err)
		}
	}
	return nil
}

// watchWrites counts the updates of r's objects, of type T and kind.
func watchWrites[T any, P interface {
	*T
	metav1.Object
}](c *Collector, f *informers.Factory, r informers.Resource, kind string) error {
	_, err := informers.Watch(f, Name, r, writeHandlers[T, P](c, kind))
	return err
}

// writeHandlers count the updates of objects of kind (an add is no write
// of an object the exporter watched) and forget a deleted object.
func writeHandlers[T any, P interface {
	*T
	metav1.Object
}](c *Collector, kind string) informers.Handlers[T] {
	return informers.Handlers[T]{
		Changed: func(old, cur *T, seen informers.Seen) {
			if old != nil {
				c.onUpdate(kind, P(old), P(cur), seen)
			}
		},
		Gone: func(last *T, _ informers.Seen) { c.onDelete(kind, P(last)) },
		Now:  c.now,
	}
}

// hook reads an object before it is compacted: it records the writer in an
// annotation the cache keeps, and the field ownership of workloads.
func (c *Collector) hook(kind string) informers.Hook {
	return c.hookOf(kind, ownershipKinds[kind])
}

func (c *Collector) hookOf(kind string, ownership bool) informers.Hook {
	return func(m metav1.Object) {
		if w := c.writer(kind, m); w != "" {
			a := m.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[informers.AnnotationWriter] = w
			m.SetAnnotations(a)
		}
		if !ownership {
			return
		}
		if len(m.GetManagedFields()) == 0 {
			return // nothing to read (a compacted copy, or a server without managedFields)
		}
		uid, fp := string(m.GetUID()), fingerprint(m)
		seen := informers.SeenOf(m, c.now)
		at, listed := seen.At, !seen.Live
		c.mu.Lock()
		same := c.tr.Unchanged(uid, fp, at)
		if !same && listed {
			// An initial list or a relist is a baseline: decoding every
			// listed object (about 140 µs each, BenchmarkOwnershipUpdate)
			// would judge nothing. Ownership is read from the first live
			// write on, itself a baseline; a relisted object whose fields
			// moved inside the gap is forgotten, so no move is judged
			// across it.
			c.tr.ForgetOwnership(uid)
		}
		c.mu.Unlock()
		if same || listed {
			return
		}
		entries, bad := managedEntries(m)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.decodeErrors += uint64(bad)
		c.tr.Ownership(uid, kind, fp, entries, seen)
	}
}

// writer names the manager of the write that produced m. For a busy object
// (tracker.Busy) it compares the managedFields entries with the previous
// version's (informers.Writer), since the newest time alone gives writes in
// the same second as another manager's to the first entry; otherwise the
// newest time. A listed version is compared with nothing (a gap).
func (c *Collector) writer(kind string, m metav1.Object) string {
	if len(m.GetManagedFields()) == 0 {
		return ""
	}
	uid := string(m.GetUID())
	seen := informers.SeenOf(m, c.now)
	at, listed := seen.At, !seen.Live
	c.mu.Lock()
	prev, tracked := c.writers[uid]
	busy := !listed && c.tr.Busy(kind, m.GetNamespace(), m.GetName(), at)
	c.mu.Unlock()
	if !tracked && !busy {
		return informers.NewestManager(m)
	}
	cur := informers.Entries(m)
	if listed {
		prev.entries = nil
	}
	w := informers.Writer(prev.entries, cur, m)
	c.mu.Lock()
	if busy {
		c.writers[uid] = writerState{entries: cur, seen: at}
	} else {
		delete(c.writers, uid)
	}
	c.mu.Unlock()
	return w
}

// fingerprint hashes who owns what in m's managedFields (manager,
// operation, subresource and the fieldsV1 bytes), leaving out the times: a
// write that only moves a time moves no ownership.
func fingerprint(m metav1.Object) uint64 {
	h := fnv.New64a()
	for _, e := range m.GetManagedFields() {
		_, _ = h.Write([]byte(e.Manager))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(e.Operation))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(e.Subresource))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(e.FieldsV1.GetRawBytes())
		_, _ = h.Write([]byte{1})
	}
	return h.Sum64()
}

// managedEntries decodes the leaf paths each manager owns, as 64-bit
// hashes of their fieldpath form (".spec.replicas"); bad counts entries that
// did not decode.
func managedEntries(m metav1.Object) (out []tracker.ManagedEntry, bad int) {
	for _, e := range m.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var s fieldpath.Set
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			bad++
			continue
		}
		var leaves []uint64
		s.Leaves().Iterate(func(p fieldpath.Path) {
			h := fnv.New64a()
			_, _ = h.Write([]byte(p.String()))
			leaves = append(leaves, h.Sum64())
		})
		out = append(out, tracker.ManagedEntry{Manager: e.Manager, Leaves: leaves})
	}
	return out, bad
}

// onUpdate counts a live update of an object of kind from om to nm, and
// judges it for the hot objects: a write that is not progress (progressOf)
// counts for its writer.
func (c *Collector) onUpdate(kind string, om, nm metav1.Object, seen informers.Seen) {
	if !seen.Live {
		return // the state after a gap: the writes inside it were not seen
	}
	writer := informers.RecordedWriter(nm)
	if writer == "" {
		writer = WriterUnknown
	}
	k := updateKey{kind, c.cfg.NamespaceLabelValue(nm.GetNamespace()), om.GetGeneration() != nm.GetGeneration()}
	from, judged := progressOf(om)
	to, _ := progressOf(nm)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates[k]++
	if judged {
		c.tr.Write(tracker.HotKey{Kind: kind, Namespace: nm.GetNamespace(), Name: nm.GetName(), Manager: writer}, seen.At, from, to)
	}
}

// onDelete forgets a deleted object: its write counts (which an object
// recreated under its name must not extend), its writer and ownership
// state.
func (c *Collector) onDelete(kind string, m metav1.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tr.ForgetObject(kind, m.GetNamespace(), m.GetName())
	delete(c.writers, string(m.GetUID()))
	if ownershipKinds[kind] {
		c.tr.ForgetOwnership(string(m.GetUID()))
	}
	if kind == "Namespace" {
		// A deleted namespace's series go with it.
		ns := c.cfg.NamespaceLabelValue(m.GetName())
		for k := range c.updates {
			if k.namespace == ns && ns != config.NamespaceOther && ns != "" {
				delete(c.updates, k)
			}
		}
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{updatesDesc, hotDesc, flapsDesc, decodeErrorsDesc} {
		ch <- d
	}
}

// pruneEvery prunes the ownership state every period until ctx ends.
func (c *Collector) pruneEvery(ctx context.Context, period time.Duration) {
	if period <= 0 {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := c.now()
			c.mu.Lock()
			c.tr.PruneOwnership(now)
			for uid, w := range c.writers {
				if now.Sub(w.seen) > time.Duration(c.cfg.Churn.Window) {
					delete(c.writers, uid)
				}
			}
			c.mu.Unlock()
		}
	}
}

// Collect implements prometheus.Collector. It copies the values under the
// lock and builds and sends the metrics after releasing it, so that a slow
// scrape never holds the informers' handlers and hooks.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type hotSample struct {
		h     tracker.HotObject
		admit bool
	}
	c.mu.Lock()
	updates := make(map[updateKey]uint64, len(c.updates))
	for k, n := range c.updates {
		updates[k] = n
	}
	hot := c.tr.Hot(c.now())
	samples := make([]hotSample, len(hot))
	alive := make(map[string]bool, len(hot))
	for i, h := range hot {
		key := h.Kind + "/" + h.Namespace + "/" + h.Name + "/" + h.Manager
		alive[key] = true
		samples[i] = hotSample{h: h, admit: c.hotCap.Admit(i, key)}
	}
	c.hotCap.Retain(alive)
	flaps := make(map[tracker.FlapKey]uint64, len(c.tr.Flaps()))
	for k, n := range c.tr.Flaps() {
		flaps[k] = n
	}
	decodeErrors := c.decodeErrors
	c.mu.Unlock()

	// The counters carry created timestamps, as client_golang's own do
	// (collectors.CreatedTimes).
	created, done := c.created.Scrape(c.now())
	defer done()
	for k, n := range updates {
		gen := fmt.Sprint(k.generation)
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(updatesDesc, prometheus.CounterValue, float64(n),
			created("updates", k.kind, k.namespace, gen), k.kind, k.namespace, gen)
	}
	for _, s := range samples {
		if s.admit {
			emit(ch, hotDesc, prometheus.GaugeValue, float64(s.h.Writes), time.Time{}, s.h.Kind, s.h.Namespace, s.h.Name, s.h.Manager)
		}
	}
	for k, n := range flaps {
		emit(ch, flapsDesc, prometheus.CounterValue, float64(n), created("flaps", k.Kind, k.A, k.B), k.Kind, k.A, k.B)
	}
	ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(decodeErrorsDesc, prometheus.CounterValue, float64(decodeErrors), created("decode_errors"))
}

// emit sends a metric whose labels come from clients (field manager names
// are chosen by each client): one that is not a valid label value (not
// UTF-8) is left out instead of failing the scrape. A zero created time
// (gauges) sends none.
func emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, created time.Time, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if !created.IsZero() {
		m, err = prometheus.NewConstMetricWithCreatedTimestamp(d, t, v, created, labels...)
	}
	if err == nil {
		ch <- m
	}
}

// Families implements metric.Declared.
func (c *Collector) Families() []metric.Family {
	return []metric.Family{objectUpdates, hotObjectWrites, ownershipFlaps, ownershipDecodeErrors}
}
