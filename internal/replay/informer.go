package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// Informer is a cache.SharedIndexInformer whose notifications come from a
// recording instead of an API server. The harness delivers them one at a
// time, synchronously, and every handler has returned before the next one:
// what client-go does in order on one goroutine per handler, done here on
// the caller's, so that a replay is deterministic.
//
// What a handler sees follows client-go v0.37.2 with its default feature
// gates (InOrderInformers, AtomicFIFO: a list cycle is one ReplacedAll delta;
// tools/cache/controller.go processDeltas and processReplacedAllInfo,
// shared_informer.go):
//   - every object is transformed (SetTransform) before the store is
//     updated, tombstones excepted;
//   - a watch event for a key the store holds is an update, otherwise an
//     add (an "added" event included); a delete reaches the handlers even
//     when the store never held the key;
//   - a list cycle replaces the store first, then hands a tombstone
//     (cache.DeletedFinalStateUnknown with the cached copy) for every key
//     the list lacks, then an update for every listed key the store held
//     and an add for the others, in list order; isInInitialList is true
//     for the adds of the first cycle only;
//   - an update whose old and new objects have the same resourceVersion
//     (an unchanged object relisted) is distributed as a resync, which
//     reaches every handler: the shared informer marks a handler as
//     resyncing when it is added and only a resync check, which never runs
//     with resync off (the exporter's), clears it (shared_informer.go,
//     addListener, shouldResync). The watch seam drops them;
//   - a handler added to an informer that holds objects first receives
//     them as initial adds (client-go does once the informer runs; here
//     the store is empty before that anyway).
//
// Tombstones are handed in key order and the initial adds of a late handler
// too: client-go uses its store's map order for both, so any order is one
// client-go could have chosen, and a fixed one keeps goldens stable.
type Informer struct {
	resource informers.Resource
	example  any

	// deliver is held while a notification is delivered and while a
	// handler joins (client-go's blockDeltas): a late handler's initial
	// adds and the notifications around them never interleave.
	deliver sync.Mutex

	mu        sync.Mutex // guards the fields below
	indexer   cache.Indexer
	transform cache.TransformFunc
	handlers  []*registration
	populated bool // a notification or list arrived: HasSynced
	synced    chan struct{}
	lastRV    string // resourceVersion of the newest object delivered
	ctx       context.Context
	stopped   bool

	// anomaly, when set, hears of what a synthetic recording hands that
	// a client-go informer could not: a delete, a tombstone or an update
	// from an object its store never held. The notification is delivered
	// anyway; the collectors must take it.
	anomaly func(kind, key string)
}

// The anomalies an Informer reports.
const (
	AnomalyDelete    = "a delete of an object the informer never held"
	AnomalyTombstone = "a tombstone of an object the informer never held"
	AnomalyUpdate    = "an update from an object the informer never held"
)

func (i *Informer) report(kind string, obj any) {
	if i.anomaly == nil {
		return
	}
	key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	i.anomaly(kind, key)
}

// held says whether the store holds obj's key under obj's uid.
func (i *Informer) held(obj any) bool {
	cached, exists, err := i.indexer.Get(obj)
	if err != nil || !exists {
		return false
	}
	c, err1 := meta.Accessor(cached)
	o, err2 := meta.Accessor(obj)
	return err1 == nil && err2 == nil && c.GetUID() == o.GetUID()
}

var _ cache.SharedIndexInformer = (*Informer)(nil)

// NewInformer returns an empty informer of r whose objects are like example
// (a typed object, or *unstructured.Unstructured), indexed by indexers.
func NewInformer(r informers.Resource, example any, indexers cache.Indexers) *Informer {
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	return &Informer{
		resource: r,
		example:  example,
		indexer:  cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers),
		synced:   make(chan struct{}),
	}
}

// Resource is the resource the informer was made for.
func (i *Informer) Resource() informers.Resource { return i.resource }

// registration is one handler added to the informer.
type registration struct {
	i       *Informer
	handler cache.ResourceEventHandler
}

func (r *registration) HasSynced() bool                     { return r.i.HasSynced() }
func (r *registration) HasSyncedChecker() cache.DoneChecker { return r.i.HasSyncedChecker() }

// AddEventHandler implements cache.SharedInformer.
func (i *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer; the
// period is ignored (no resyncs in a replay, as in the exporter).
func (i *Informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithOptions implements cache.SharedInformer: the handler
// receives what the store holds as initial adds, in key order, before any
// further notification.
func (i *Informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	i.mu.Lock()
	if i.stopped {
		i.mu.Unlock()
		return nil, fmt.Errorf("replay: handler not added: the informer of %s has stopped", i.resource)
	}
	reg := &registration{i: i, handler: h}
	i.handlers = append(i.handlers, reg)
	i.mu.Unlock()
	for _, obj := range sortedByKey(i.indexer.List()) {
		h.OnAdd(obj, true)
	}
	return reg, nil
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *Informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	i.mu.Lock()
	defer i.mu.Unlock()
	for k, r := range i.handlers {
		if r == handle {
			i.handlers = slices.Delete(i.handlers, k, k+1)
			return nil
		}
	}
	return nil // client-go ignores an unknown registration too
}

// GetStore implements cache.SharedInformer.
func (i *Informer) GetStore() cache.Store { return i.indexer }

// GetIndexer implements cache.SharedIndexInformer.
func (i *Informer) GetIndexer() cache.Indexer { return i.indexer }

// AddIndexers implements cache.SharedIndexInformer.
func (i *Informer) AddIndexers(indexers cache.Indexers) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return errors.New("replay: indexer not added: the informer has stopped")
	}
	return i.indexer.AddIndexers(indexers)
}

