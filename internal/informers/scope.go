package informers

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Scope is the part of the cluster one exporter process reports on: its
// shard of the namespaces (--shard.index of --shard.total) less the
// excluded namespaces (--kube.namespaces-exclude). The zero Scope, like
// Scope{Total: 1}, is the whole cluster.
//
// A namespace belongs to shard ShardOf(namespace, total), so a workload,
// its pods, Services, EndpointSlices and Events land in one shard. Nodes,
// Namespaces and CRDs are read by every shard (the pods' node conditions,
// namespace deletion and webhook namespace selectors, the custom resources'
// lifecycle); the other cluster-scoped objects (webhook configurations,
// cluster-scoped custom resources) by shard 0 only, so that their series
// come from one process.
type Scope struct {
	Index, Total int
	// Include, when not empty, lists the only namespaces read: built-in
	// namespaced resources through one informer per namespace (Factory.
	// Informer), custom resources and anything else through the filter.
	Include []string
	// Exclude lists namespaces whose objects are dropped.
	Exclude []string
}

// ShardOf is the shard of a namespace among total: the FNV-1a hash of its
// name modulo total (hash/fnv New32a over the name's bytes).
func ShardOf(namespace string, total int) int {
	if total <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	return int(h.Sum32() % uint32(total))
}

// Validate checks a scope read from flags. The messages name the flags.
func (s Scope) Validate() error {
	var errs []error
	if s.Total < 1 {
		errs = append(errs, fmt.Errorf("--shard.total: must be at least 1, got %d (the number of exporter processes the namespaces are split among)", s.Total))
	}
	if s.Index < 0 {
		errs = append(errs, fmt.Errorf("--shard.index: must not be negative, got %d", s.Index))
	} else if s.Total >= 1 && s.Index >= s.Total {
		errs = append(errs, fmt.Errorf("--shard.index: must be below --shard.total=%d (shards are numbered from 0), got %d", s.Total, s.Index))
	}
	for _, ns := range s.Include {
		if slices.Contains(s.Exclude, ns) {
			errs = append(errs, fmt.Errorf("--kube.namespaces: %q is also in --kube.namespaces-exclude", ns))
		}
	}
	return errors.Join(errs...)
}

// Sharded reports whether the namespaces are split among several processes.
func (s Scope) Sharded() bool { return s.Total > 1 }

// ClusterScoped reports whether this process reports on cluster-scoped
// subjects (webhook configurations, admission probes, cluster-scoped
// custom resources): shard 0 only.
func (s Scope) ClusterScoped() bool { return s.Index == 0 }

// Keeps reports whether this process keeps the objects of namespace.
func (s Scope) Keeps(namespace string) bool {
	return ShardOf(namespace, s.Total) == s.Index && !slices.Contains(s.Exclude, namespace) &&
		(len(s.Include) == 0 || slices.Contains(s.Include, namespace))
}

// whole reports whether the scope keeps everything.
func (s Scope) whole() bool { return s.Total <= 1 && len(s.Exclude) == 0 && len(s.Include) == 0 }

// perNamespace returns the namespaces r is read from one informer each:
// Include less this shard's others and the excluded, for a built-in
// namespaced resource; nil: one cluster-wide informer.
func (s Scope) perNamespace(r Resource) []string {
	if len(s.Include) == 0 || clusterScoped[r] {
		return nil
	}
	var out []string
	for _, ns := range s.Include {
		if s.Keeps(ns) {
			out = append(out, ns)
		}
	}
	return out
}

// everyShard are the cluster-scoped resources every shard reads.
var everyShard = map[Resource]bool{
	unversioned(Nodes):                     true,
	unversioned(Namespaces):                true,
	unversioned(CustomResourceDefinitions): true,
}

// keeps reports whether the scope keeps obj of r.
func (s Scope) keeps(r Resource, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true // not an object: the watch seam counts it
	}
	if ns := m.GetNamespace(); ns != "" {
		return s.Keeps(ns)
	}
	return s.ClusterScoped() || everyShard[unversioned(r)]
}

// SetScope restricts every informer the factory creates from now on to s
// (call it before the collectors start).
func (f *Factory) SetScope(s Scope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Include, s.Exclude = slices.Clone(s.Include), slices.Clone(s.Exclude)
	f.scope = s
}

// Scope returns what SetScope set.
func (f *Factory) Scope() Scope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scope
}

// scoped returns lw restricted to the scope: every informer, built-in or
// custom, goes through it (Informer, dynamicInformer), before the list/watch
// instrumentation, so dropped objects are neither stamped, nor counted, nor
// cached. The filter sits on the list and watch results, not in the
// informer's transform: a client-go TransformFunc cannot drop an object
// (it must return one, and an error aborts the list or ends the watch,
// v0.37.2 the_real_fifo.go), and a stub left in the store would reach every
// handler and every index. Dropped objects are still sent by the API server
// and decoded: sharding saves memory and handler work, not decode (the same
// trade as kube-state-metrics' sharding, docs/sharding.md).
func scoped(s Scope, r Resource, lw cache.ListerWatcher) cache.ListerWatcher {
	if s.whole() {
		return lw
	}
	return &scopedLW{lw: lw, ctxLW: cache.ToListerWatcherWithContext(lw), keep: func(o runtime.Object) bool { return s.keeps(r, o) }}
}

// scopedLW filters the objects of one reflector's lists and watches.
type scopedLW struct {
	lw    cache.ListerWatcher
	ctxLW cache.ListerWatcherWithContext
	keep  func(runtime.Object) bool
}

var (
	_ cache.ListerWatcherWithContext = (*scopedLW)(nil)
	_ interface {
		IsWatchListSemanticsUnSupported() bool
	} = (*scopedLW)(nil)
)

// IsWatchListSemanticsUnSupported delegates the reflector's WatchList check.
func (l *scopedLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.lw)
}

func (l *scopedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.filterList(l.lw.List(opts)) //nolint:staticcheck // SA1019: cache.ListerWatcher's own method
}

func (l *scopedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.filterList(l.ctxLW.ListWithContext(ctx, opts))
}

func (l *scopedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.filterWatch(l.lw.Watch(opts)) //nolint:staticcheck // SA1019: see List
}

func (l *scopedLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return l.filterWatch(l.ctxLW.WatchWithContext(ctx, opts))
}

// filterList keeps the list's items in scope; the list's metadata
// (resource version, continue token) is unchanged.
func (l *scopedLW) filterList(obj runtime.Object, err error) (runtime.Object, error) {
	if err != nil || obj == nil {
		return obj, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, fmt.Errorf("informers: scope: %w", err)
	}
	kept := items[:0]
	for _, it := range items {
		if l.keep(it) {
			kept = append(kept, it)
		}
	}
	if len(kept) == len(items) {
		return obj, nil
	}
	if err := meta.SetList(obj, kept); err != nil {
		return nil, fmt.Errorf("informers: scope: %w", err)
	}
	return obj, nil
}

// filterWatch drops added, modified and deleted objects out of scope;
// bookmarks (the WatchList stream's initial-events-end included) and
// errors pass.
func (l *scopedLW) filterWatch(w watch.Interface, err error) (watch.Interface, error) {
	if err != nil || w == nil {
		return w, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			return ev, l.keep(ev.Object)
		}
		return ev, true
	}), nil
}
