// Package rollouts is the collector of rollout convergence: for every spec
// write of a Deployment, StatefulSet or DaemonSet, how long until the
// controller observed it, the replicas were updated and available, and the
// new pods were ready endpoints of their Services; and, while it is not
// converged, since when and why. The logic is in package tracker; this
// package adapts informers to it and its events to metrics.
package rollouts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Rollouts

// Collector times rollouts.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	m      *metrics

	mu sync.Mutex // guards tr; handlers of different informers run concurrently
	tr *tracker.RolloutTracker

	view *view
	// tl receives the timeline evidence; nil: none is recorded.
	tl *timeline.Store
}

// New returns the rollouts collector with episode metrics of its own. stall
// is --stall.threshold; the config file may override it per kind.
func New(cfg *config.Config, stall time.Duration, logger *slog.Logger, now func() time.Time) *Collector {
	return NewWith(collectors.NewEpisodes(cfg, now), cfg, stall, logger, now)
}

// NewWith returns the rollouts collector feeding ep, the episode metrics it
// shares with other collectors (resources).
func NewWith(ep *collectors.Episodes, cfg *config.Config, stall time.Duration, logger *slog.Logger, now func() time.Time) *Collector {
	c := &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		m:      newMetrics(ep),
		tr: tracker.NewRolloutTracker(tracker.RolloutConfig{
			Thresholds: latency.RolloutDuration.Buckets,
			StallAfter: func(k tracker.Kind) time.Duration { return cfg.StallThreshold(string(k), stall) },
		}),
	}
	ep.Feed(c)
	return c
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: the workloads, and what their
// stall reasons and endpoints stage read.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{
		informers.Deployments, informers.StatefulSets, informers.DaemonSets, informers.ReplicaSets,
		informers.Pods, informers.Nodes, informers.Services, informers.EndpointSlices, informers.Namespaces,
	}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	return c.m.register(reg)
}

// Start implements collectors.Collector. Workload handlers are attached only
// once the pods, replica sets, services and slices they read have synced, so
// the initial list is judged on complete facts (adding a handler to a running
// informer replays its cache as the initial list).
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	get := func(r informers.Resource) cache.SharedIndexInformer {
		inf, err := f.Informer(r)
		if err != nil {
			panic(err) // every resource of Resources() is known to the factory
		}
		return inf
	}
	c.view = &view{
		pods: get(informers.Pods), replicaSets: get(informers.ReplicaSets), nodes: get(informers.Nodes),
		services: get(informers.Services), slices: get(informers.EndpointSlices),
		deployments: get(informers.Deployments), statefulSets: get(informers.StatefulSets), daemonSets: get(informers.DaemonSets),
	}
	facts := []cache.SharedIndexInformer{c.view.pods, c.view.replicaSets, c.view.nodes, c.view.services, c.view.slices}
	for _, inf := range []cache.SharedIndexInformer{c.view.pods, c.view.replicaSets, c.view.services, c.view.slices} {
		if _, err := inf.AddEventHandler(f.Handler(Name, cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial { // a list's objects are not changes
					c.timelineFact(nil, obj)
				}
				c.onFact(obj)
			},
			UpdateFunc: func(oldObj, obj any) { c.timelineFact(oldObj, obj); c.onFact(obj) },
			DeleteFunc: func(obj any) { c.timelineGone(obj); c.onFact(obj) },
		})); err != nil {
			return fmt.Errorf("rollouts: add handler: %w", err)
		}
	}
	// Node heartbeats (every 10 s per node from a kubelet) change nothing a
	// rollout reads; only a readiness transition (node_not_ready) does, and
	// the timelines record condition changes.
	if _, err := c.view.nodes.AddEventHandler(f.Handler(Name, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 {
				return
			}
			c.onNodeTimeline(o, n)
			if records.NodeReady(o) != records.NodeReady(n) {
				c.onFact(obj)
			}
		},
	})); err != nil {
		return fmt.Errorf("rollouts: add handler: %w", err)
	}
	if err := collectors.OnNamespaceDeleted(f, Name, c.forgetNamespace); err != nil {
		return fmt.Errorf("rollouts: %w", err)
	}
	collectors.AfterSync(ctx, c.logger, facts, func() error {
		var errs []error
		for _, inf := range []cache.SharedIndexInformer{c.view.deployments, c.view.statefulSets, c.view.daemonSets} {
			if _, err := inf.AddEventHandler(f.Handler(Name, cache.ResourceEventHandlerDetailedFuncs{
				AddFunc:    func(obj any, initial bool) { c.onWorkload(nil, obj, initial) },
				UpdateFunc: c.onWorkloadUpdate,
				DeleteFunc: c.onWorkloadDelete,
			})); err != nil {
				errs = append(errs, fmt.Errorf("watch workloads: %w", err))
			}
		}
		return errors.Join(errs...)
	}, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.observe(c.tr.Tick(now))
	})
	return nil
}

