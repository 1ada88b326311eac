package informers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Seen says when a notification was received and whether it was live; see
// tracker.Seen, whose meaning it carries to every collector.
type Seen = tracker.Seen

// Handlers are what a collector does with the notifications of one
// resource. Both are optional.
//
// Changed receives an object added (old is nil) or updated; Gone an object
// deleted, with the last version the informer held. The seam has already
// decided, once for every collector:
//   - the type: an object that is not a *T is counted in
//     kube_convergence_informer_unexpected_objects_total and logged once,
//     never handed on;
//   - tombstones: a deletion learned from a relist (the informer's
//     cache.DeletedFinalStateUnknown) reaches Gone unwrapped, dated by the
//     relist (it carries the last cached copy, received maybe hours before
//     the deletion) and not live;
//   - resync no-ops: an update whose old and new objects are the same
//     version of the same object is dropped;
//   - recreation: an object deleted and recreated under its name while the
//     watch was down reaches the informer as an update with another uid at
//     the relist (client-go v0.37.2 tools/cache/controller.go,
//     processDeltas: a listed object whose key the cache holds goes to
//     OnUpdate(cached, listed)). It is delivered as Gone(old) dated by the
//     relist, then Changed(nil, new);
//   - Seen: the receive time that package listwatch stamped on the object
//     (Now for an unstamped one), live unless a list cycle or the replay of
//     a late-attached handler delivered it.
type Handlers[T any] struct {
	Changed func(old, cur *T, seen Seen)
	Gone    func(last *T, seen Seen)
	// Initial, when set, receives the objects of the initial list (the
	// informer's replay of its synced cache as the handler attaches)
	// instead of Changed: a collector that reads them from the cache when
	// it needs them, or keeps no history of them, says so here.
	Initial func(cur *T, seen Seen)
	// Now is the collector's clock: the time of a tombstone and of an
	// object nobody stamped (an informer without package listwatch under
	// it, as in unit tests). nil: time.Now.
	Now func() time.Time
}

// Watching is one collector's attachment to one informer, made by Watch.
type Watching struct {
	f         *Factory
	collector string
	resource  Resource
	inf       cache.SharedIndexInformer
	deps      []cache.SharedIndexInformer // synced before attaching, inf first
	handler   *handler
	reg       cache.ResourceEventHandlerRegistration

	mu       sync.Mutex
	attached bool
	stopped  bool
}

// Watch attaches h, for collector, to the shared informer of r once r and
// every resource in facts have synced, so that the initial list is judged
// on complete facts (adding a handler to a synced informer replays its
// cache as the initial list, not live). It returns at once.
func Watch[T any](f *Factory, collector string, r Resource, h Handlers[T], facts ...Resource) (*Watching, error) {
	if want := cachedType(r); want != nil && want != reflect.TypeFor[*T]() {
		// Every notification would be dropped as unexpected: say so at start.
		return nil, fmt.Errorf("%s: handlers of %v for %s, whose cache holds %v", collector, reflect.TypeFor[*T](), r, want)
	}
	inf, err := f.Informer(r)
	if err != nil {
		return nil, err
	}
	deps := make([]cache.SharedIndexInformer, 0, len(facts))
	for _, fr := range facts {
		fi, err := f.Informer(fr)
		if err != nil {
			return nil, err
		}
		deps = append(deps, fi)
	}
	return WatchInformer(f, collector, r, inf, h, deps...), nil
}

// WatchInformer is Watch on an informer the caller made and runs (a custom
// resource's, from Dynamic), waiting for facts to sync as well.
func WatchInformer[T any](f *Factory, collector string, r Resource, inf cache.SharedIndexInformer, h Handlers[T], facts ...cache.SharedIndexInformer) *Watching {
	if h.Now == nil {
		h.Now = time.Now
	}
	a := &adapter[T]{h: h, unexpected: f.unexpected.WithLabelValues(collector, r.String()), logger: f.logger, collector: collector, resource: r}
	w := &Watching{
		f: f, collector: collector, resource: r, inf: inf,
		deps:    append([]cache.SharedIndexInformer{inf}, facts...),
		handler: f.newHandler(collector, a),
	}
	f.attach(w)
	return w
}

// synced reports whether every informer w waits for has synced.
func (w *Watching) synced() bool {
	for _, d := range w.deps {
		if !d.HasSynced() {
			return false
		}
	}
	return true
}

