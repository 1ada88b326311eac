package informers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// clusterScoped are the built-in resources without namespaces: one
// cluster-wide informer each, whatever --kube.namespaces says.
var clusterScoped = map[Resource]bool{Nodes: true, Namespaces: true,
	ValidatingWebhookConfigurations: true, MutatingWebhookConfigurations: true}

// namespacesInformer is one resource read through one informer per
// namespace (--kube.namespaces): the API server sends only these
// namespaces' objects, so the decode of the others is saved too, at the
// cost of one watch per namespace and resource. To the collectors it is
// one informer: handlers are added to every namespace's informer and
// called one at a time, as one informer calls them (a collector may
// assume that of one resource); the store reads all of them.
type namespacesInformer struct {
	namespaces []string
	infs       []cache.SharedIndexInformer // by namespace, in that order
}

var _ cache.SharedIndexInformer = (*namespacesInformer)(nil)

func (m *namespacesInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

func (m *namespacesInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

func (m *namespacesInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	s := &serialHandler{inner: h}
	reg := &namespacesRegistration{}
	for _, inf := range m.infs {
		r, err := inf.AddEventHandlerWithOptions(s, o)
		if err != nil {
			_ = m.RemoveEventHandler(reg)
			return nil, err
		}
		reg.regs = append(reg.regs, r)
	}
	return reg, nil
}

func (m *namespacesInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	reg, ok := r.(*namespacesRegistration)
	if !ok {
		return fmt.Errorf("informers: registration %T is not of this informer", r)
	}
	var errs []error
	for i, x := range reg.regs {
		errs = append(errs, m.infs[i].RemoveEventHandler(x))
	}
	return errors.Join(errs...)
}

func (m *namespacesInformer) GetStore() cache.Store     { return m.GetIndexer() }
func (m *namespacesInformer) GetIndexer() cache.Indexer { return namespacesIndexer{m} }

// GetController is nil: no caller of ours reads it, and there is no one
// controller.
func (m *namespacesInformer) GetController() cache.Controller { return nil }

func (m *namespacesInformer) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	m.RunWithContext(ctx)
}

func (m *namespacesInformer) RunWithContext(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range m.infs {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Wait()
}

func (m *namespacesInformer) HasSynced() bool {
	for _, inf := range m.infs {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (m *namespacesInformer) HasSyncedChecker() cache.DoneChecker {
	cs := make([]cache.DoneChecker, len(m.infs))
	for i, inf := range m.infs {
		cs[i] = inf.HasSyncedChecker()
	}
	return allDone(cs)
}

// LastSyncResourceVersion is "": each namespace's informer has its own.
func (m *namespacesInformer) LastSyncResourceVersion() string { return "" }

func (m *namespacesInformer) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandler(h) })
}

func (m *namespacesInformer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandlerWithContext(h) })
}

func (m *namespacesInformer) SetTransform(t cache.TransformFunc) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetTransform(t) })
}

func (m *namespacesInformer) AddIndexers(ix cache.Indexers) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.AddIndexers(ix) })
}

func (m *namespacesInformer) IsStopped() bool {
	for _, inf := range m.infs {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

func (m *namespacesInformer) each(fn func(cache.SharedIndexInformer) error) error {
	var errs []error
	for _, inf := range m.infs {
		errs = append(errs, fn(inf))
	}
	return errors.Join(errs...)
}

// namespacesRegistration is a handler's registration on every
// namespace's informer.
type namespacesRegistration struct {
	regs []cache.ResourceEventHandlerRegistration
}

func (r *namespacesRegistration) HasSynced() bool {
	for _, x := range r.regs {
		if !x.HasSynced() {
			return false
		}
	}
	return true
}

func (r *namespacesRegistration) HasSyncedChecker() cache.DoneChecker {
	cs := make([]cache.DoneChecker, len(r.regs))
	for i, x := range r.regs {
		cs[i] = x.HasSyncedChecker()
	}
	return allDone(cs)
}

// serialHandler calls inner one notification at a time.
type serialHandler struct {
	mu    sync.Mutex
	inner cache.ResourceEventHandler
}

func (s *serialHandler) OnAdd(obj any, initial bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inner.OnAdd(obj, initial)
}

func (s *serialHandler) OnUpdate(old, cur any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inner.OnUpdate(old, cur)
}

func (s *serialHandler) OnDelete(obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inner.OnDelete(obj)
}

// allDone is done when every checker is.
type doneAll struct {
	cs   []cache.DoneChecker
	once sync.Once
	done chan struct{}
}

func allDone(cs []cache.DoneChecker) cache.DoneChecker {
	return &doneAll{cs: cs, done: make(chan struct{})}
}

func (d *doneAll) Name() string { return fmt.Sprintf("%d namespaces", len(d.cs)) }

func (d *doneAll) Done() <-chan struct{} {
	d.once.Do(func() {
		go func() {
			for _, c := range d.cs {
				<-c.Done()
			}
			close(d.done)
		}()
	})
	return d.done
}

// namespacesIndexer reads the stores of every namespace's informer; the
// informers write them, so the write methods refuse.
type namespacesIndexer struct{ m *namespacesInformer }

var errReadOnly = errors.New("informers: the store of a per-namespace informer is read-only")

func (x namespacesIndexer) Add(any) error                        { return errReadOnly }
func (x namespacesIndexer) Update(any) error                     { return errReadOnly }
func (x namespacesIndexer) Delete(any) error                     { return errReadOnly }
func (x namespacesIndexer) Replace([]any, string) error          { return errReadOnly }
func (x namespacesIndexer) Resync() error                        { return nil }
func (x namespacesIndexer) LastStoreSyncResourceVersion() string { return "" }
func (x namespacesIndexer) Bookmark(string)                      {}

func (x namespacesIndexer) List() []any {
	var out []any
	for _, inf := range x.m.infs {
		out = append(out, inf.GetIndexer().List()...)
	}
	return out
}

func (x namespacesIndexer) ListKeys() []string {
	var out []string
	for _, inf := range x.m.infs {
		out = append(out, inf.GetIndexer().ListKeys()...)
	}
	return out
}

func (x namespacesIndexer) Get(obj any) (any, bool, error) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

// GetByKey asks the informer of the key's namespace.
func (x namespacesIndexer) GetByKey(key string) (any, bool, error) {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	if i := slices.Index(x.m.namespaces, ns); i >= 0 {
		return x.m.infs[i].GetIndexer().GetByKey(key)
	}
	return nil, false, nil
}

func (x namespacesIndexer) Index(name string, obj any) ([]any, error) {
	var out []any
	for _, inf := range x.m.infs {
		objs, err := inf.GetIndexer().Index(name, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func (x namespacesIndexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	for _, inf := range x.m.infs {
		keys, err := inf.GetIndexer().IndexKeys(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

func (x namespacesIndexer) ListIndexFuncValues(name string) []string {
	seen := map[string]bool{}
	var out []string
	for _, inf := range x.m.infs {
		for _, v := range inf.GetIndexer().ListIndexFuncValues(name) {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

func (x namespacesIndexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	for _, inf := range x.m.infs {
		objs, err := inf.GetIndexer().ByIndex(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func (x namespacesIndexer) GetIndexers() cache.Indexers {
	return x.m.infs[0].GetIndexer().GetIndexers()
}

func (x namespacesIndexer) AddIndexers(ix cache.Indexers) error { return x.m.AddIndexers(ix) }
