// Package all lists every collector of the exporter, so that the binary, the
// generated RBAC rules and the metric reference agree on one list.
package all

import (
	"log/slog"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/admissionprobes"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/churn"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/endpoints"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/pods"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/resources"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/retries"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/rollouts"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/timelines"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/webhooks"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// Options are the process-level settings collectors take from flags.
type Options struct {
	Config         *config.Config
	StallThreshold time.Duration // --stall.threshold
	// ResourceSyncTimeout is --resources.sync-timeout; 0: the default.
	ResourceSyncTimeout time.Duration
	Logger              *slog.Logger
	Now                 func() time.Time // nil: time.Now
	// RESTConfig is what admission probes build their own clients from
	// (their own rate limiter); nil: the informer factory's clients.
	RESTConfig *rest.Config
	// Timelines is the store the timeline API reads; nil: one with the
	// default bounds (for the metric reference and RBAC). Fed unless the
	// config disables the timelines collector.
	Timelines *timeline.Store
	// EpisodeSinks receive every rollout and custom-resource episode event
	// after the timeline store (the tracer).
	EpisodeSinks []collectors.EpisodeSink
	// TraceIDs, when set (tracing on), gives the trace id of an episode
	// that its duration exemplars carry.
	TraceIDs func(uid string, generation int64) string
}

// Collectors constructs every known collector, enabled or not, in start order.
func Collectors(o Options) []collectors.Collector {
	if o.Config == nil {
		o.Config = config.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StallThreshold == 0 {
		o.StallThreshold = config.DefaultStallThreshold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// One set of rollout episode families, fed by workloads and custom
	// resources alike.
	episodes := collectors.NewEpisodes(o.Config, o.Now)
	if o.TraceIDs != nil {
		episodes.SetTraceIDs(o.TraceIDs)
	}
	probes := admissionprobes.New(o.Config, o.Logger)
	probes.RESTConfig = o.RESTConfig
	if o.Timelines == nil {
		o.Timelines = timeline.NewStore(timeline.Config{})
	}
	ro := rollouts.NewWith(episodes, o.Config, o.StallThreshold, o.Logger, o.Now)
	re := resources.New(episodes, o.Config, o.StallThreshold, o.Logger, o.Now)
	if o.ResourceSyncTimeout > 0 {
		re.SetSyncTimeout(o.ResourceSyncTimeout)
	}
	if o.Config.Enabled(config.Timelines) {
		// One store, fed by every episode event and by the evidence the
		// collectors of workloads and custom resources read.
		episodes.AddSink(o.Timelines)
		ro.SetTimelines(o.Timelines)
		re.SetTimelines(o.Timelines)
	}
	for _, s := range o.EpisodeSinks {
		episodes.AddSink(s)
	}
	cs := []collectors.Collector{
		ro,
		pods.New(o.Config, o.StallThreshold, o.Logger, o.Now),
		endpoints.New(o.Config, o.Logger, o.Now),
		re,
		retries.New(o.Config, o.Logger, o.Now),
		webhooks.New(o.Config, o.Logger, o.Now),
		probes,
		timelines.New(o.Timelines, o.Logger, o.Now),
	}
	// churn hooks what the others watch: no watch and no RBAC of its own.
	var watched []informers.Resource
	seen := map[informers.Resource]bool{}
	for _, c := range cs {
		if !o.Config.Enabled(c.Name()) {
			continue
		}
		for _, r := range collectors.AllResources(c) {
			if !seen[r] {
				seen[r] = true
				watched = append(watched, r)
			}
		}
	}
	return append(cs, churn.New(o.Config, watched, o.Logger, o.Now))
}

// Resources returns every resource any collector reads, deduplicated, in a
// stable order: what the exporter's ClusterRole must allow to list and watch
// with the default configuration.
func Resources() []informers.Resource { return ResourcesOf(config.Default()) }

// ResourcesOf returns every resource the collectors enabled by cfg read,
// the configured custom resources included: what `kube-convergence-exporter
// rbac --config.file FILE` grants.
func ResourcesOf(cfg *config.Config) []informers.Resource {
	seen := map[informers.Resource]bool{}
	var out []informers.Resource
	for _, c := range Collectors(Options{Config: cfg}) {
		if !cfg.Enabled(c.Name()) {
			continue
		}
		for _, r := range collectors.AllResources(c) {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		if cr, ok := c.(interface{ CustomResources() []informers.Resource }); ok {
			out = append(out, cr.CustomResources()...)
		}
	}
	return out
}
