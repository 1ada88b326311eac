// Package pods is the collector of pod startup: for every pod created while
// the exporter watches, the time from its creation to each startup condition
// (scheduled, ready_to_start_containers, initialized, containers_ready,
// ready) and the intervals between them; stuck pods counted against the
// startup SLI while they are stuck; and, for every pod, whether and why it is
// not ready. The logic is in package tracker (podstartup.go); this package
// adapts informers to it and its events to metrics.
package pods

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Pods

// Collector times pod startups.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	m      *metrics

	mu     sync.Mutex // guards tr and seenNS; pod and node handlers run concurrently
	tr     *tracker.PodTracker
	seenNS map[string]bool // namespace label values seen, for zero-initialised reasons

	pods, nodes cache.SharedIndexInformer
}

// New returns the pods collector. stall is --stall.threshold; the config
// file may override it for kind Pod.
func New(cfg *config.Config, stall time.Duration, logger *slog.Logger, now func() time.Time) *Collector {
	m := newMetrics(cfg)
	return &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		m:      m,
		tr: tracker.NewPodTracker(tracker.PodStartupConfig{
			Thresholds: m.startup.Buckets(),
			StallAfter: cfg.StallThreshold("Pod", stall),
		}),
		seenNS: map[string]bool{},
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: pods, nodes for the
// node_not_ready reason, namespaces to delete a deleted namespace's series.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.Pods, informers.Nodes, informers.Namespaces}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	if err := c.m.register(reg); err != nil {
		return err
	}
	return reg.Register(scrape{c})
}

// indexNode indexes pods by spec.nodeName, for onNode.
const indexNode = "pods-node"

// Start implements collectors.Collector. Handlers are attached once pods and
// nodes have synced, so that every pod of the initial list is classified
// with its node known.
func (c *Collector) Start(_ context.Context, f *informers.Factory) error {
	var err error
	if c.pods, err = f.Informer(informers.Pods); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	if c.nodes, err = f.Informer(informers.Nodes); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	if err := c.pods.AddIndexers(cache.Indexers{indexNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*informers.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("pods: index by node: %w", err)
	}
	if err := collectors.OnNamespaceDeleted(f, Name, c.onNamespaceDeleted); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	if _, err := informers.Watch(f, Name, informers.Pods, c.podHandlers(), informers.Nodes); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	if _, err := informers.Watch(f, Name, informers.Nodes, informers.Handlers[corev1.Node]{
		Changed: c.onNode,
		Now:     c.now,
	}, informers.Pods); err != nil {
		return fmt.Errorf("pods: %w", err)
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
		Gone:    c.onPodGone,
		Now:     c.now,
	}
}

func (c *Collector) observePod(p *informers.Pod, seen informers.Seen) {
	rec := records.Pod(p, c.nodeReady)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ns := c.cfg.NamespaceLabelValue(p.Namespace); !c.seenNS[ns] {
		c.seenNS[ns] = true
		c.m.recovered.WithLabelValues(ns) // at zero, so rate() sees its first increment
	}
	c.observe(c.tr.Observe(rec, seen))
}

func (c *Collector) onPodGone(p *informers.Pod, seen informers.Seen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(c.tr.Delete(string(p.UID), seen))
}

// onNode re-classifies the pods of a node whose readiness changed: their
// node_not_ready reason changes without a pod update. Heartbeats, which make
// up most node updates (every 20-45 s per node with kwok, 10 s with a
// kubelet), change nothing and return at once; a transition visits the
// node's pods only, through the node index.
func (c *Collector) onNode(o, n *corev1.Node, _ informers.Seen) {
	if o == nil || records.NodeReady(o) == records.NodeReady(n) {
		return
	}
	// Each pod is observed with its own receive time and list mark: only
	// its reason changes, unless its own handler has not run yet for its
	// newest copy, which is then timed as that handler would time it.
	for _, p := range informers.ByIndex[*informers.Pod](c.pods, indexNode, n.Name) {
		c.observePod(p, informers.SeenOf(p, c.now))
	}
}

func (c *Collector) nodeReady(name string) bool {
	obj, ok, err := c.nodes.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return true // no evidence against an unknown node
	}
	n, ok := obj.(*corev1.Node)
	return !ok || records.NodeReady(n)
}

// onNamespaceDeleted deletes the series of a deleted namespace, so that
// cardinality follows the namespaces that exist. A namespace folded into
// another label value (namespace label configuration) keeps its series:
// other namespaces share them.
func (c *Collector) onNamespaceDeleted(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	label := c.cfg.NamespaceLabelValue(ns)
	if label != ns {
		return
	}
	c.m.deleteNamespace(label)
	delete(c.seenNS, label)
}
