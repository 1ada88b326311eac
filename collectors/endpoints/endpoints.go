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
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
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
	m := newMetrics(cfg)
	return &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		m:      m,
		tr:     tracker.NewEndpointTracker(tracker.EndpointConfig{Thresholds: m.propagation.Buckets()}),
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
// Services and slices have synced, so that a pod's selecting Services are
// read from a complete cache.
func (c *Collector) Start(_ context.Context, f *informers.Factory) error {
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
	// Slices, Services, then pods: in this order, each attached once all
	// three have synced.
	if _, err := informers.Watch(f, Name, informers.EndpointSlices, c.sliceHandlers(), informers.Services, informers.Pods); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	if _, err := informers.Watch(f, Name, informers.Services, c.serviceHandlers(), informers.EndpointSlices, informers.Pods); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	if _, err := informers.Watch(f, Name, informers.Pods, c.podHandlers(), informers.EndpointSlices, informers.Services); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	f.Every(Name, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.observe(c.tr.Tick(now))
	})
	return nil
}

func (c *Collector) podHandlers() informers.Handlers[informers.Pod] {
	return informers.Handlers[informers.Pod]{
		Changed: func(_, p *informers.Pod, seen informers.Seen) { c.observePod(p, seen) },
		Gone: func(p *informers.Pod, seen informers.Seen) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.observe(c.tr.DeletePod(string(p.UID), seen))
		},
		Now: c.now,
	}
}

func (c *Collector) sliceHandlers() informers.Handlers[discoveryv1.EndpointSlice] {
	return informers.Handlers[discoveryv1.EndpointSlice]{
		Changed: func(_, s *discoveryv1.EndpointSlice, seen informers.Seen) {
			rec := records.Slice(s)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.observe(c.tr.ObserveSlice(rec, seen))
		},
		Gone: func(s *discoveryv1.EndpointSlice, seen informers.Seen) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.observe(c.tr.DeleteSlice(string(s.UID), seen))
		},
		Now: c.now,
	}
}

func (c *Collector) serviceHandlers() informers.Handlers[corev1.Service] {
	return informers.Handlers[corev1.Service]{
		Changed: c.onService,
		Gone:    func(s *corev1.Service, seen informers.Seen) { c.onService(s, nil, seen) },
		// The pods' own initial replay reads the synced Services.
		Initial: func(*corev1.Service, informers.Seen) {},
		Now:     c.now,
	}
}

// observePod observes p at a receive time: its own, or that of the Service
// change that made it selected or not.
func (c *Collector) observePod(p *informers.Pod, seen informers.Seen) {
	rec := records.ServedPod(p, c.servicesSelecting(p))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.ObservePod(rec, seen))
}

// onService re-observes the pods a Service selected before or selects now
// (old nil: created; cur nil: deleted) at the Service event's receive time:
// their set of Services changed without a pod update. Status-only updates
// change neither selector, type nor publishNotReadyAddresses and return at
// once. A Service created or changed during a gap (listed) starts no
// propagation: when it began selecting is unknown.
func (c *Collector) onService(old, cur *corev1.Service, seen informers.Seen) {
	if old != nil && cur != nil && records.PublishesByReadiness(old) == records.PublishesByReadiness(cur) &&
		maps.Equal(old.Spec.Selector, cur.Spec.Selector) {
		return
	}
	var sels []map[string]string
	ns := ""
	for _, s := range []*corev1.Service{old, cur} {
		if s != nil && records.PublishesByReadiness(s) {
			sels = append(sels, s.Spec.Selector)
			ns = s.Namespace
		}
	}
	if len(sels) == 0 {
		return
	}
	for _, p := range informers.ByIndex[*informers.Pod](c.pods, cache.NamespaceIndex, ns) {
		for _, sel := range sels {
			if records.Selects(sel, p.Labels) {
				c.observePod(p, seen)
				break
			}
		}
	}
}

// servicesSelecting returns the names of the Services of p's namespace that
// select it and publish it by readiness (records.PublishesByReadiness: not
// ExternalName, not publishNotReadyAddresses).
func (c *Collector) servicesSelecting(p *informers.Pod) []string {
	var out []string
	for _, svc := range informers.ByIndex[*corev1.Service](c.services, cache.NamespaceIndex, p.Namespace) {
		if records.PublishesByReadiness(svc) && records.Selects(svc.Spec.Selector, p.Labels) {
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
