// Package webhooks is the admission webhook audit: it exports every
// Validating- and MutatingWebhookConfiguration's webhooks with their
// timeout, caBundle expiry and the findings of a standing audit of risky
// configurations (audit.go, pure, over the webhook model of package
// admission). It computes at scrape time from the
// shared informers' caches: a finding exists exactly while it holds, with
// no event bookkeeping to get wrong.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
)

// Name is the collector's name in the config file and the collector label.
const Name = config.Webhooks

// serviceAccountNamespace is where a pod's service account namespace is
// mounted: the exporter's own namespace in cluster.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// The webhook audit's families; their detail is in docs/metrics.md.
var (
	webhookInfo = metric.Family{
		Name: "kube_convergence_webhook_info", Type: metric.Gauge,
		Help:   "Admission webhooks of the cluster's Validating- and MutatingWebhookConfigurations, 1 each, with their settings (v1 defaults applied).",
		Labels: []string{"configuration", "webhook", "type", "failure_policy", "side_effects", "match_policy", "reinvocation_policy", "client"},
	}
	webhookTimeout = metric.Family{
		Name: "kube_convergence_webhook_timeout_seconds", Type: metric.Gauge,
		Help:   "timeoutSeconds of an admission webhook (10 when unset): the longest the API server waits for it on each matching write.",
		Labels: []string{"configuration", "webhook", "type"},
	}
	webhookCAExpiry = metric.Family{
		Name: "kube_convergence_webhook_ca_bundle_expiry_timestamp_seconds", Type: metric.Gauge,
		Help:   "Earliest NotAfter, in Unix seconds, among the certificates in an admission webhook's clientConfig.caBundle.",
		Labels: []string{"configuration", "webhook", "type"},
	}
	webhookSlowRatio = metric.Family{
		Name: "kube_convergence_webhook_slow_ratio", Type: metric.Gauge,
		Help:   "Share of an admission webhook's calls in the last interval, summed over the API server replicas read, slower than half of its timeout.",
		Labels: []string{"webhook", "type"},
	}
	webhookFindings = metric.Family{
		Name: "kube_convergence_webhook_findings", Type: metric.Gauge,
		Help:   "1 while an admission webhook has a risky configuration, by finding, absent otherwise.",
		Labels: []string{"configuration", "webhook", "type", "finding"},
	}

	infoDesc     = webhookInfo.Desc()
	timeoutDesc  = webhookTimeout.Desc()
	caExpiryDesc = webhookCAExpiry.Desc()
	slowDesc     = webhookSlowRatio.Desc()
	findingDesc  = webhookFindings.Desc()
)

// Collector exports the webhook audit.
type Collector struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time
	policy Policy

	mu                                             sync.Mutex // guards the informers (set by Start), logged and slow
	validating, mutating, namespaces, svcs, slices cache.SharedIndexInformer
	logged                                         map[string]bool     // caBundle errors already logged, by webhook and bundle hash
	cas, casNext                                   map[caKey]caResult  // caBundle verdicts of the last scrape, and of this one
	slow                                           map[hookKey]float64 // slow ratios of the last interval (apiServerMetrics)
	// sees: the namespaces whose Services this process reads (the
	// factory's scope; nil: all). Set by Start.
	sees func(ns string) bool
	// slicesForbidden: RBAC denies EndpointSlices (Without); slices is nil.
	slicesForbidden bool
}

// New returns the webhooks collector.
func New(cfg *config.Config, logger *slog.Logger, now func() time.Time) *Collector {
	own := cfg.Webhooks.OwnNamespace
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		own = strings.TrimSpace(string(b))
	}
	return &Collector{
		cfg:    cfg,
		logger: logger.With("collector", Name),
		now:    now,
		policy: Policy{MaxTimeout: cfg.WebhookMaxTimeout(), CAExpiryWarning: cfg.WebhookCAExpiryWarning(), OwnNamespace: own},
		logged: map[string]bool{},
	}
}

// Name implements collectors.Collector.
func (c *Collector) Name() string { return Name }

// Resources implements collectors.Collector.
func (c *Collector) Resources() []informers.Resource {
	return []informers.Resource{informers.ValidatingWebhookConfigurations, informers.MutatingWebhookConfigurations,
		informers.Namespaces, informers.Services}
}