// GetController implements cache.SharedInformer.
func (i *Informer) GetController() cache.Controller { return controller{i} }

// Run implements cache.SharedInformer: the harness delivers, so running
// only records the context that stops the informer.
func (i *Informer) Run(stopCh <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stopCh
		cancel()
	}()
	i.RunWithContext(ctx)
}

// RunWithContext implements cache.SharedInformer; see Run. It returns at
// once: the informer stops when ctx is done.
func (i *Informer) RunWithContext(ctx context.Context) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.ctx == nil {
		i.ctx = ctx
	}
}

// HasSynced implements cache.SharedInformer: true once a list cycle (or
// any notification: client-go's RealFIFO counts one as population too) has
// been delivered.
func (i *Informer) HasSynced() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.populated
}

// HasSyncedChecker implements cache.SharedInformer.
func (i *Informer) HasSyncedChecker() cache.DoneChecker { return doneChecker{i} }

// LastSyncResourceVersion implements cache.SharedInformer: the
// resourceVersion of the newest object delivered (opaque, as ever).
func (i *Informer) LastSyncResourceVersion() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.lastRV
}

// SetWatchErrorHandler implements cache.SharedInformer; a replay has no
// watch errors to report.
func (i *Informer) SetWatchErrorHandler(cache.WatchErrorHandler) error { return nil }

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (i *Informer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return nil
}

// SetTransform implements cache.SharedInformer. As client-go's, it fails
// once the informer delivered something.
func (i *Informer) SetTransform(t cache.TransformFunc) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.populated {
		return errors.New("replay: informer has already started")
	}
	i.transform = t
	return nil
}

// IsStopped implements cache.SharedInformer: the context it ran with is
// done.
func (i *Informer) IsStopped() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stoppedLocked()
}

func (i *Informer) stoppedLocked() bool {
	if !i.stopped && i.ctx != nil && i.ctx.Err() != nil {
		i.stopped = true
	}
	return i.stopped
}

type controller struct{ i *Informer }

func (controller) Run(<-chan struct{})                   {}
func (controller) RunWithContext(context.Context)        {}
func (c controller) HasSynced() bool                     { return c.i.HasSynced() }
func (c controller) HasSyncedChecker() cache.DoneChecker { return c.i.HasSyncedChecker() }
func (c controller) LastSyncResourceVersion() string     { return c.i.LastSyncResourceVersion() }

type doneChecker struct{ i *Informer }

func (d doneChecker) Name() string          { return "replay informer " + d.i.resource.String() }
func (d doneChecker) Done() <-chan struct{} { return d.i.synced }

// received is one object as the informer receives it: decoded from the
// recording, stamped as package listwatch stamps it.
type received struct {
	obj runtime.Object
	at  time.Time
}

// begin takes the delivery lock and returns the handlers to call, or false
// when the informer has stopped (its notifications go nowhere, as a
// stopped reflector's).
func (i *Informer) begin() ([]cache.ResourceEventHandler, bool) {
	i.deliver.Lock()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stoppedLocked() {
		i.deliver.Unlock()
		return nil, false
	}
	hs := make([]cache.ResourceEventHandler, len(i.handlers))
	for k, r := range i.handlers {
		hs[k] = r.handler
	}
	return hs, true
}

// end marks the informer populated and releases the delivery lock.
func (i *Informer) end(rv string) {
	i.mu.Lock()
	if !i.populated {
		i.populated = true
		close(i.synced)
	}
	if rv != "" {
		i.lastRV = rv
	}
	i.mu.Unlock()
	i.deliver.Unlock()
}

// stamp stamps obj as package listwatch would, then transforms it.
func (i *Informer) stamp(obj runtime.Object, at time.Time, listed bool) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("object without metadata: %w", err)
	}
	informers.Stamp(m, at, listed)
	i.mu.Lock()
	t := i.transform
	i.mu.Unlock()
	if t == nil {
		return obj, nil
	}
	return t(obj)
}