// tryAttach adds w's handler to its informer, once.
func (w *Watching) tryAttach() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.attached || w.stopped {
		return nil
	}
	reg, err := w.inf.AddEventHandler(w.handler)
	if err != nil {
		return fmt.Errorf("%s: watch %s: %w", w.collector, w.resource, err)
	}
	w.reg, w.attached = reg, true
	w.f.track(w.handler)
	return nil
}

func (w *Watching) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// Attached reports whether the handler is attached (its facts synced).
func (w *Watching) Attached() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attached
}

// Synced reports whether the handler is attached and has finished with
// the initial list the informer replayed to it.
func (w *Watching) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attached && w.reg.HasSynced()
}

// Shutdown is Stop, then waits until the handler has returned from the
// call in progress, if any: once it returns, no notification reaches the
// handler again. Never from within the handler (it would wait for itself).
func (w *Watching) Shutdown() {
	w.Stop()
	w.mu.Lock()
	reg := w.reg
	w.mu.Unlock()
	if s, ok := reg.(interface{ ShutdownChan() <-chan struct{} }); ok {
		<-s.ShutdownChan()
	}
}

// Stop detaches the handler (its informer is stopping: a custom resource
// whose CRD went) and stops watching its liveness. Safe to call twice, and
// before it attached.
func (w *Watching) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	if w.attached {
		_ = w.inf.RemoveEventHandler(w.reg) // only fails for a foreign registration
		w.f.forget(w.handler)
	}
}

// SeenOf returns how obj, a cached object the collector reads again outside
// its own notification (a pod re-judged because its node changed), was
// received: its receipt and whether a list cycle delivered it.
func SeenOf(obj any, now func() time.Time) Seen {
	at, listed := ReceivedOr(obj, now)
	return Seen{At: at, Live: !listed}
}

// identity is what the seam reads of every object: built-in types have it
// through their ObjectMeta, compacted records implement it.
type identity interface {
	GetUID() types.UID
	GetResourceVersion() string
}

// adapter turns one informer's untyped notifications into h's.
type adapter[T any] struct {
	h          Handlers[T]
	unexpected prometheus.Counter
	logger     *slog.Logger
	collector  string
	resource   Resource
	once       sync.Once
}

// typed returns obj as a *T, counting and logging (once) anything else.
func (a *adapter[T]) typed(obj any) (*T, bool) {
	if t, ok := obj.(*T); ok && t != nil {
		return t, true
	}
	a.unexpected.Inc()
	a.once.Do(func() {
		a.logger.Warn("informer delivered an object of an unexpected type; it is counted and ignored",
			"collector", a.collector, "resource", a.resource.String(),
			"type", fmt.Sprintf("%T", obj), "want", reflect.TypeFor[*T]().String())
	})
	return nil, false
}

// OnAdd implements cache.ResourceEventHandler.
func (a *adapter[T]) OnAdd(obj any, initial bool) {
	cur, ok := a.typed(obj)
	if !ok {
		return
	}
	s := SeenOf(obj, a.h.Now)
	s.Live = s.Live && !initial
	switch {
	case initial && a.h.Initial != nil:
		a.h.Initial(cur, s)
	case a.h.Changed != nil:
		a.h.Changed(nil, cur, s)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (a *adapter[T]) OnUpdate(oldObj, newObj any) {
	cur, ok := a.typed(newObj)
	if !ok {
		return
	}
	old, ok := a.typed(oldObj)
	if !ok {
		old = nil // judged as a first sight
	}
	var oi, ni identity
	if old != nil {
		oi, _ = any(old).(identity)
		ni, _ = any(cur).(identity)
	}
	if oi != nil && ni != nil && oi.GetUID() == ni.GetUID() && oi.GetResourceVersion() == ni.GetResourceVersion() && ni.GetResourceVersion() != "" {
		return // a resync, or a relist that found the object unchanged
	}
	s := SeenOf(newObj, a.h.Now)
	if oi != nil && ni != nil && oi.GetUID() != ni.GetUID() {
		if a.h.Gone != nil {
			a.h.Gone(old, Seen{At: s.At}) // learned from the relist that found the new one
		}
		old = nil
	}
	if a.h.Changed != nil {
		a.h.Changed(old, cur, s)
	}
}

// OnDelete implements cache.ResourceEventHandler.
func (a *adapter[T]) OnDelete(obj any) {
	tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
	if isTomb {
		obj = tomb.Obj
	}
	last, ok := a.typed(obj)
	if !ok || a.h.Gone == nil {
		return
	}
	if isTomb {
		a.h.Gone(last, Seen{At: a.h.Now()})
		return
	}
	a.h.Gone(last, SeenOf(obj, a.h.Now))
}

// Every calls fn, for the collector named first, with now() every second,
// from Start until its context is done (a manual factory: at each Tick
// instead). Collectors use it to report
// the latency thresholds that objects still in flight crossed: crossings are
// also flushed before every observation, so the period only bounds how late
// a crossing of an object with no new events is counted.
func (f *Factory) Every(_ string, now func() time.Time, fn func(time.Time)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := ticker{now: now, fn: fn}
	f.tickers = append(f.tickers, t)
	if f.ctx != nil && !f.manual {
		go t.run(f.ctx)
	}
}

type ticker struct {
	now func() time.Time
	fn  func(time.Time)
}

func (t ticker) run(ctx context.Context) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			t.fn(t.now())
		}
	}
}

