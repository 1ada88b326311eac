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
		tr:     tracker.NewEndpointTracker(tracker.EndpointConfig{Thresholds: latency.EndpointBuckets}),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.Pods, informers.Services, informers.EndpointSlices}
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
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced, c.services.HasSynced, c.slices.HasSynced) {
			return
		}
		handlers := []struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandler
		}{
			{c.slices, cache.ResourceEventHandlerDetailedFuncs{
				AddFunc:    func(obj any, initial bool) { c.onSlice(obj, initial) },
				UpdateFunc: func(_, obj any) { c.onSlice(obj, false) },
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
				UpdateFunc: func(_, obj any) { c.onPod(obj, false) },
				DeleteFunc: c.onPodDelete,
			}},
		}
		for _, x := range handlers {
			if _, err := x.inf.AddEventHandler(f.Handler(Name, x.h)); err != nil {
				c.logger.Error("cannot attach handler", "err", err)
				return
			}
		}
		// Report threshold crossings every second.
		collectors.Tick(ctx, time.Second, c.now, func(now time.Time) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.observe(c.tr.Tick(now))
		})
	}()
	return nil
}

func (c *Collector) onPod(obj any, initial bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	rec := records.ServedPod(p, c.servicesSelecting(p))
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.ObservePod(rec, now, initial))
}

func (c *Collector) onPodDelete(obj any) {
	obj = informers.Unwrap(obj)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.DeletePod(string(p.UID), now))
}

func (c *Collector) onSlice(obj any, initial bool) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	rec := records.Slice(s)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.ObserveSlice(rec, now, initial))
}

func (c *Collector) onSliceDelete(obj any) {
	obj = informers.Unwrap(obj)
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.DeleteSlice(string(s.UID), now))
}

// onService re-observes the pods a Service selected before or selects now
// (old nil: created; cur nil: deleted): their set of Services changed without
// a pod update. Status-only updates change neither selector nor
// publishNotReadyAddresses and return at once.
func (c *Collector) onService(oldObj, curObj any) {
	oldObj = informers.Unwrap(oldObj)
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
				c.onPod(p, false)
				break
			}
		}
	}
}

// servicesSelecting returns the names of the Services of p's namespace that
// select it and publish it by readiness (records.PublishesByReadiness).
func (c *Collector) servicesSelecting(p *corev1.Pod) []string {
	var out []string
	for _, svc := range informers.ByIndex[*corev1.Service](c.services, cache.NamespaceIndex, p.Namespace) {
		if records.PublishesByReadiness(svc) && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
			out = append(out, svc.Name)
		}
	}
	return out
}
