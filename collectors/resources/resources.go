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
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Resources

// States of a configured resource (kube_convergence_resource_state).
const (
	StateTracking         = informers.CustomTracking
	StateCRDMissing       = informers.CustomCRDMissing
	StateVersionNotServed = informers.CustomVersionNotServed
	// StateNoStatusSubresource: see judge.
	StateNoStatusSubresource = "no_status_subresource"
	StateForbidden           = informers.CustomForbidden
	StateListFailing         = informers.CustomListFailing
)

// States lists every state, in the order they are exposed.
var States = []string{StateTracking, StateCRDMissing, StateVersionNotServed, StateNoStatusSubresource, StateForbidden, StateListFailing}

// DefaultSyncTimeout is --resources.sync-timeout's default.
const DefaultSyncTimeout = 2 * time.Minute

// Collector times custom resource rollouts. The informers of its custom
// resources run in the factory's informers.CustomResources, which starts,
// switches and stops them as their CRDs change: the collector says which
// resources to track and how to judge their CRDs, and keeps the handlers.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	stall  time.Duration
	ep     *collectors.Episodes
	// syncTimeout: see SetSyncTimeout.
	syncTimeout time.Duration

	state        *prometheus.GaugeVec
	info         *prometheus.GaugeVec
	decodeErrors *prometheus.CounterVec

	resources map[string]*resource // by resource string: certificates.cert-manager.io
	order     []string

	// mu guards everything below (handlers of different informers run
	// concurrently). It is out's lock: the episode events and the
	// evidence queued on out under it reach the sinks and the timeline
	// store when it is unlocked.
	mu       sync.Locker
	out      *collectors.Outbox
	custom   *informers.CustomResources // set by Start; never called under mu
	tr       *tracker.RolloutTracker
	stallOf  map[tracker.Kind]time.Duration
	decoded  map[string]bool   // uids whose decode error was counted and logged
	notReady map[string]string // uid -> last condition logged
}

// resource is one configured custom resource.
type resource struct {
	cfg  config.Resource
	conv *records.Convention
}

