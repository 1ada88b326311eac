package informers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// States of a tracked custom resource (CustomResources.States). A
// collector's Judge may add its own.
const (
	CustomTracking         = "tracking"
	CustomCRDMissing       = "crd_missing"        // no CRD, or not Established
	CustomVersionNotServed = "version_not_served" // the version to watch is not served
	CustomForbidden        = "forbidden"          // RBAC denies list or watch
	// CustomListFailing: the informer's list fails with another error (a
	// conversion webhook down, a 5xx) and it has not synced yet.
	CustomListFailing = "list_failing"
)

// maxListError bounds the list error kept for /readyz (bytes).
const maxListError = 512

// CustomResource is a custom resource a collector asks CustomResources to
// track: an informer runs for it while its CRD is established, serves the
// version and Judge accepts it.
type CustomResource struct {
	Group, Resource string
	// Version to watch; "": the CRD's preferred served version, followed
	// as it changes.
	Version string
	// Transform is the informer's transform (Factory.Dynamic).
	Transform cache.TransformFunc
	// Judge, when set, says whether a served version is fit to watch:
	// CustomTracking and a description of what is watched, or the state
	// and why it is not. Without it every served version is fit.
	Judge func(crd CRD, version string) (state, why string)
	// OnState is told every change of state, with why. It runs under the
	// tracker's lock: it must not call the tracker.
	OnState func(state, why string)
	// Logger receives the resource's lifecycle (the informer switching
	// versions, list/watch errors); nil: the factory's, with the collector.
	Logger *slog.Logger
	// SyncTimeout is how long an informer whose list fails keeps
	// readiness false (Readiness) before the resource is left out of it,
	// until its list succeeds; 0: it is left out at once.
	SyncTimeout time.Duration
}

func (r CustomResource) name() string { return Resource{Group: r.Group, Resource: r.Resource}.String() }

// CustomInformer is one informer CustomResources runs: the resource at the
// version it watches, and the kind its CRD names.
type CustomInformer struct {
	Resource Resource
	Kind     string
}

// CustomResources runs the informers of the custom resources collectors
// track, as their CRDs come, change their preferred version and go,
// without a restart: one informer per resource whatever the number of
// collectors that read it. A collector tracks a resource (Track: the
// transform, how to judge its CRD), and any collector attaches handlers to
// its informers (WatchCustom) or reads its objects before the transform
// (BeforeTransform). When a CRD goes, or no longer fits, the informer
// stops and every object it held reaches the handlers' Gone, dated by the
// CRD notification: the API server deletes a CRD's objects with it, and
// an informer left running would relist a missing resource forever.
//
// Lock order: the tracker's lock, then a handler's own. Handlers, Judge
// and OnState must not call the tracker, and a collector must not call it
// while holding a lock its handlers take (stopping an informer waits for
// its handlers' call in progress).
type CustomResources struct {
	f   *Factory
	now func() time.Time

	mu        sync.Mutex          // guards everything below
	tracked   map[string]*tracked // by resource name: certificates.cert-manager.io
	order     []string
	subs      []*customSub
	hooks     []func(CustomInformer) Hook
	crds      *Watching // nil until the first Track
	crdSynced bool
}

// tracked is one tracked custom resource.
type tracked struct {
	ctx       context.Context
	collector string
	cfg       CustomResource
	logger    *slog.Logger
	state     string // "" until the CRDs are listed
	version   string // watched by cur
	// started is when cur started, listErr its last list error while it
	// has not synced (CustomListFailing).
	started time.Time
	listErr string
	cur     *customRun
	// prev is the informer of the version watched before a switch, kept
	// running until the new one has synced so that no change goes unseen
	// while the API server starts serving the new version.
	prev *customRun
}

// customRun is one informer of a tracked resource, its handlers and its
// hooks (read by the transform on every object, replaced by
// BeforeTransform).
type customRun struct {
	ci     CustomInformer
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	subs   []*customAttached
	hooks  atomic.Pointer[[]Hook]
}

