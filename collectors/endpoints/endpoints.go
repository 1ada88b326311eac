// Package endpoints is the collector of endpoint propagation: for each pod
// that turns Ready, how long until it is a ready endpoint in an EndpointSlice
// of each Service that selects it (traffic can flow); for each pod that stops
// being Ready or starts terminating, how long it stays one (traffic still
// sent to it); and the EndpointSlice controller's trigger lag estimated from
// its last-change-trigger-time annotation. The logic is in package tracker
// (propagation.go); this package adapts informers to it and its events to
// metrics.
package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Endpoints

// Collector times endpoint propagation and removal.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	m      *metrics

	mu sync.Mutex // guards tr; pod, service and slice handlers run concurrently
	tr *tracker.EndpointTracker

	pods, services, slices cache.SharedIndexInformer
}

// New returns the endpoints collector.
func New(cfg *config.Config, logger *slog.Logger, now func() time.Time) *Collector {
	return &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		m:      newMetrics(),
		tr:     tracker.NewEndpointTracker(tracker.EndpointConfig{Thresholds: latency.EndpointPropagation.Buckets}),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.Pods, informers.Services, informers.EndpointSlices, informers.Namespaces}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error { return c.m.register(reg) }

// Start implements collectors.Collector. Handlers are attached once pods,
// Services and slices have synced: the initial lists are then replayed as
// such, and a pod's selecting Services are read from a complete cache.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	for _, x := range []struct {
		inf *cache.SharedIndexInformer
		r   informers.Resource
	}{{&c.pods, informers.Pods}, {&c.services, informers.Services}, {&c.slices, informers.EndpointSlices}} {
		inf, err := f.Informer(x.r)
		if err != nil {
			return fmt.Errorf("endpoints: %w", err)
		}
		*x.inf = inf
	}
	if err := collectors.OnNamespaceDeleted(f, Name, c.onNamespaceDeleted); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	collectors.AfterSync(ctx, c.logger, []cache.SharedIndexInformer{c.pods, c.services, c.slices}, func() error {
		handlers := []struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandler
		}{
			{c.slices, cache.ResourceEventHandlerDetailedFuncs{
				AddFunc:    func(obj any, initial bool) { c.onSlice(obj, initial) },
				UpdateFunc: c.onSliceUpdate,
				DeleteFunc: c.onSliceDelete,
			}},
			{c.services, cache.ResourceEventHandlerDetailedFuncs{
				AddFunc: func(obj any, initial bool) {
					if !initial { // the pods' own initial replay reads the synced Services
						c.onService(nil, obj)
					}
				},
				UpdateFunc: c.onService,
				DeleteFunc: func(obj any) { c.onService(obj, nil) },
			}},
			{c.pods, cache.ResourceEventHandlerDetailedFuncs{
				AddFunc:    func(obj any, initial bool) { c.onPod(obj, initial) },
				UpdateFunc: c.onPodUpdate,
				DeleteFunc: c.onPodDelete,
			}},
		}
		for _, x := range handlers {
			if _, err := x.inf.AddEventHandler(f.Handler(Name, x.h)); err != nil {
				return fmt.Errorf("attach handler: %w", err)
			}
		}
		return nil
	}, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.observe(c.tr.Tick(now))
	})
	return nil
}

// deleted unwraps a delete notification: the object, its receive time, and
// whether the deletion was seen live (a tombstone was learned from a list
// cycle, at an unknown time in a gap).
func (c *Collector) deleted(obj any) (any, time.Time, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj, c.now(), false
	}
	at, listed := informers.ReceivedOr(obj, c.now)
	return obj, at, !listed
}

func (c *Collector) onPod(obj any, initial bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	at, notLive := informers.NotLive(p, initial, c.now)
	c.observePod(p, at, notLive)
}

// onPodUpdate observes a pod's new version. A pod deleted and recreated
// under its name during a watch gap (informers.Recreated) is deleted first,
// as a deletion learned from the relist; otherwise the old uid's pairs stay,
// a pending propagation crossing every threshold, forever.
func (c *Collector) onPodUpdate(oldObj, obj any) {
	if old, ok := oldObj.(*corev1.Pod); ok && informers.Recreated(old, obj) {
		c.mu.Lock()
		c.observe(c.tr.DeletePod(string(old.UID), informers.DeletedAt(obj, c.now), false))
		c.mu.Unlock()
	}
	c.onPod(obj, false)
}