// The custom resource families besides the episodes' (collectors.Episodes);
// their detail is in docs/metrics.md.
var (
	resourceState = metric.Family{
		Name: "kube_convergence_resource_state", Type: metric.Gauge,
		Help:   "1 for the current state of each configured custom resource, 0 for its other states.",
		Labels: []string{"resource", "state"},
	}
	resourceInfo = metric.Family{
		Name: "kube_convergence_resource_info", Type: metric.Gauge,
		Help:   "1 for each tracked custom resource: its kind label, its operator and whether it opted into the observed-generation-lag alert.",
		Labels: []string{"resource", "kind", "operator", "observed_generation_lag"},
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

		syncTimeout: DefaultSyncTimeout,

		state:        resourceState.NewGaugeVec(),
		info:         resourceInfo.NewGaugeVec(),
		decodeErrors: resourceDecodeErrors.NewCounterVec(),

		resources: map[string]*resource{},
		stallOf:   map[tracker.Kind]time.Duration{},
		decoded:   map[string]bool{},
		notReady:  map[string]string{},
	}
	c.out = collectors.NewOutbox(ep, c.logger)
	c.mu = c.out
	c.tr = tracker.NewRolloutTracker(tracker.RolloutConfig{
		Thresholds: ep.Duration.Buckets(),
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

// SetSyncTimeout sets how long a resource whose list fails keeps /readyz
// false before it is left out of readiness (--resources.sync-timeout);
// before Start.
func (c *Collector) SetSyncTimeout(d time.Duration) { c.syncTimeout = d }

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
	if err := metric.Register(reg, metric.Declare(c.state, resourceState), metric.Declare(c.info, resourceInfo), metric.Declare(c.decodeErrors, resourceDecodeErrors)); err != nil {
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

// Start implements collectors.Collector: it tracks each configured resource
// while its CRD is established and fit.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	if len(c.resources) == 0 {
		return nil
	}
	custom := f.CustomResources()
	c.mu.Lock()
	c.custom = custom
	c.mu.Unlock()
	for _, name := range c.order {
		r := c.resources[name]
		res := informers.Resource{Group: r.cfg.Group, Resource: r.cfg.Resource}
		// Handlers first: the informer may start as soon as it is tracked.
		informers.WatchCustom(custom, Name, res, c.startHandlers(r))
		if err := custom.Track(ctx, Name, informers.CustomResource{
			Group: r.cfg.Group, Resource: r.cfg.Resource, Version: r.cfg.Version,
			Transform:   r.conv.Transform,
			Judge:       judge,
			OnState:     func(state, why string) { c.setState(name, state, why) },
			Logger:      c.logger,
			SyncTimeout: c.syncTimeout,
		}); err != nil {
			return fmt.Errorf("resources: %w", err)
		}
	}
	if err := collectors.OnNamespaceDeleted(f, Name, c.ep.ForgetNamespace); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	f.Every(Name, c.now, func(now time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.out.Observe(c.tr.Tick(now))
	})
	return nil
}

// judge refuses a served version without the status subresource: a status
// write is then a write of the whole object and bumps metadata.generation,
// so the controller's own observedGeneration write would open the next
// episode, forever.
func judge(crd informers.CRD, v string) (state, why string) {
	if !crd.Versions[v].Status {
		return StateNoStatusSubresource, fmt.Sprintf("version %s has no status subresource: status writes bump metadata.generation, so it could never converge", v)
	}
	return StateTracking, fmt.Sprintf("version %s, kind %s", v, records.KindLabel(crd.Group, crd.Kind))
}

// setState exposes and logs a state change of the resource name.
func (c *Collector) setState(name, state, why string) {
	for _, s := range States {
		v := 0.0
		if s == state {
			v = 1
		}
		c.state.WithLabelValues(name, s).Set(v)
	}
	switch state {
	case StateTracking, StateForbidden, StateListFailing:
		// Its informer runs (and retries).
	default:
		c.info.DeletePartialMatch(prometheus.Labels{"resource": name})
	}
	level := slog.LevelInfo
	if state != StateTracking {
		level = slog.LevelWarn
	}
	c.logger.Log(context.Background(), level, "custom resource state", "resource", name, "state", state, "why", why)
}

// startHandlers makes r's handlers for each informer the tracker starts
// for it: the kind label comes from its CRD.
func (c *Collector) startHandlers(r *resource) func(informers.CustomInformer) informers.Handlers[records.CustomObject] {
	return func(ci informers.CustomInformer) informers.Handlers[records.CustomObject] {
		kind := tracker.Kind(records.KindLabel(ci.Resource.Group, ci.Kind))
		c.mu.Lock()
		c.stallOf[kind] = c.cfg.ResourceStallThreshold(r.cfg, c.stall)
		c.mu.Unlock()
		c.ep.Recovered.WithLabelValues(string(kind))
		name := r.cfg.String()
		c.info.DeletePartialMatch(prometheus.Labels{"resource": name}) // the kind of another version
		c.info.WithLabelValues(name, string(kind), r.cfg.Operator, strconv.FormatBool(r.cfg.ObservedGenerationLag)).Set(1)
		return c.objectHandlers(r, kind)
	}
}

// objectHandlers are the handlers of r's objects, of kind.
func (c *Collector) objectHandlers(r *resource, kind tracker.Kind) informers.Handlers[records.CustomObject] {
	return informers.Handlers[records.CustomObject]{
		Changed: func(old, o *records.CustomObject, seen informers.Seen) { c.onObject(r, kind, old, o, seen) },
		Gone:    c.onGone,
		Now:     c.now,
	}
}

func (c *Collector) onObject(r *resource, kind tracker.Kind, old, o *records.CustomObject, seen informers.Seen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := r.cfg.String()
	uid := string(o.UID)
	if o.DecodeError != "" && !c.decoded[uid] {
		c.decoded[uid] = true
		c.decodeErrors.WithLabelValues(name).Inc()
		c.logger.Warn("cannot read observedGeneration: judged without the observed stage", "resource", name, "namespace", o.Namespace, "name", o.Name, "err", o.DecodeError)
	}
	w := records.Custom(o, kind, r.conv)
	c.timelineConditions(old, o, seen.At)
	evs := c.tr.Observe(w, seen)
	c.out.Observe(evs)
	c.timelineObject(old, o, evs, seen.At)
	// Condition reasons and messages go to the log, never to labels.
	if cd, bad := records.NotReadyCondition(o); bad && c.tr.IsOpen(uid) {
		line := cd.Type + "=" + cd.Status + " " + cd.Reason + ": " + cd.Message
		if c.notReady[uid] != line {
			c.notReady[uid] = line
			c.logger.Info("custom resource not ready", "kind", kind, "namespace", o.Namespace, "name", o.Name, "generation", o.Generation,
				"condition", cd.Type, "status", cd.Status, "reason", cd.Reason, "message", cd.Message)
		}
	} else {
		delete(c.notReady, uid)
	}
}

// onGone ends the episode of a deleted object, or of one whose CRD went
// (informers.CustomResources hands every object its informer held).
func (c *Collector) onGone(o *records.CustomObject, seen informers.Seen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(string(o.UID))
	c.out.Observe(c.tr.Delete(string(o.UID), seen))
}

func (c *Collector) forget(uid string) {
	delete(c.decoded, uid)
	delete(c.notReady, uid)
}

// Readiness reports whether every tracking resource has synced, and a line
// per configured resource for /readyz: those not tracking are named and
// left out.
func (c *Collector) Readiness() (bool, []string) {
	if len(c.resources) == 0 {
		return true, nil
	}
	// Not under c.mu: the tracker's lock comes first (its handlers take c.mu).
	custom := c.tracking()
	if custom == nil {
		return false, nil // not started
	}
	return custom.Readiness(Name)
}

func (c *Collector) tracking() *informers.CustomResources {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.custom
}

// States returns each configured resource's current state, for tests and
// the log.
func (c *Collector) States() map[string]string {
	out := map[string]string{}
	for _, name := range c.order {
		out[name] = ""
	}
	if custom := c.tracking(); custom != nil {
		for name, st := range custom.States(Name) {
			out[name] = st
		}
	}
	return out
}
