// Package resources is the collector of custom resource convergence: for
// every spec write of a configured custom resource (cert-manager
// Certificates, Flux Kustomizations, Crossplane claims, an in-house
// operator's objects), how long until its controller observed it and until
// it was ready, by a kstatus-compatible convention (docs/resources.md). It
// feeds the same rollout episode families as the rollouts collector, with
// kind <Kind>.<group>. Resources are tracked as their CRDs come and go,
// without a restart.
package resources

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Resources

// States of a configured resource (kube_convergence_resource_state).
const (
	StateTracking            = "tracking"
	StateCRDMissing          = "crd_missing"
	StateVersionNotServed    = "version_not_served"
	StateNoStatusSubresource = "no_status_subresource"
	StateForbidden           = "forbidden"
)

// States lists every state, in the order they are exposed.
var States = []string{StateTracking, StateCRDMissing, StateVersionNotServed, StateNoStatusSubresource, StateForbidden}

// Collector times custom resource rollouts.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	stall  time.Duration
	ep     *collectors.Episodes

	state        *prometheus.GaugeVec
	decodeErrors *prometheus.CounterVec

	f   *informers.Factory
	ctx context.Context

	mu        sync.Mutex // guards everything below; handlers of different informers run concurrently
	tr        *tracker.RolloutTracker
	resources map[string]*resource // by resource string: certificates.cert-manager.io
	order     []string
	stallOf   map[tracker.Kind]time.Duration
	decoded   map[string]bool   // uids whose decode error was counted and logged
	notReady  map[string]string // uid -> last condition logged
	crdSynced bool
	// tl receives the timeline evidence; nil: none is recorded.
	tl *timeline.Store
}

// resource is one configured custom resource.
type resource struct {
	cfg   config.Resource
	conv  *records.Convention
	state string // "" until the CRDs are listed
	kind  tracker.Kind
	// version watched and the informer's stop; run counts informer starts,
	// so that events still queued from a stopped informer are ignored.
	version string
	inf     cache.SharedIndexInformer
	handler cache.ResourceEventHandler
	stop    context.CancelFunc
	run     int
	// prev is the informer of the version watched before a switch, kept
	// running until the new one has synced so that no change goes unseen
	// while the API server starts serving the new version.
	prev *previous
}

type previous struct {
	inf     cache.SharedIndexInformer
	handler cache.ResourceEventHandler
	stop    context.CancelFunc
	run     int
}

// current reports whether run is one of r's running informers.
func (r *resource) current(run int) bool {
	return run == r.run || (r.prev != nil && run == r.prev.run)
}

// The custom resource families besides the episodes' (collectors.Episodes);
// their detail is in docs/metrics.md.
var (
	resourceState = metric.Family{
		Name: "kube_convergence_resource_state", Type: metric.Gauge,
		Help:   "1 for the current state of each configured custom resource, 0 for its other states.",
		Labels: []string{"resource", "state"},
	}
	resourceDecodeErrors = metric.Family{
		Name: "kube_convergence_resource_decode_errors_total", Type: metric.Counter,
		Help:   "Custom resource objects whose observedGeneration could not be read, counted once per object.",
		Labels: []string{"resource"},
	}
)

// New returns the resources collector, feeding ep (shared with rollouts).
// stall is --stall.threshold.
func New(ep *collectors.Episodes, cfg *config.Config, stall time.Duration, logger *slog.Logger, now func() time.Time) *Collector {
	c := &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		stall:  stall,
		ep:     ep,

		state:        resourceState.NewGaugeVec(),
		decodeErrors: resourceDecodeErrors.NewCounterVec(),

		resources: map[string]*resource{},
		stallOf:   map[tracker.Kind]time.Duration{},
		decoded:   map[string]bool{},
		notReady:  map[string]string{},
	}
	c.tr = tracker.NewRolloutTracker(tracker.RolloutConfig{
		Thresholds: latency.RolloutDuration.Buckets,
		// Read under c.mu, like every tracker call.
		StallAfter: func(k tracker.Kind) time.Duration {
			if d, ok := c.stallOf[k]; ok {
				return d
			}
			return c.cfg.ResourceStallThreshold(config.Resource{}, stall)
		},
	})
	for _, r := range cfg.Resources {
		conv, err := records.NewConvention(r)
		if err != nil {
			// config.Parse validated every path: unreachable with a loaded config.
			panic(fmt.Sprintf("resources: %s: %v", r, err))
		}
		c.resources[r.String()] = &resource{cfg: r, conv: conv}
		c.order = append(c.order, r.String())
	}
	ep.Feed(c)
	return c
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: the CRDs, when resources are
// configured (nothing otherwise: the default needs no CRD rule). The custom
// resources themselves are checked one by one as they are tracked: a
// forbidden one is forbidden alone, not the collector.
func (c *Collector) Resources() []informers.Resource {
	if len(c.resources) == 0 {
		return nil
	}
	return []informers.Resource{informers.CustomResourceDefinitions, informers.Namespaces}
}

