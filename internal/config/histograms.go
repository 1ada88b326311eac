package config

import (
	"slices"
	"strings"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// Classic bucket modes of histograms.classicBuckets.
const (
	// ClassicAll keeps every classic bucket (the default).
	ClassicAll = "all"
	// ClassicThresholds keeps the classic buckets, and the crossing
	// counters, of the per-namespace latency histograms only at the
	// thresholds of histograms.thresholds; their native histogram (always
	// exposed, in the protobuf format) carries the fine resolution.
	ClassicThresholds = "thresholds"
)

// Histograms is the `histograms:` section (docs/cardinality.md).
type Histograms struct {
	ClassicBuckets string `yaml:"classicBuckets"`
	// Thresholds are the classic buckets kept in mode thresholds, in
	// seconds, by histogram; a histogram left out keeps its defaults
	// (DefaultClassicThresholds). Each must be one of the histogram's
	// buckets, so that le and threshold label values stay the same.
	Thresholds map[string][]float64 `yaml:"thresholds"`
}

// DefaultClassicThresholds are the classic buckets kept in mode thresholds:
// every `le` and `threshold` the bundled rules, SLOs and dashboards' SLO
// lines read (rules/metrics_test.go checks it), and for the histograms no
// rule reads, a few orders of magnitude.
var DefaultClassicThresholds = map[string][]float64{
	"kube_convergence_rollout_duration_seconds":           {5, 30, 300},
	"kube_convergence_rollout_recovered_duration_seconds": {30, 300},
	"kube_convergence_pod_startup_seconds":                {5, 30, 300},
	"kube_convergence_pod_stage_interval_seconds":         {1, 10, 60},
	"kube_convergence_endpoint_propagation_seconds":       {1, 5},
	"kube_convergence_endpoint_removal_seconds":           {1, 5},
}

// Buckets are the classic buckets of histogram name, whose full layout is
// all: all itself unless mode thresholds cuts it.
func (c *Config) Buckets(name string, all []float64) []float64 {
	if c.Histograms.ClassicBuckets != ClassicThresholds {
		return all
	}
	keep, ok := c.Histograms.Thresholds[name]
	if !ok {
		keep, ok = DefaultClassicThresholds[name]
	}
	if !ok {
		return all
	}
	out := make([]float64, 0, len(keep))
	for _, b := range all {
		if slices.Contains(keep, b) {
			out = append(out, b)
		}
	}
	return out
}

// histogramBuckets are the full layouts of the histograms mode thresholds
// cuts, to validate thresholds against.
var histogramBuckets = map[string][]float64{
	"kube_convergence_rollout_duration_seconds":           latency.RolloutBuckets,
	"kube_convergence_rollout_recovered_duration_seconds": latency.RolloutBuckets,
	"kube_convergence_pod_startup_seconds":                latency.PodStartupBuckets,
	"kube_convergence_pod_stage_interval_seconds":         latency.PodStartupBuckets,
	"kube_convergence_endpoint_propagation_seconds":       latency.EndpointBuckets,
	"kube_convergence_endpoint_removal_seconds":           latency.EndpointBuckets,
}

func (c *Config) validateHistograms(pos positions, add func(int, string, ...any)) {
	h := c.Histograms
	switch h.ClassicBuckets {
	case "", ClassicAll, ClassicThresholds:
	default:
		add(pos.line("histograms", "classicBuckets"), "histograms.classicBuckets: unknown mode %q (want %s or %s)", h.ClassicBuckets, ClassicAll, ClassicThresholds)
	}
	if len(h.Thresholds) > 0 && h.ClassicBuckets != ClassicThresholds {
		add(pos.keyLine("histograms", "thresholds"), "histograms.thresholds: only used with classicBuckets %q", ClassicThresholds)
	}
	for _, name := range sortedKeys(h.Thresholds) {
		if _, ok := DefaultClassicThresholds[name]; !ok {
			add(pos.keyLine("histograms", "thresholds", name), "histograms.thresholds: unknown histogram %q (want one of %s)", name, strings.Join(sortedKeys(DefaultClassicThresholds), ", "))
			continue
		}
		all := histogramBuckets[name]
		if len(h.Thresholds[name]) == 0 {
			add(pos.line("histograms", "thresholds", name), "histograms.thresholds.%s: want at least one threshold (the bundled SLOs read %v)", name, DefaultClassicThresholds[name])
		}
		for _, t := range h.Thresholds[name] {
			if !slices.Contains(all, t) {
				add(pos.line("histograms", "thresholds", name), "histograms.thresholds.%s: %v is not one of its buckets %v", name, t, all)
			}
		}
	}
}