// OptionalResources implements collectors.Partial: without EndpointSlices
// the audit runs and says endpoints_unknown where no_ready_endpoints would
// be judged.
func (c *Collector) OptionalResources() []informers.Resource {
	return []informers.Resource{informers.EndpointSlices}
}

// Without implements collectors.Partial.
func (c *Collector) Without(denied []informers.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slicesForbidden = slices.Contains(denied, informers.EndpointSlices)
}

// Register implements collectors.Collector.
func (c *Collector) Register(reg prometheus.Registerer) error { return metric.Register(reg, c) }

// Start implements collectors.Collector: it takes the shared informers (the
// audit runs at scrape time on their caches) and, with
// webhooks.apiServerMetrics.enabled, starts reading the API server's metrics.
func (c *Collector) Start(ctx context.Context, f *informers.Factory) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.Resources()
	if !c.slicesForbidden {
		rs = append(rs, informers.EndpointSlices)
	}
	infs := make([]cache.SharedIndexInformer, 0, len(rs))
	for _, r := range rs {
		inf, err := f.Informer(r)
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
		infs = append(infs, inf)
	}
	c.validating, c.mutating, c.namespaces, c.svcs = infs[0], infs[1], infs[2], infs[3]
	if !c.slicesForbidden {
		c.slices = infs[4]
	}
	if scope := f.Scope(); scope.Sharded() || len(scope.Include)+len(scope.Exclude) > 0 {
		c.sees = scope.Keeps
	}
	if c.cfg.Webhooks.APIServerMetrics.Enabled {
		client, _ := f.Clients()
		if client == nil {
			return errors.New("webhooks: apiServerMetrics: no API client")
		}
		go c.readSlowRatios(ctx, client.CoreV1().RESTClient(), c.cfg.APIServerMetricsInterval())
	}
	return nil
}

// readSlowRatios reads the API server's webhook histogram every interval
// and keeps the slow ratios of the last interval. A failed read (403
// without get on /metrics) is logged once until the next success and
// leaves no ratios.
func (c *Collector) readSlowRatios(ctx context.Context, rc rest.Interface, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var replicas instances
	failing := false
	for {
		// Each read has the interval as its deadline: a hung read must not
		// stop the next ones.
		rctx, cancel := context.WithTimeout(ctx, interval)
		cur, err := readAPIServerMetrics(rctx, rc)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				c.logger.Warn("cannot read the API server's webhook latency (webhooks.apiServerMetrics): no slow ratios", "err", err)
			}
			failing, replicas = true, instances{}
			c.mu.Lock()
			c.slow = nil
			c.mu.Unlock()
		default:
			failing = false
			c.mu.Lock()
			c.slow = replicas.add(cur, c.timeouts(), c.now(), 3*interval)
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// timeouts is the largest timeout per webhook name and type: the API
// server's metrics cannot tell configurations apart. Call with c.mu held.
func (c *Collector) timeouts() map[hookKey]time.Duration {
	out := map[hookKey]time.Duration{}
	for _, w := range admission.List(c.validating.GetStore(), c.mutating.GetStore()) {
		k := hookKey{w.Name, w.Type}
		if w.Timeout > out[k] {
			out[k] = w.Timeout
		}
	}
	return out
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{infoDesc, timeoutDesc, caExpiryDesc, findingDesc, slowDesc} {
		ch <- d
	}
}

// Families implements metric.Declared.
func (c *Collector) Families() []metric.Family {
	return []metric.Family{webhookInfo, webhookTimeout, webhookCAExpiry, webhookFindings, webhookSlowRatio}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.validating == nil {
		return
	}
	for k, r := range c.slow {
		ch <- prometheus.MustNewConstMetric(slowDesc, prometheus.GaugeValue, r, k.Webhook, k.Type)
	}
	c.casNext = make(map[caKey]caResult, len(c.cas))
	defer func() { c.cas, c.casNext = c.casNext, nil }()
	cl := c.cluster()
	now := c.now()
	unusable := map[string]bool{} // logCAOnce keys of this scrape
	for _, w := range admission.List(c.validating.GetStore(), c.mutating.GetStore()) {
		a := Evaluate(w, cl, c.policy, now)
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1,
			w.Configuration, w.Name, w.Type, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.ReinvocationPolicy, w.Client())
		ch <- prometheus.MustNewConstMetric(timeoutDesc, prometheus.GaugeValue, w.Timeout.Seconds(), w.Configuration, w.Name, w.Type)
		switch {
		case a.CAErr == nil:
			ch <- prometheus.MustNewConstMetric(caExpiryDesc, prometheus.GaugeValue, float64(a.CAExpiry.Unix()), w.Configuration, w.Name, w.Type)
		case !errors.Is(a.CAErr, ErrNoCABundle):
			unusable[c.logCAOnce(w, a.CAErr)] = true
		}
		for _, f := range a.Findings {
			ch <- prometheus.MustNewConstMetric(findingDesc, prometheus.GaugeValue, 1, w.Configuration, w.Name, w.Type, f)
		}
	}
	// Forget the bundles no webhook holds any more (configuration deleted,
	// bundle fixed): the map stays as large as the unusable bundles now,
	// and one that comes back is logged again.
	for k := range c.logged {
		if !unusable[k] {
			delete(c.logged, k)
		}
	}
}