// CustomResources returns the configured custom resources, for the
// ClusterRole (RBAC rules name no version).
func (c *Collector) CustomResources() []informers.Resource {
	out := make([]informers.Resource, 0, len(c.order))
	for _, name := range c.order {
		r := c.resources[name].cfg
		out = append(out, informers.Resource{Group: r.Group, Version: r.Version, Resource: r.Resource})
	}
	return out
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	if err := c.ep.Register(reg); err != nil {
		return err
	}
	if err := metric.Register(reg, metric.Declare(c.state, resourceState), metric.Declare(c.decodeErrors, resourceDecodeErrors)); err != nil {
		return err
	}
	for _, name := range c.order {
		c.decodeErrors.WithLabelValues(name)
	}
	return nil
}

// Episodes implements collectors.EpisodeSource.
func (c *Collector) Episodes(now time.Time) ([]tracker.Episode, []tracker.Stall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tr.Open(), c.tr.Stalled(now)
}

// Start implements collectors.Collector: it watches the CRDs and tracks each
// configured resource while its CRD is established and fit.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	if len(c.resources) == 0 {
		return nil
	}
	c.f, c.ctx = f, ctx
	crds, err := f.Informer(informers.CustomResourceDefinitions)
	if err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	if _, err := crds.AddEventHandler(f.Handler(Name, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onCRD(obj, false) },
		UpdateFunc: func(_, obj any) { c.onCRD(obj, false) },
		DeleteFunc: func(obj any) { c.onCRD(obj, true) },
	})); err != nil {
		return fmt.Errorf("resources: add handler: %w", err)
	}
	if err := collectors.OnNamespaceDeleted(f, Name, c.ep.ForgetNamespace); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	collectors.AfterSync(ctx, c.logger, []cache.SharedIndexInformer{crds}, func() error {
		// Every CRD present has been handled: the others are missing.
		c.mu.Lock()
		defer c.mu.Unlock()
		c.crdSynced = true
		for _, name := range c.order {
			if r := c.resources[name]; r.state == "" {
				c.setState(name, r, StateCRDMissing, "no CustomResourceDefinition")
			}
		}
		return nil
	}, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ep.Observe(c.tr.Tick(now), c.logger)
	})
	go func() {
		<-ctx.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.resources {
			if r.prev != nil {
				r.prev.stop()
			}
			if r.stop != nil {
				r.stop()
			}
		}
	}()
	return nil
}

// crdFacts is what a CRD says about a configured resource.
type crdFacts struct {
	kind        string
	established bool
	versions    map[string]crdVersion
}

type crdVersion struct{ served, status bool }

func readCRD(u *unstructured.Unstructured) (group, plural string, f crdFacts) {
	group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	f.kind, _, _ = unstructured.NestedString(u.Object, "spec", "names", "kind")
	f.versions = map[string]crdVersion{}
	vs, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range vs {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		status, _ := m["statusSubresource"].(bool)
		f.versions[name] = crdVersion{served, status}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cd := range conds {
		if m, _ := cd.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			f.established = true
		}
	}
	return group, plural, f
}

// preferred is the served version discovery prefers: the highest by
// Kubernetes version ordering (v1 > v1beta2 > v1beta1 > v1alpha1), as the
// apiextensions apiserver sorts a CRD's versions for discovery.
func preferred(vs map[string]crdVersion) string {
	var served []string
	for v, cv := range vs {
		if cv.served {
			served = append(served, v)
		}
	}
	sort.Slice(served, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0 })
	if len(served) == 0 {
		return ""
	}
	return served[0]
}