// observePod observes p at a receive time: its own, or that of the Service
// change that made it selected or not.
func (c *Collector) observePod(p *corev1.Pod, at time.Time, notLive bool) {
	rec := records.ServedPod(p, c.servicesSelecting(p))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.ObservePod(rec, at, notLive))
}

func (c *Collector) onPodDelete(obj any) {
	obj, at, live := c.deleted(obj)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.DeletePod(string(p.UID), at, live))
}

func (c *Collector) onSlice(obj any, initial bool) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	rec := records.Slice(s)
	at, notLive := informers.NotLive(s, initial, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.ObserveSlice(rec, at, notLive))
}

// onSliceUpdate observes a slice's new version. A slice deleted and
// recreated under its name during a watch gap (informers.Recreated) is
// deleted first, as a deletion learned from the relist; otherwise the old
// uid's ready endpoints stay published, forever.
func (c *Collector) onSliceUpdate(oldObj, obj any) {
	if old, ok := oldObj.(*discoveryv1.EndpointSlice); ok && informers.Recreated(old, obj) {
		c.mu.Lock()
		c.observe(c.tr.DeleteSlice(string(old.UID), informers.DeletedAt(obj, c.now), false))
		c.mu.Unlock()
	}
	c.onSlice(obj, false)
}

func (c *Collector) onSliceDelete(obj any) {
	obj, at, live := c.deleted(obj)
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.DeleteSlice(string(s.UID), at, live))
}

// onService re-observes the pods a Service selected before or selects now
// (old nil: created; cur nil: deleted) at the Service event's receive time:
// their set of Services changed without a pod update. Status-only updates
// change neither selector, type nor publishNotReadyAddresses and return at
// once. A Service created or changed during a gap (listed) starts no
// propagation: when it began selecting is unknown.
func (c *Collector) onService(oldObj, curObj any) {
	var (
		at   time.Time
		live bool
	)
	if curObj != nil {
		var listed bool
		at, listed = informers.ReceivedOr(curObj, c.now)
		live = !listed
	} else {
		oldObj, at, live = c.deleted(oldObj)
	}
	old, _ := oldObj.(*corev1.Service)
	cur, _ := curObj.(*corev1.Service)
	if old == nil && cur == nil {
		return
	}
	if old != nil && cur != nil && records.PublishesByReadiness(old) == records.PublishesByReadiness(cur) &&
		maps.Equal(old.Spec.Selector, cur.Spec.Selector) {
		return
	}
	var sels []labels.Selector
	ns := ""
	for _, s := range []*corev1.Service{old, cur} {
		if s != nil && records.PublishesByReadiness(s) {
			sels = append(sels, labels.SelectorFromSet(s.Spec.Selector))
			ns = s.Namespace
		}
	}
	if len(sels) == 0 {
		return
	}
	for _, p := range informers.ByIndex[*corev1.Pod](c.pods, cache.NamespaceIndex, ns) {
		for _, sel := range sels {
			if sel.Matches(labels.Set(p.Labels)) {
				c.observePod(p, at, !live)
				break
			}
		}
	}
}

// servicesSelecting returns the names of the Services of p's namespace that
// select it and publish it by readiness (records.PublishesByReadiness: not
// ExternalName, not publishNotReadyAddresses).
func (c *Collector) servicesSelecting(p *corev1.Pod) []string {
	var out []string
	for _, svc := range informers.ByIndex[*corev1.Service](c.services, cache.NamespaceIndex, p.Namespace) {
		if records.PublishesByReadiness(svc) && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
			out = append(out, svc.Name)
		}
	}
	return out
}

// onNamespaceDeleted deletes the series of a deleted namespace; a namespace
// folded into another label value keeps them (shared).
func (c *Collector) onNamespaceDeleted(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if label := c.cfg.NamespaceLabelValue(ns); label == ns {
		c.m.deleteNamespace(label)
	}
}