// synced reports whether the informer has synced and every handler has
// received its initial list.
func (r *customRun) synced() bool {
	if !r.inf.HasSynced() {
		return false
	}
	for _, a := range r.subs {
		if !a.w.Synced() {
			return false
		}
	}
	return true
}

// customSub is a WatchCustom call: attach makes its handlers for one
// informer.
type customSub struct {
	resource Resource // unversioned
	attach   func(f *Factory, inf cache.SharedIndexInformer, ci CustomInformer) *customAttached
}

// customAttached is a subscription's handlers on one informer. gone hands
// objects the informer held to Gone, skipping those in done (and adding
// the others).
type customAttached struct {
	sub  *customSub
	w    *Watching
	gone func(objs []any, s Seen, done map[types.UID]bool)
}

// CustomResources returns the factory's custom resource tracker.
func (f *Factory) CustomResources() *CustomResources {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.custom == nil {
		f.custom = &CustomResources{f: f, now: f.handlers.now, tracked: map[string]*tracked{}}
	}
	return f.custom
}

// Track runs r's informer, for collector, while r's CRD allows it, under
// ctx. The first call watches the CRDs (they must be readable: SetDynamic).
func (cr *CustomResources) Track(ctx context.Context, collector string, r CustomResource) error {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	name := r.name()
	if t, ok := cr.tracked[name]; ok {
		return fmt.Errorf("informers: custom resource %s is already tracked by %s", name, t.collector)
	}
	logger := r.Logger
	if logger == nil {
		logger = cr.f.logger.With("collector", collector)
	}
	t := &tracked{ctx: ctx, collector: collector, cfg: r, logger: logger}
	if cr.crds == nil {
		w, err := Watch(cr.f, collector, CustomResourceDefinitions, Handlers[unstructured.Unstructured]{
			Changed: func(_, u *unstructured.Unstructured, s Seen) { cr.onCRD(u, s.At, false) },
			Gone:    func(u *unstructured.Unstructured, s Seen) { cr.onCRD(u, s.At, true) },
			Now:     cr.now,
		})
		if err != nil {
			return err
		}
		cr.crds = w
		go cr.awaitCRDs(ctx, w)
	}
	cr.tracked[name] = t
	cr.order = append(cr.order, name)
	if cr.crdSynced {
		// Tracked after the CRD list: judge its CRD now.
		if obj, ok, _ := cr.crds.inf.GetStore().GetByKey(name); ok {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				cr.judge(t, ReadCRD(u), u.GetDeletionTimestamp() != nil, SeenOf(u, cr.now).At)
			}
		} else {
			cr.setState(t, CustomCRDMissing, "no CustomResourceDefinition")
		}
	}
	return nil
}

// WatchCustom attaches, for collector, the handlers that handlers makes
// for each informer of the custom resource r (its version is ignored)
// that cr runs, now and later, through WatchInformer. handlers runs under
// the tracker's lock.
func WatchCustom[T any](cr *CustomResources, collector string, r Resource, handlers func(CustomInformer) Handlers[T]) {
	sub := &customSub{resource: Resource{Group: r.Group, Resource: r.Resource}}
	sub.attach = func(f *Factory, inf cache.SharedIndexInformer, ci CustomInformer) *customAttached {
		h := handlers(ci)
		if h.Now == nil {
			h.Now = time.Now
		}
		a := &customAttached{sub: sub, w: WatchInformer(f, collector, ci.Resource, inf, h)}
		a.gone = func(objs []any, s Seen, done map[types.UID]bool) {
			if h.Gone == nil {
				return
			}
			for _, obj := range objs {
				last, ok := obj.(*T)
				if !ok || last == nil {
					continue // counted when it was added
				}
				if id, ok := any(last).(identity); ok {
					if done[id.GetUID()] {
						continue
					}
					done[id.GetUID()] = true
				}
				if s.At.IsZero() {
					h.Gone(last, Seen{At: h.Now()})
					continue
				}
				h.Gone(last, s)
			}
		}
		return a
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.subs = append(cr.subs, sub)
	for _, run := range cr.running() {
		if sub.matches(run.ci) {
			run.subs = append(run.subs, sub.attach(cr.f, run.inf, run.ci))
		}
	}
}

// running lists the informers cr runs; cr.mu is held.
func (cr *CustomResources) running() []*customRun {
	var out []*customRun
	for _, name := range cr.order {
		t := cr.tracked[name]
		for _, run := range []*customRun{t.prev, t.cur} {
			if run != nil {
				out = append(out, run)
			}
		}
	}
	return out
}

func (s *customSub) matches(ci CustomInformer) bool {
	return s.resource.Group == ci.Resource.Group && s.resource.Resource == ci.Resource.Resource
}

// BeforeTransform adds a hook (see Hook) that reads the objects of every
// informer cr runs, now and later, before its transform: the field
// managers, which the transform drops. hook makes it for each informer.
// Objects an informer received before are not shown to it (collectors
// start on their own: the informer may be running already).
func (cr *CustomResources) BeforeTransform(hook func(CustomInformer) Hook) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.hooks = append(cr.hooks, hook)
	for _, run := range cr.running() {
		hs := append(slices.Clone(*run.hooks.Load()), hook(run.ci))
		run.hooks.Store(&hs)
	}
}

