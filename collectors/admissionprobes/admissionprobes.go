// Package admissionprobes times the admission chain from outside: each
// configured probe sends one dry-run write (dryRun=All) at its interval and
// records how long the API server took and how it answered. A dry-run
// request goes through every matching mutating and validating webhook and
// is never stored. A matching webhook whose sideEffects is Unknown or Some
// fails it: the API server answers 400 `admission webhook "NAME" does not
// support dry run` (k8s.io/apiserver pkg/admission/plugin/webhook/errors,
// NewDryRunUnsupportedErr), which counts as error. Nothing is
// probed unless the config file lists admissionProbes, so by default the
// collector reads nothing and needs no RBAC.
package admissionprobes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.AdmissionProbes

// AnnotationProbe is set on the object an UPDATE probe sends, so that the
// update changes something (the request is a dry run: nothing is stored).
const AnnotationProbe = "kube-convergence.io/admission-probe"

// Buckets: 0.005 s to 30 s, with 0.5×, 0.8× and 1× of the webhook timeouts
// 1, 2, 5, 10, 15 and 30 s, so a rule can ask "how many probes took more
// than half of, or close to, the timeout" with an existing le bucket.
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.8, 1, 1.6, 2, 2.5, 4, 5, 7.5, 8, 10, 12, 15, 24, 30}

// The admission probe families; their detail is in docs/metrics.md.
var (
	probeDuration = metric.Family{
		Name: "kube_convergence_admission_probe_duration_seconds", Type: metric.Histogram,
		Help:   "Duration of an admission probe's answered dry-run requests (allowed or denied), admission webhooks and the round trip included.",
		Labels: []string{"probe"},
	}
	probeResults = metric.Family{
		Name: "kube_convergence_admission_probe_results_total", Type: metric.Counter,
		Help:   "Admission probe requests by result: allowed, denied, timeout or error.",
		Labels: []string{"probe", "result"},
	}
	probeErrors = metric.Family{
		Name: "kube_convergence_admission_probe_errors_total", Type: metric.Counter,
		Help:   "Admission probe requests that got no answer from admission (results timeout and error), by reason.",
		Labels: []string{"probe", "reason"},
	}
	probeWebhooks = metric.Family{
		Name: "kube_convergence_admission_probe_webhooks", Type: metric.Gauge,
		Help:   "1 for each admission webhook that an admission probe's request matches, or possibly matches.",
		Labels: []string{"probe", "configuration", "webhook", "type"},
	}

	webhooksDesc = probeWebhooks.Desc()
)

// Collector runs the configured probes.
type Collector struct {
	probes []config.AdmissionProbe
	logger *slog.Logger
	// RESTConfig, when set, is what the probes build their own clients
	// from; nil uses the informer factory's (tests without a config).
	RESTConfig *rest.Config

	duration *prometheus.HistogramVec
	results  *prometheus.CounterVec
	errors   *prometheus.CounterVec

	mu                              sync.Mutex // guards the informers, set by Start
	validating, mutating, namespace cache.SharedIndexInformer
}