// onWorkload observes a workload's record; old is its previous version
// (nil when added).
func (c *Collector) onWorkload(old, obj any, initial bool) {
	w, ok := c.view.record(obj)
	if !ok {
		return
	}
	now, notLive := informers.NotLive(obj, initial, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	evs := c.tr.Observe(w, tracker.Seen{At: now, Live: !notLive})
	c.observe(evs)
	c.timelineWorkload(old, obj, &w, evs, now)
}

// onWorkloadUpdate observes a workload's new version. A workload deleted
// and recreated under its name while the watch was down reaches it as an
// update at the relist (same cache key, another uid): the old object is
// deleted first, or its episode would stay open, and stalled, forever.
func (c *Collector) onWorkloadUpdate(oldObj, obj any) {
	if informers.Recreated(oldObj, obj) {
		c.workloadGone(oldObj, informers.DeletedAt(obj, c.now))
		oldObj = nil
	}
	c.onWorkload(oldObj, obj, false)
}

func (c *Collector) onWorkloadDelete(obj any) {
	c.workloadGone(informers.Unwrap(obj), informers.DeletedAt(obj, c.now))
}

// workloadGone ends the tracking of a deleted workload, at now.
func (c *Collector) workloadGone(obj any, now time.Time) {
	uid := ""
	switch o := obj.(type) {
	case *appsv1.Deployment:
		uid = string(o.UID)
	case *appsv1.StatefulSet:
		uid = string(o.UID)
	case *appsv1.DaemonSet:
		uid = string(o.UID)
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.Delete(uid, tracker.Seen{At: now}))
}

// onFact re-evaluates the open episodes a pod, replica set, node, service or
// slice change may affect. Settled workloads are not re-evaluated: nothing
// but a new generation opens an episode.
func (c *Collector) onFact(obj any) {
	obj = informers.Unwrap(obj)
	// The fact's receipt is when the evidence arrived: a stage it completes
	// is timed then, not when this handler got the lock.
	now, _ := informers.ReceivedOr(obj, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	var targets []tracker.Episode
	switch o := obj.(type) {
	case *corev1.Pod:
		if uid := c.view.workloadOf(o); uid != "" && c.tr.IsOpen(uid) {
			targets = c.openIn(o.Namespace, uid)
		}
	case *appsv1.ReplicaSet:
		targets = c.openIn(o.Namespace, ownerUID(o))
	case *corev1.Node:
		targets = c.openIn("", "") // node readiness can affect any workload's stall reason
	case interface{ GetNamespace() string }:
		targets = c.openIn(o.GetNamespace(), "")
	}
	for _, ep := range targets {
		// The store can be ahead of the workload handler: a newer generation
		// there is still queued for onWorkload, which delivers it in order.
		// Taking it here could show it already observed at first sight,
		// which the tracker reads as a missed write (a watch gap).
		if w, ok := c.view.lookup(ep.Kind, ep.Namespace, ep.Name); ok && w.UID == ep.UID && w.Generation == ep.Target {
			c.observe(c.tr.Observe(w, tracker.LiveAt(now)))
			c.block(ep.UID, now)
		}
	}
}

// openIn returns open episodes, filtered by namespace and uid when given.
func (c *Collector) openIn(namespace, uid string) []tracker.Episode {
	var out []tracker.Episode
	for _, ep := range c.tr.Open() {
		if (namespace == "" || ep.Namespace == namespace) && (uid == "" || ep.UID == uid) {
			out = append(out, ep)
		}
	}
	return out
}