// awaitCRDs marks, once the CRD handler has had the CRD list, every
// tracked resource still without a state as missing its CRD.
func (cr *CustomResources) awaitCRDs(ctx context.Context, w *Watching) {
	if !cache.WaitForCacheSync(ctx.Done(), w.Synced) {
		return
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.crdSynced = true
	for _, name := range cr.order {
		if t := cr.tracked[name]; t.state == "" {
			cr.setState(t, CustomCRDMissing, "no CustomResourceDefinition")
		}
	}
}

// onCRD judges the tracked resource of u, a CRD received at `at`, deleted
// or not.
func (cr *CustomResources) onCRD(u *unstructured.Unstructured, at time.Time, deleted bool) {
	crd := ReadCRD(u)
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if t := cr.tracked[crd.Plural+"."+crd.Group]; t != nil {
		cr.judge(t, crd, deleted || u.GetDeletionTimestamp() != nil, at)
	}
}

// judge applies what crd, t's CRD received at `at`, says (gone: deleted or
// being deleted); cr.mu is held.
func (cr *CustomResources) judge(t *tracked, crd CRD, gone bool, at time.Time) {
	v := t.cfg.Version
	if v == "" {
		v = crd.Preferred()
	}
	cv, known := crd.Versions[v]
	switch {
	case gone:
		// The API server deletes every object of a CRD being deleted first:
		// stop now, or the reflector would relist a vanishing resource.
		cr.untrack(t, at)
		cr.setState(t, CustomCRDMissing, "CustomResourceDefinition deleted")
		return
	case !crd.Established:
		cr.untrack(t, at)
		cr.setState(t, CustomCRDMissing, "CustomResourceDefinition not Established")
		return
	case !known || !cv.Served:
		cr.untrack(t, at)
		cr.setState(t, CustomVersionNotServed, fmt.Sprintf("version %q is not served", v))
		return
	}
	state, why := CustomTracking, "version "+v
	if t.cfg.Judge != nil {
		state, why = t.cfg.Judge(crd, v)
	}
	switch {
	case state != CustomTracking:
		cr.untrack(t, at)
		cr.setState(t, state, why)
	case t.cur != nil && t.version == v:
		// Tracking already (or forbidden, retried by its reflector).
	case t.cur != nil:
		// Another version is now the one to watch (a new preferred served
		// version): the objects are the same, so the handlers' state goes
		// on. The old informer runs until the new one has synced (the API
		// server may take a moment to serve the new version); objects the
		// new one does not list are then gone.
		t.logger.Info("custom resource: watching another version", "resource", t.cfg.name(), "from", t.version, "to", v)
		if t.prev != nil {
			cr.stop(t.prev)
		}
		t.prev, t.cur, t.version = t.cur, nil, ""
		cr.start(t, crd, v, why)
	default:
		cr.start(t, crd, v, why)
	}
}

// start runs t's informer at version v, with every subscription's
// handlers; cr.mu is held. Once it has synced it replaces t.prev, if any.
func (cr *CustomResources) start(t *tracked, crd CRD, v, why string) {
	name := t.cfg.name()
	run := &customRun{ci: CustomInformer{Resource: Resource{Group: t.cfg.Group, Version: v, Resource: t.cfg.Resource}, Kind: crd.Kind}}
	ci := run.ci
	hooks := make([]Hook, 0, len(cr.hooks))
	for _, h := range cr.hooks {
		hooks = append(hooks, h(ci))
	}
	run.hooks.Store(&hooks)
	// Every list or watch error before the first sync is the list's: the
	// resource has no objects to show and says why in its state (logged
	// once per change by OnState); the reflector retries with backoff.
	// After it the cache stays valid while the reflector relists. 403 is
	// forbidden whenever it comes.
	onErr := func(err error) {
		forbidden := apierrors.IsForbidden(err)
		if !forbidden && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			return // the reflector relists at once
		}
		cr.mu.Lock()
		defer cr.mu.Unlock()
		if t.cur != run || (!forbidden && run.inf.HasSynced()) {
			return
		}
		if forbidden {
			cr.setState(t, CustomForbidden, err.Error())
			return
		}
		t.listErr = CutUTF8(err.Error(), maxListError)
		cr.setState(t, CustomListFailing, t.listErr)
	}
	inf, err := cr.f.Dynamic(ci.Resource, run.transform(t.cfg.Transform), onErr)
	if err != nil {
		t.logger.Error("cannot track a custom resource", "resource", name, "err", err)
		return
	}
	run.inf = inf
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if !apierrors.IsForbidden(err) && inf.HasSynced() {
			t.logger.Warn("list/watch of a custom resource failed, retrying", "resource", name, "err", err)
		}
	})
	for _, s := range cr.subs {
		if s.matches(ci) {
			a := s.attach(cr.f, inf, ci)
			// Attached before the informer runs, not once it has synced
			// as Watch does (there are no facts to wait for): its initial
			// list comes flagged as such all the same, and no live event
			// falls between its sync and the attachment, where it would be
			// replayed as listed.
			if err := a.w.tryAttach(); err != nil {
				t.logger.Error("cannot watch a custom resource", "resource", name, "err", err)
			}
			run.subs = append(run.subs, a)
		}
	}
	ctx, cancel := context.WithCancel(t.ctx)
	run.cancel = cancel
	t.cur, t.version, t.started, t.listErr = run, v, cr.now(), ""
	cr.setState(t, CustomTracking, why)
	go inf.RunWithContext(ctx)
	go cr.awaitSync(ctx, t, run)
}