// New returns the admission_probes collector.
func New(cfg *config.Config, logger *slog.Logger) *Collector {
	return &Collector{
		probes:   cfg.AdmissionProbes,
		logger:   logger.With("collector", Name),
		duration: probeDuration.NewHistogramVec(latency.BucketOpts(Buckets)),
		results:  probeResults.NewCounterVec(),
		errors:   probeErrors.NewCounterVec(),
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector: the webhook configurations
// and Namespaces the probes are matched against, none without probes. The
// write verbs on the probed resources are granted by the
// admission-probes kustomize component, not checked here.
func (c *Collector) Resources() []informers.Resource {
	if len(c.probes) == 0 {
		return nil
	}
	return []informers.Resource{informers.ValidatingWebhookConfigurations, informers.MutatingWebhookConfigurations, informers.Namespaces}
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error {
	if err := metric.Register(reg, metric.Declare(c.duration, probeDuration), metric.Declare(c.results, probeResults),
		metric.Declare(c.errors, probeErrors), c); err != nil {
		return err
	}
	for _, p := range c.probes {
		c.duration.WithLabelValues(p.Name)
		for _, r := range Results {
			c.results.WithLabelValues(p.Name, r)
		}
		for _, r := range Reasons {
			c.errors.WithLabelValues(p.Name, r)
		}
	}
	return nil
}

// Start implements collectors.Collector: one goroutine per probe, each
// with its own timer and deadline.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	if len(c.probes) == 0 {
		return nil
	}
	infs := make([]cache.SharedIndexInformer, 0, 3)
	for _, r := range c.Resources() {
		inf, err := f.Informer(r)
		if err != nil {
			return fmt.Errorf("admission_probes: %w", err)
		}
		infs = append(infs, inf)
	}
	disco, dyn, err := c.clients(f)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.validating, c.mutating, c.namespace = infs[0], infs[1], infs[2]
	c.mu.Unlock()
	for _, p := range c.probes {
		r := &runner{c: c, p: p, dyn: dyn, disco: disco}
		go r.loop(ctx)
	}
	return nil
}

// clients gives the probes their own discovery and dynamic clients, so that
// a probe's duration holds no client-side throttling: client-go gives every
// REST client made from a config without a RateLimiter its own token
// bucket (rest.RESTClientFor), and the factory's clients are shared with
// the informers, whose relists of thousands of objects (or custom
// resources, through the dynamic client) would make a probe wait for
// tokens before its clock's request is even sent. The probes send at most
// two requests each per interval, far below --kube.qps and --kube.burst.
func (c *Collector) clients(f *informers.Factory) (discovery.DiscoveryInterface, dynamic.Interface, error) {
	if c.RESTConfig == nil {
		client, dyn := f.Clients()
		if client == nil || dyn == nil {
			return nil, nil, errors.New("admission_probes: no API client")
		}
		return client.Discovery(), dyn, nil
	}
	rc := rest.CopyConfig(c.RESTConfig)
	rc.RateLimiter = nil // its own token bucket, not the informers'
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("admission_probes: discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("admission_probes: dynamic client: %w", err)
	}
	return disco, dyn, nil
}

// runner is one probe's loop.
type runner struct {
	c      *Collector
	p      config.AdmissionProbe
	dyn    dynamic.Interface
	disco  discovery.DiscoveryInterface
	gvr    *schema.GroupVersionResource
	logged bool // an error was logged since the last success
}

func (r *runner) loop(ctx context.Context) {
	t := time.NewTicker(time.Duration(r.p.Interval))
	defer t.Stop()
	for {
		r.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) once(parent context.Context) {
	if r.gvr == nil {
		gvr, err := resolve(r.disco, r.p)
		if err != nil {
			r.c.results.WithLabelValues(r.p.Name, Error).Inc()
			r.c.errors.WithLabelValues(r.p.Name, ReasonNotFound).Inc()
			r.logOnce("admission probe resource not served", err)
			return
		}
		r.gvr = &gvr
	}
	d, sent, err := r.send(parent)
	if parent.Err() != nil {
		return // shutting down: not the API server's answer
	}
	res, reason := Outcome(err)
	if !sent {
		// A request that was never sent (UPDATE's read of the object
		// failed, even by its deadline) reached no admission webhook: it
		// is an error, with no duration to observe.
		res = Error
		if reason == "" {
			reason = ReasonTransport
		}
	}
	switch res {
	case Allowed, Denied:
		// Only answers are latencies: a fast 403 of RBAC or a 409 would
		// pull the quantiles down while the probe fails.
		r.c.duration.WithLabelValues(r.p.Name).Observe(d.Seconds())
	default:
		r.c.errors.WithLabelValues(r.p.Name, reason).Inc()
	}
	r.c.results.WithLabelValues(r.p.Name, res).Inc()
	switch res {
	case Error:
		r.logOnce("admission probe failed", err)
	case Allowed:
		r.logged = false
	}
}

func (r *runner) logOnce(msg string, err error) {
	if r.logged {
		return
	}
	r.logged = true
	r.c.logger.Warn(msg, "probe", r.p.Name, "resource", r.p.Resource, "namespace", r.p.Namespace, "operation", r.p.Operation, "err", err)
}

// send sends the dry-run request with the probe's timeout as its deadline
// and returns how long it took and whether it was sent. An UPDATE first
// reads the object, untimed and with a deadline of its own, so that a slow
// read neither shortens the write's deadline nor counts as its timeout.
func (r *runner) send(parent context.Context) (time.Duration, bool, error) {
	ri := r.dyn.Resource(*r.gvr).Namespace(r.p.Namespace)
	dry := []string{metav1.DryRunAll}
	timeout := time.Duration(r.p.Timeout)
	var obj *unstructured.Unstructured
	switch r.p.Operation {
	case config.OperationCreate:
		var err error
		if obj, err = Object(r.p); err != nil {
			return 0, false, err
		}
	case config.OperationUpdate:
		ctx, cancel := context.WithTimeout(parent, timeout)
		cur, err := ri.Get(ctx, r.p.ObjectName(), metav1.GetOptions{})
		cancel()
		if err != nil {
			return 0, false, fmt.Errorf("get %s for update: %w", r.p.ObjectName(), err)
		}
		ann := cur.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationProbe] = time.Now().UTC().Format(time.RFC3339Nano)
		cur.SetAnnotations(ann)
		obj = cur
	case config.OperationDelete:
	default:
		return 0, false, fmt.Errorf("unknown operation %q", r.p.Operation)
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	start := time.Now()
	var err error
	switch r.p.Operation {
	case config.OperationCreate:
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: dry})
	case config.OperationUpdate:
		_, err = ri.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
	case config.OperationDelete:
		err = ri.Delete(ctx, r.p.ObjectName(), metav1.DeleteOptions{DryRun: dry})
	}
	return time.Since(start), true, err
}

