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
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Rollouts

// Collector times rollouts.
type Collector struct {
	cfg *config.Config
	now func() time.Time
	m   *metrics

	// mu guards tr (handlers of different informers run concurrently).
	// It is out's lock: the episode events and the evidence queued on out
	// under it reach the sinks and the timeline store when it is unlocked.
	mu  sync.Locker
	out *collectors.Outbox
	tr  *tracker.RolloutTracker

	view *view
	// selecting holds, per workload with an open episode, the Services
	// its last record found selecting its pods (guarded by mu): a slice
	// event re-evaluates only the episodes its Service is among (a
	// Service event, which can change what selects what, all of its
	// namespace's). Re-evaluating every open episode of the namespace on
	// each slice event cost 20 records per event at 20 Deployments per
	// namespace (BenchmarkChurnEvent/event=endpointslice).
	selecting map[string][]string
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
		selecting: map[string][]string{},
		cfg:       cfg,
		now:       now,
		m:         newMetrics(ep),
		tr: tracker.NewRolloutTracker(tracker.RolloutConfig{
			Thresholds: ep.Duration.Buckets(),
			StallAfter: func(k tracker.Kind) time.Duration { return cfg.StallThreshold(string(k), stall) },
		}),
	}
	c.out = collectors.NewOutbox(ep, logger.With("collector", Name))
	c.mu = c.out
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
// once the pods, replica sets, nodes, services and slices they read have
// synced, so the initial list is judged on complete facts.
func (c *Collector) Start(_ context.Context, f *informers.Factory) error {
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
	var errs []error
	watch := func(_ *informers.Watching, err error) { errs = append(errs, err) }
	watch(informers.Watch(f, Name, informers.Pods, factHandlers[informers.Pod](c, c.view.pods)))
	watch(informers.Watch(f, Name, informers.ReplicaSets, factHandlers[appsv1.ReplicaSet](c, c.view.replicaSets)))
	watch(informers.Watch(f, Name, informers.Services, factHandlers[corev1.Service](c, c.view.services)))
	watch(informers.Watch(f, Name, informers.EndpointSlices, factHandlers[discoveryv1.EndpointSlice](c, c.view.slices)))
	watch(informers.Watch(f, Name, informers.Nodes, c.nodeHandlers()))
	facts := []informers.Resource{informers.Pods, informers.ReplicaSets, informers.Nodes, informers.Services, informers.EndpointSlices}
	watch(informers.Watch(f, Name, informers.Deployments, workloadHandlers[appsv1.Deployment](c), facts...))
	watch(informers.Watch(f, Name, informers.StatefulSets, workloadHandlers[appsv1.StatefulSet](c), facts...))
	watch(informers.Watch(f, Name, informers.DaemonSets, workloadHandlers[appsv1.DaemonSet](c), facts...))
	errs = append(errs, collectors.OnNamespaceDeleted(f, Name, c.forgetNamespace))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rollouts: %w", err)
	}
	f.Every(Name, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.observe(c.tr.Tick(now))
	})
	return nil
}

// workloadHandlers observe the workloads of type T and end the tracking of
// deleted ones.
func workloadHandlers[T any](c *Collector) informers.Handlers[T] {
	return informers.Handlers[T]{
		Changed: func(old, cur *T, seen informers.Seen) { c.onWorkload(orNil(old), cur, seen) },
		Gone:    func(last *T, seen informers.Seen) { c.workloadGone(last, seen) },
		Now:     c.now,
	}
}

// factHandlers record the changes of pods, ReplicaSets, Services or
// EndpointSlices in the timelines, then re-evaluate the open episodes
// they may affect. A list's objects are not changes: not recorded.
//
// An object recreated under its name during a watch gap is Gone, then
// Changed: its episodes are re-evaluated once, after the new object's
// evidence is recorded (inf already holds the new object). Judged at the
// deletion, a rollout that the new pod completes closed before the pod's
// creation reached its timeline (the replayed pod-recreated-during-gap
// recording).
func factHandlers[T any](c *Collector, inf cache.SharedIndexInformer) informers.Handlers[T] {
	return informers.Handlers[T]{
		Changed: func(old, cur *T, seen informers.Seen) {
			c.timelineFact(orNil(old), cur, seen.At)
			c.onFact(cur, seen.At)
		},
		Gone: func(last *T, seen informers.Seen) {
			c.timelineGone(last, seen.At)
			if !replaced(inf, last) {
				c.onFact(last, seen.At)
			}
		},
		Initial: func(cur *T, seen informers.Seen) { c.onFact(cur, seen.At) },
		Now:     c.now,
	}
}