// event delivers one watch event (added, modified or deleted) received at
// at; live says whether listwatch took it for live (not the replay of a
// gap's backlog).
func (i *Informer) event(typ string, obj runtime.Object, at time.Time, live bool) error {
	hs, ok := i.begin()
	if !ok {
		return nil
	}
	defer i.end(resourceVersion(obj))
	cur, err := i.stamp(obj, at, !live)
	if err != nil {
		return err
	}
	if typ == typeDeleted {
		if !i.held(cur) {
			i.report(AnomalyDelete, cur)
		}
		if err := i.indexer.Delete(cur); err != nil {
			return err
		}
		for _, h := range hs {
			h.OnDelete(cur)
		}
		return nil
	}
	old, exists, err := i.indexer.Get(cur)
	if err != nil {
		return err
	}
	if exists {
		if err := i.indexer.Update(cur); err != nil {
			return err
		}
		notifyUpdate(hs, old, cur)
		return nil
	}
	if err := i.indexer.Add(cur); err != nil {
		return err
	}
	// RealFIFO.Add marks the queue populated before the event is popped:
	// an add from a watch event is never in the initial list.
	for _, h := range hs {
		h.OnAdd(cur, false)
	}
	return nil
}

// update delivers an update from an explicit old object, whatever the
// store held: what a broken informer could hand (synthetic recordings).
func (i *Informer) update(oldObj, obj runtime.Object, at time.Time, live bool) error {
	hs, ok := i.begin()
	if !ok {
		return nil
	}
	defer i.end(resourceVersion(obj))
	old, err := i.stamp(oldObj, at, !live)
	if err != nil {
		return err
	}
	cur, err := i.stamp(obj, at, !live)
	if err != nil {
		return err
	}
	if !i.held(old) {
		i.report(AnomalyUpdate, old)
	}
	if err := i.indexer.Update(cur); err != nil {
		return err
	}
	notifyUpdate(hs, old, cur)
	return nil
}

// tombstone delivers a cache.DeletedFinalStateUnknown for key carrying obj
// (nil: none, as client-go hands when its store lost the key), dropping the
// key from the store (synthetic recordings).
func (i *Informer) tombstone(key string, obj runtime.Object, at time.Time) error {
	hs, ok := i.begin()
	if !ok {
		return nil
	}
	defer i.end("")
	var last any
	if obj != nil {
		var err error
		if last, err = i.stamp(obj, at, true); err != nil {
			return err
		}
	}
	cached, exists, err := i.indexer.GetByKey(key)
	if err == nil && exists {
		if err := i.indexer.Delete(cached); err != nil {
			return err
		}
	}
	if !exists && i.anomaly != nil {
		i.anomaly(AnomalyTombstone, key)
	}
	for _, h := range hs {
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: last})
	}
	return nil
}

// list delivers a completed list cycle: the store is replaced, then the
// handlers get tombstones, updates and adds (see Informer).
func (i *Informer) list(items []received) error {
	hs, ok := i.begin()
	if !ok {
		return nil
	}
	rv := ""
	if len(items) > 0 {
		rv = resourceVersion(items[len(items)-1].obj)
	}
	defer i.end(rv)
	objs := make([]any, len(items))
	keys := make(map[string]bool, len(items))
	for k, it := range items {
		o, err := i.stamp(it.obj, it.at, true)
		if err != nil {
			return err
		}
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
		if err != nil {
			return err
		}
		objs[k], keys[key] = o, true
	}
	var gone []cache.DeletedFinalStateUnknown
	known := i.indexer.ListKeys()
	slices.Sort(known)
	for _, key := range known {
		if keys[key] {
			continue
		}
		last, _, _ := i.indexer.GetByKey(key)
		gone = append(gone, cache.DeletedFinalStateUnknown{Key: key, Obj: last})
	}
	olds := make([]any, len(objs))
	for k, o := range objs {
		if old, exists, err := i.indexer.Get(o); err == nil && exists {
			olds[k] = old
		}
	}
	if err := i.indexer.Replace(objs, rv); err != nil {
		return err
	}
	// isInInitialList: the queue was not populated before this cycle.
	i.mu.Lock()
	initial := !i.populated
	i.mu.Unlock()
	for _, t := range gone {
		for _, h := range hs {
			h.OnDelete(t)
		}
	}
	for k, o := range objs {
		if olds[k] != nil {
			notifyUpdate(hs, olds[k], o)
			continue
		}
		for _, h := range hs {
			h.OnAdd(o, initial)
		}
	}
	return nil
}

// notifyUpdate hands an update to every handler, a resync (the same
// resourceVersion) included: see Informer.
func notifyUpdate(hs []cache.ResourceEventHandler, old, cur any) {
	for _, h := range hs {
		h.OnUpdate(old, cur)
	}
}

func resourceVersion(obj runtime.Object) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// sortedByKey returns objs in the order of their store keys.
func sortedByKey(objs []any) []any {
	type keyed struct {
		key string
		obj any
	}
	ks := make([]keyed, 0, len(objs))
	for _, o := range objs {
		k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
		ks = append(ks, keyed{k, o})
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	out := make([]any, len(ks))
	for k, o := range ks {
		out[k] = o.obj
	}
	return out
}