// Object is the probe's inline manifest as an API object in its
// namespace. It goes through JSON: YAML decodes integers as int, which
// unstructured objects do not hold (they want int64, as JSON decoding
// gives).
func Object(p config.AdmissionProbe) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(p.Object)
	if err != nil {
		return nil, fmt.Errorf("probe %s object: %w", p.Name, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("probe %s object: %w", p.Name, err)
	}
	obj.SetNamespace(p.Namespace)
	return obj, nil
}

// resolve gives the resource the probe writes: the resource's group at the
// inline object's version (config checks that the groups agree), so the
// request carries the manifest as written and is matched against webhook
// rules by that version. Discovery only checks that the API server serves
// the resource at that version, namespaced.
func resolve(d discovery.DiscoveryInterface, p config.AdmissionProbe) (schema.GroupVersionResource, error) {
	group, resource := p.GroupResource()
	_, version := p.APIVersion()
	gv := schema.GroupVersion{Group: group, Version: version}
	list, err := d.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discovery of %s: %w", gv, err)
	}
	for _, res := range list.APIResources {
		if res.Name == resource {
			if !res.Namespaced {
				return schema.GroupVersionResource{}, fmt.Errorf("%s is cluster-scoped; probes write namespaced resources", p.Resource)
			}
			return gv.WithResource(resource), nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("resource %s is not served at %s", p.Resource, gv)
}

// Describe implements prometheus.Collector (the matched-webhooks family).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- webhooksDesc }

// Families implements metric.Declared (the matched-webhooks family).
func (c *Collector) Families() []metric.Family { return []metric.Family{probeWebhooks} }

// Collect implements prometheus.Collector: the webhooks each probe's
// request matches, from the current configurations.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.validating == nil {
		return
	}
	hooks := admission.List(c.validating.GetStore(), c.mutating.GetStore())
	for _, p := range c.probes {
		// The request is sent at the object's version (resolve).
		group, resource := p.GroupResource()
		_, version := p.APIVersion()
		req := admission.Request{Operation: admissionOp(p.Operation), Group: group, Version: version, Resource: resource, Namespaced: true}
		nsLabels := map[string]string{corev1.LabelMetadataName: p.Namespace}
		if o, ok, err := c.namespace.GetStore().GetByKey(p.Namespace); err == nil && ok {
			if ns, ok := o.(*corev1.Namespace); ok {
				nsLabels = ns.Labels
			}
		}
		objLabels := p.ObjectLabels()
		for _, w := range hooks {
			if w.Matches(req, nsLabels, objLabels) {
				ch <- prometheus.MustNewConstMetric(webhooksDesc, prometheus.GaugeValue, 1, p.Name, w.Configuration, w.Name, w.Type)
			}
		}
	}
}