func (c *Collector) onCRD(obj any, deleted bool) {
	u, ok := informers.Unwrap(obj).(*unstructured.Unstructured)
	if !ok {
		return
	}
	group, plural, facts := readCRD(u)
	name := plural + "." + group
	now, _ := informers.ReceivedOr(u, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resources[name]
	if r == nil {
		return
	}
	v := r.cfg.Version
	if v == "" {
		v = preferred(facts.versions)
	}
	cv, known := facts.versions[v]
	switch {
	case deleted || u.GetDeletionTimestamp() != nil:
		// The API server deletes every object of a CRD being deleted first:
		// stop now, or the reflector would relist a vanishing resource.
		c.untrack(r, now)
		c.setState(name, r, StateCRDMissing, "CustomResourceDefinition deleted")
	case !facts.established:
		c.untrack(r, now)
		c.setState(name, r, StateCRDMissing, "CustomResourceDefinition not Established")
	case !known || !cv.served:
		c.untrack(r, now)
		c.setState(name, r, StateVersionNotServed, fmt.Sprintf("version %q is not served", v))
	case !cv.status:
		// Without the status subresource a status write is a write of the
		// whole object and bumps metadata.generation: the controller's own
		// observedGeneration write would open the next episode, forever.
		c.untrack(r, now)
		c.setState(name, r, StateNoStatusSubresource, fmt.Sprintf("version %s has no status subresource: status writes bump metadata.generation, so it could never converge", v))
	case r.inf != nil && r.version == v:
		// Tracking already (or forbidden, retried by its reflector).
	case r.inf != nil:
		// Another version is now the one to watch (a new preferred served
		// version): the objects are the same, so their episodes go on. The
		// old informer runs until the new one has synced (the API server
		// may take a moment to serve the new version); objects the new one
		// does not list are then closed as deleted.
		c.logger.Info("custom resource: watching another version", "resource", name, "from", r.version, "to", v)
		if r.prev != nil {
			r.prev.stop()
			c.f.ForgetHandler(r.prev.handler)
		}
		r.prev = &previous{inf: r.inf, handler: r.handler, stop: r.stop, run: r.run}
		r.inf, r.handler, r.stop = nil, nil, nil
		c.track(name, r, tracker.Kind(records.KindLabel(group, facts.kind)), v)
	default:
		c.track(name, r, tracker.Kind(records.KindLabel(group, facts.kind)), v)
	}
}

// track starts the informer of r at version v; c.mu is held. Once it has
// synced it replaces r.prev, if any.
func (c *Collector) track(name string, r *resource, kind tracker.Kind, v string) {
	res := informers.Resource{Group: r.cfg.Group, Version: v, Resource: r.cfg.Resource}
	inf, err := c.f.Dynamic(res, r.conv.Transform)
	if err != nil {
		c.logger.Error("cannot track a custom resource", "resource", name, "err", err)
		return
	}
	r.run++
	run := r.run
	r.inf, r.version, r.kind = inf, v, kind
	c.stallOf[kind] = c.cfg.ResourceStallThreshold(r.cfg, c.stall)
	c.ep.Recovered.WithLabelValues(string(kind))
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.run == run {
				c.setState(name, r, StateForbidden, err.Error())
			}
			return
		}
		c.logger.Warn("list/watch of a custom resource failed, retrying", "resource", name, "err", err)
	})
	h := c.f.Handler(Name, cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { c.onObject(r, run, nil, obj, initial) },
		UpdateFunc: func(oldObj, obj any) { c.onObject(r, run, oldObj, obj, false) },
		DeleteFunc: func(obj any) { c.onDelete(r, run, obj) },
	})
	if _, err := inf.AddEventHandler(h); err != nil {
		c.f.ForgetHandler(h)
		r.inf, r.version = nil, ""
		c.logger.Error("cannot track a custom resource", "resource", name, "err", err)
		return
	}
	r.handler = h
	ctx, cancel := context.WithCancel(c.ctx)
	r.stop = cancel
	c.setState(name, r, StateTracking, fmt.Sprintf("version %s, kind %s", v, kind))
	go inf.RunWithContext(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.run != run {
			return
		}
		// A list that was forbidden and is allowed later: tracking again.
		if r.state == StateForbidden {
			c.setState(name, r, StateTracking, "list allowed")
		}
		if r.prev == nil {
			return
		}
		prev := uidsOf(r.prev.inf)
		r.prev.stop()
		c.f.ForgetHandler(r.prev.handler)
		r.prev = nil
		listed := map[string]bool{}
		for _, uid := range uidsOf(inf) {
			listed[uid] = true
		}
		now := c.now()
		for _, uid := range prev {
			if !listed[uid] {
				c.forget(uid)
				c.ep.Observe(c.tr.Delete(uid, tracker.Seen{At: now}), c.logger)
			}
		}
	}()
}

// untrack stops r's informer and closes its episodes in flight as deleted;
// c.mu is held.
func (c *Collector) untrack(r *resource, now time.Time) {
	for _, uid := range c.stop(r) {
		c.forget(uid)
		c.ep.Observe(c.tr.Delete(uid, tracker.Seen{At: now}), c.logger)
	}
}

// stop stops r's informer, if any, and returns the UIDs it held; c.mu is
// held. Events still queued from it are ignored (run changes).
func (c *Collector) stop(r *resource) []string {
	var uids []string
	if p := r.prev; p != nil {
		p.stop()
		c.f.ForgetHandler(p.handler)
		uids = uidsOf(p.inf)
		r.prev = nil
	}
	if r.inf == nil {
		return uids
	}
	r.stop()
	r.run++
	uids = append(uids, uidsOf(r.inf)...)
	c.f.ForgetHandler(r.handler)
	r.inf, r.stop, r.version, r.handler = nil, nil, "", nil
	return uids
}