// transform is next (nil: none) preceded by r's hooks. An object already
// compacted (see Compact) is not shown to the hooks again.
func (r *customRun) transform(next cache.TransformFunc) cache.TransformFunc {
	if next == nil {
		next = func(obj any) (any, error) { return obj, nil }
	}
	return func(obj any) (any, error) {
		if hooks := *r.hooks.Load(); len(hooks) > 0 {
			if m, ok := obj.(metav1.Object); ok && !compacted(obj) {
				for _, h := range hooks {
					h(m)
				}
			}
		}
		return next(obj)
	}
}

// awaitSync waits for run to sync: a list that was forbidden and is
// allowed now is tracking again; the informer of the previous version, if
// any, stops, and the objects it held that run does not are gone.
func (cr *CustomResources) awaitSync(ctx context.Context, t *tracked, run *customRun) {
	synced := func() bool {
		cr.mu.Lock()
		defer cr.mu.Unlock()
		return run.synced() // run.subs grows with WatchCustom
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if t.cur != run {
		return
	}
	switch t.state {
	case CustomForbidden:
		cr.setState(t, CustomTracking, "list allowed")
	case CustomListFailing:
		t.listErr = ""
		cr.setState(t, CustomTracking, "list succeeded")
	}
	prev := t.prev
	if prev == nil {
		return
	}
	t.prev = nil
	held := prev.inf.GetStore().List()
	cr.stop(prev)
	t.logger.Info("custom resource: the new version's informer has synced, the old one stopped", "resource", t.cfg.name(), "from", prev.ci.Resource.Version, "to", t.version)
	listed := map[types.UID]bool{}
	for _, obj := range run.inf.GetStore().List() {
		if id, ok := obj.(identity); ok {
			listed[id.GetUID()] = true
		}
	}
	for _, a := range prev.subs {
		done := make(map[types.UID]bool, len(listed))
		for uid := range listed {
			done[uid] = true
		}
		a.gone(held, Seen{}, done) // dated by each collector's clock
	}
}

// untrack stops t's informers and hands the objects they held to Gone,
// dated at (the CRD notification); cr.mu is held.
func (cr *CustomResources) untrack(t *tracked, at time.Time) {
	runs := make([]*customRun, 0, 2)
	for _, r := range []*customRun{t.cur, t.prev} {
		if r != nil {
			runs = append(runs, r)
		}
	}
	t.cur, t.prev, t.version = nil, nil, ""
	held := make([][]any, len(runs))
	for i, r := range runs {
		held[i] = r.inf.GetStore().List()
		cr.stop(r)
	}
	// One Gone per object and subscription, though both informers of a
	// version switch may hold it.
	done := map[*customSub]map[types.UID]bool{}
	for i, r := range runs {
		for _, a := range r.subs {
			if done[a.sub] == nil {
				done[a.sub] = map[types.UID]bool{}
			}
			a.gone(held[i], Seen{At: at}, done[a.sub])
		}
	}
}

// stop detaches run's handlers, waiting for their calls in progress, and
// stops its informer; cr.mu is held.
func (cr *CustomResources) stop(run *customRun) {
	for _, a := range run.subs {
		a.w.Shutdown()
	}
	run.cancel()
}

// setState records a state change and tells the collector; cr.mu is held.
func (cr *CustomResources) setState(t *tracked, state, why string) {
	if t.state == state {
		return
	}
	t.state = state
	if t.cfg.OnState != nil {
		t.cfg.OnState(state, why)
	}
}

// Readiness reports whether the CRD list and every informer of collector's
// tracking resources have synced (handlers included), and a line per
// resource it tracks for /readyz: those not tracking are named and left
// out, and so is one whose list has failed for longer than its
// SyncTimeout.
func (cr *CustomResources) Readiness(collector string) (bool, []string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	synced := cr.crdSynced
	var lines []string
	for _, name := range cr.order {
		t := cr.tracked[name]
		if t.collector != collector {
			continue
		}
		switch {
		case t.state == "":
			lines = append(lines, fmt.Sprintf("resource %s: waiting for the CRD list", name))
		case t.state == CustomListFailing && cr.now().Sub(t.started) < t.cfg.SyncTimeout:
			synced = false
			lines = append(lines, fmt.Sprintf("resource %s: list_failing, syncing (left out of readiness after the %v sync timeout): %s", name, t.cfg.SyncTimeout, t.listErr))
		case t.state == CustomListFailing:
			lines = append(lines, fmt.Sprintf("resource %s: list_failing (excluded from readiness after the %v sync timeout; joins again when its list succeeds): %s", name, t.cfg.SyncTimeout, t.listErr))
		case t.state == CustomTracking && t.cur != nil && !t.cur.synced():
			synced = false
			lines = append(lines, fmt.Sprintf("resource %s: tracking, syncing", name))
		case t.state == CustomTracking:
			lines = append(lines, fmt.Sprintf("resource %s: tracking, synced", name))
		default:
			lines = append(lines, fmt.Sprintf("resource %s: %s (not tracked, excluded from readiness)", name, t.state))
		}
	}
	return synced, lines
}

// States returns the state of each resource collector tracks ("" until the
// CRDs are listed).
func (cr *CustomResources) States(collector string) map[string]string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	out := map[string]string{}
	for name, t := range cr.tracked {
		if t.collector == collector {
			out[name] = t.state
		}
	}
	return out
}