// attach registers w: attached when its informers have synced.
func (f *Factory) attach(w *Watching) {
	f.mu.Lock()
	f.watches = append(f.watches, w)
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// attachLoop attaches the watches as their informers sync, until ctx is
// done. Watches that become ready together attach in the order they were
// made, so a collector's handlers see the initial lists in the order it
// asked for them (endpoints: slices, Services, then pods). It polls every
// 100 ms while some watch waits, as cache.WaitForCacheSync does, and
// sleeps otherwise.
func (f *Factory) attachLoop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		waiting, err := f.attachReady()
		if err != nil {
			f.logger.Error("cannot attach handler", "err", err)
		}
		tick := t.C
		if !waiting {
			tick = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		case <-tick:
		}
	}
}

// attachReady attaches, in order, every watch whose informers have synced,
// and says whether some still wait.
func (f *Factory) attachReady() (waiting bool, err error) {
	f.mu.Lock()
	ws := f.watches[:len(f.watches):len(f.watches)]
	f.mu.Unlock()
	var errs []error
	for _, w := range ws {
		if !w.synced() {
			waiting = true
			continue
		}
		if e := w.tryAttach(); e != nil {
			errs = append(errs, e)
		}
	}
	f.mu.Lock()
	// Forget attached watches: the list holds only the waiting ones (a
	// custom resource's informer can come and go all day).
	rest := f.watches[:0]
	for _, w := range f.watches {
		if !w.Attached() && !w.isStopped() {
			rest = append(rest, w)
		}
	}
	clear(f.watches[len(rest):])
	f.watches = rest
	f.mu.Unlock()
	return waiting, errors.Join(errs...)
}

// Manual makes the factory driven by its caller (the replay harness):
// informers come from newInformer instead of the API server, Start runs no
// goroutine of its own, AttachSynced attaches the watches whose informers
// have synced, and Tick runs every collector's periodic function. Call it
// before any Informer call.
func (f *Factory) Manual(newInformer func(r Resource, example any, indexers cache.Indexers) cache.SharedIndexInformer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.manual = true
	f.newInformer = newInformer
}

// AttachSynced attaches every watch whose informers have synced (a manual
// factory), in the order the collectors asked for them.
func (f *Factory) AttachSynced() error {
	_, err := f.attachReady()
	return err
}

// Tick runs every collector's periodic function once (a manual factory), in
// the order they were registered.
func (f *Factory) Tick() {
	f.mu.Lock()
	ts := append([]ticker(nil), f.tickers...)
	f.mu.Unlock()
	for _, t := range ts {
		t.fn(t.now())
	}
}

// unexpectedObjects' detail is in docs/metrics.md.
var unexpectedObjects = metric.Family{
	Name: "kube_convergence_informer_unexpected_objects_total", Type: metric.Counter,
	Help:   "Notifications whose object was not of the type the collector reads, counted and ignored.",
	Labels: []string{"collector", "resource"},
}

func newUnexpected() *prometheus.CounterVec { return unexpectedObjects.NewCounterVec() }

// Handle returns the handler the seam would attach for h, without a
// factory: its unexpected objects are counted nowhere and logged nowhere.
// Unit tests drive a collector's handlers through it, so that they receive
// what an informer's notifications become, rules included.
func Handle[T any](h Handlers[T]) cache.ResourceEventHandler {
	if h.Now == nil {
		h.Now = time.Now
	}
	return &adapter[T]{h: h, unexpected: prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"}), logger: slog.New(slog.DiscardHandler)}
}