// uidsOf lists the UIDs in an informer's store (duplicates across two
// informers of one resource are harmless: a second Delete is a no-op).
func uidsOf(inf cache.SharedIndexInformer) []string {
	var uids []string
	for _, obj := range inf.GetStore().List() {
		if o, ok := obj.(*records.CustomObject); ok {
			uids = append(uids, string(o.UID))
		}
	}
	return uids
}

// setState records and logs a state change; c.mu is held.
func (c *Collector) setState(name string, r *resource, state, why string) {
	if r.state == state {
		return
	}
	r.state = state
	for _, s := range States {
		v := 0.0
		if s == state {
			v = 1
		}
		c.state.WithLabelValues(name, s).Set(v)
	}
	level := slog.LevelInfo
	if state != StateTracking {
		level = slog.LevelWarn
	}
	c.logger.Log(context.Background(), level, "custom resource state", "resource", name, "state", state, "why", why)
}

func (c *Collector) onObject(r *resource, run int, oldObj, obj any, initial bool) {
	o, ok := obj.(*records.CustomObject)
	if !ok {
		return
	}
	now, notLive := informers.NotLive(obj, initial, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.current(run) {
		return // a stopped informer's event, queued before the stop
	}
	name := r.cfg.String()
	uid := string(o.UID)
	if o.DecodeError != "" && !c.decoded[uid] {
		c.decoded[uid] = true
		c.decodeErrors.WithLabelValues(name).Inc()
		c.logger.Warn("cannot read observedGeneration: judged without the observed stage", "resource", name, "namespace", o.Namespace, "name", o.Name, "err", o.DecodeError)
	}
	w := records.Custom(o, r.kind, r.conv)
	old, _ := oldObj.(*records.CustomObject)
	if old != nil && informers.Recreated(old, o) {
		// Deleted and recreated under its name while the watch was down:
		// the relist shows an update. The old object's episode ends as
		// deleted, or it would stay open, and stalled, forever.
		c.forget(string(old.UID))
		c.ep.Observe(c.tr.Delete(string(old.UID), tracker.Seen{At: now}), c.logger)
		old = nil
	}
	c.timelineConditions(old, o, now)
	evs := c.tr.Observe(w, tracker.Seen{At: now, Live: !notLive})
	c.ep.Observe(evs, c.logger)
	c.timelineObject(old, o, evs, now)
	// Condition reasons and messages go to the log, never to labels.
	if cd, bad := records.NotReadyCondition(o); bad && c.tr.IsOpen(uid) {
		line := cd.Type + "=" + cd.Status + " " + cd.Reason + ": " + cd.Message
		if c.notReady[uid] != line {
			c.notReady[uid] = line
			c.logger.Info("custom resource not ready", "kind", r.kind, "namespace", o.Namespace, "name", o.Name, "generation", o.Generation,
				"condition", cd.Type, "status", cd.Status, "reason", cd.Reason, "message", cd.Message)
		}
	} else {
		delete(c.notReady, uid)
	}
}

func (c *Collector) onDelete(r *resource, run int, obj any) {
	o, ok := informers.Unwrap(obj).(*records.CustomObject)
	if !ok {
		return
	}
	now := informers.DeletedAt(obj, c.now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.current(run) {
		return
	}
	c.forget(string(o.UID))
	c.ep.Observe(c.tr.Delete(string(o.UID), tracker.Seen{At: now}), c.logger)
}

func (c *Collector) forget(uid string) {
	delete(c.decoded, uid)
	delete(c.notReady, uid)
}

// Readiness reports whether every tracking resource has synced, and a line
// per configured resource for /readyz: those not tracking are named and
// left out.
func (c *Collector) Readiness() (bool, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.resources) == 0 {
		return true, nil
	}
	synced := c.crdSynced
	lines := make([]string, 0, len(c.order))
	for _, name := range c.order {
		r := c.resources[name]
		switch {
		case r.state == "":
			lines = append(lines, fmt.Sprintf("resource %s: waiting for the CRD list", name))
		case r.state == StateTracking && r.inf != nil && !r.inf.HasSynced():
			synced = false
			lines = append(lines, fmt.Sprintf("resource %s: tracking, syncing", name))
		case r.state == StateTracking:
			lines = append(lines, fmt.Sprintf("resource %s: tracking, synced", name))
		default:
			lines = append(lines, fmt.Sprintf("resource %s: %s (not tracked, excluded from readiness)", name, r.state))
		}
	}
	return synced, lines
}

// States returns each configured resource's current state, for tests and
// the log.
func (c *Collector) States() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for name, r := range c.resources {
		out[name] = r.state
	}
	return out
}