// logCAOnce logs an unusable caBundle once per webhook and bundle content,
// and returns its key in c.logged. Call with c.mu held.
func (c *Collector) logCAOnce(w admission.Webhook, err error) string {
	h := fnv.New64a()
	_, _ = h.Write(w.CABundle)
	key := fmt.Sprintf("%s/%s/%s/%x", w.Type, w.Configuration, w.Name, h.Sum64())
	if !c.logged[key] {
		c.logged[key] = true
		c.logger.Warn("caBundle of admission webhook is not usable PEM: no expiry series", "configuration", w.Configuration, "webhook", w.Name, "type", w.Type, "err", err)
	}
	return key
}

// caKey is a webhook at one version of its configuration.
type caKey struct{ Type, Configuration, Name, Version string }

type caResult struct {
	expiry time.Time
	err    error
}

// ca is EarliestExpiry kept per configuration version: the verdicts of the
// last scrape are reused, and only those of the webhooks seen in this one
// are kept for the next (as many as there are webhooks). Call with c.mu
// held.
func (c *Collector) ca(w admission.Webhook) (time.Time, error) {
	if w.Version == "" {
		return EarliestExpiry(w.CABundle)
	}
	k := caKey{w.Type, w.Configuration, w.Name, w.Version}
	r, ok := c.cas[k]
	if !ok {
		r.expiry, r.err = EarliestExpiry(w.CABundle)
	}
	c.casNext[k] = r
	return r.expiry, r.err
}

// cluster reads the live Namespaces, Services and EndpointSlices.
func (c *Collector) cluster() Cluster {
	state := SlicesSyncing
	switch {
	case c.slicesForbidden:
		state = SlicesForbidden
	case c.slices.HasSynced():
		state = SlicesSynced
	}
	return Cluster{
		NamespaceLabels: func(ns string) (map[string]string, bool) {
			o, ok, err := c.namespaces.GetStore().GetByKey(ns)
			if err != nil || !ok {
				return nil, false
			}
			n, ok := o.(*corev1.Namespace)
			if !ok {
				return nil, false
			}
			return n.Labels, true
		},
		Service: func(ns, name string) (*corev1.Service, bool) {
			o, ok, err := c.svcs.GetStore().GetByKey(ns + "/" + name)
			if err != nil || !ok {
				return nil, false
			}
			s, ok := o.(*corev1.Service)
			return s, ok
		},
		ServicesSynced: c.svcs.HasSynced(),
		ReadyEndpoints: func(ns, name string) int {
			return readyEndpoints(informers.ByIndex[*discoveryv1.EndpointSlice](c.slices, informers.IndexService, ns+"/"+name))
		},
		Slices: state,
		CA:     c.ca,
		Sees:   c.sees,
	}
}

// readyEndpoints counts the ready endpoints of a Service's EndpointSlices,
// by the exporter's one definition (records.ReadyEndpoint).
func readyEndpoints(slices []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for i := range s.Endpoints {
			if records.ReadyEndpoint(&s.Endpoints[i]) {
				n++
			}
		}
	}
	return n
}