// replaced reports whether inf holds another object (another uid) under
// obj's key: obj was recreated under its name.
func replaced(inf cache.SharedIndexInformer, obj any) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	key, err := cache.MetaNamespaceKeyFunc(m)
	if err != nil {
		return false
	}
	cur, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return false
	}
	n, ok := cur.(metav1.Object)
	return ok && n.GetUID() != m.GetUID()
}

// nodeHandlers read node updates only. Node heartbeats (every 10 s per
// node from a kubelet) change nothing a rollout reads; only a readiness
// transition (node_not_ready) does, and the timelines record condition
// changes.
func (c *Collector) nodeHandlers() informers.Handlers[corev1.Node] {
	return informers.Handlers[corev1.Node]{
		Changed: func(o, n *corev1.Node, seen informers.Seen) {
			if o == nil {
				return // a node's arrival changes no workload's facts
			}
			c.onNodeTimeline(o, n, seen.At)
			if records.NodeReady(o) != records.NodeReady(n) {
				c.onFact(n, seen.At)
			}
		},
		Now: c.now,
	}
}

// orNil is p as an interface, nil (not a typed nil) when p is.
func orNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

// onWorkload observes a workload's record; old is its previous version
// (nil when added).
func (c *Collector) onWorkload(old, obj any, seen informers.Seen) {
	w, services, ok := c.view.record(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	evs := c.tr.Observe(w, seen)
	c.route(w.UID, services)
	c.observe(evs)
	c.timelineWorkload(old, obj, &w, evs, seen.At)
}

// workloadGone ends the tracking of a deleted workload.
func (c *Collector) workloadGone(obj any, seen informers.Seen) {
	m := objectMeta(obj)
	if m == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.Delete(string(m.UID), seen))
	delete(c.selecting, string(m.UID))
}

// route keeps the Services selecting uid's pods while its episode is
// open. c.mu is held.
func (c *Collector) route(uid string, services []string) {
	if c.tr.IsOpen(uid) {
		c.selecting[uid] = services
	} else {
		delete(c.selecting, uid)
	}
}

// onFact re-evaluates the open episodes a pod, replica set, node, service or
// slice change may affect, at its receipt (when the evidence arrived: a
// stage it completes is timed then, not when this handler got the lock).
// Settled workloads are not re-evaluated: nothing but a new generation
// opens an episode.
func (c *Collector) onFact(obj any, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var targets []tracker.Episode
	switch o := obj.(type) {
	case *informers.Pod:
		targets = c.openOf(c.view.workloadOf(o))
	case *appsv1.ReplicaSet:
		targets = c.openOf(ownerUID(o))
	case *corev1.Node:
		targets = c.tr.Open() // node readiness can affect any workload's stall reason
	case *discoveryv1.EndpointSlice:
		if svc := o.Labels[discoveryv1.LabelServiceName]; svc != "" {
			for _, ep := range c.tr.OpenIn(o.Namespace) {
				if slices.Contains(c.selecting[ep.UID], svc) {
					targets = append(targets, ep)
				}
			}
		}
	case interface{ GetNamespace() string }:
		targets = c.tr.OpenIn(o.GetNamespace())
	}
	for _, ep := range targets {
		// The store can be ahead of the workload handler: a newer generation
		// there is still queued for onWorkload, which delivers it in order.
		// Taking it here could show it already observed at first sight,
		// which the tracker reads as a missed write (a watch gap).
		if w, services, ok := c.view.lookup(ep.Kind, ep.Namespace, ep.Name); ok && w.UID == ep.UID && w.Generation == ep.Target {
			c.observe(c.tr.Observe(w, tracker.LiveAt(now)))
			c.route(w.UID, services)
			c.block(ep.UID, now)
		}
	}
}

// openOf returns the open episode of the workload uid, if any.
func (c *Collector) openOf(uid string) []tracker.Episode {
	if uid == "" {
		return nil
	}
	if ep, ok := c.tr.OpenOf(uid); ok {
		return []tracker.Episode{ep}
	}
	return nil
}
