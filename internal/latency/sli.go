package latency

import (
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// ThresholdLabel is the label of a crossing counter that holds the
// threshold, formatted by Threshold like the histogram's le.
const ThresholdLabel = "threshold"

// Label is a label of a latency histogram with the values it can take;
// nil Values is open-ended (namespace, owner_kind).
type Label struct {
	Name   string
	Values []string
}

// Counter names the crossing counter of an SLI; its labels are the
// histogram's plus ThresholdLabel.
type Counter struct{ Name, Help string }

// Histogram declares a latency histogram: its family and buckets, and,
// for an SLI, its *_threshold_exceeded_total crossing counter. The
// collectors build it (NewSeries), the SLO generator reads it (SLIs) and the
// metric reference lists it, from this one declaration.
type Histogram struct {
	Name string
	Help string // one sentence; the detail is in docs/metrics.md
	// Labels are in the order their values are given to a Series.
	Labels  []Label
	Buckets []float64
	// Exceeded is the crossing counter; zero for a histogram that no SLI
	// reads.
	Exceeded Counter
}

// SLI reports whether the histogram has a crossing counter.
func (h Histogram) SLI() bool { return h.Exceeded.Name != "" }

// LabelNames are the histogram's labels, le aside.
func (h Histogram) LabelNames() []string {
	out := make([]string, len(h.Labels))
	for i, l := range h.Labels {
		out[i] = l.Name
	}
	return out
}

// Family is the histogram's family.
func (h Histogram) Family() metric.Family {
	return metric.Family{Name: h.Name, Type: metric.Histogram, Help: h.Help, Labels: h.LabelNames()}
}

// ExceededFamily is the crossing counter's family (the zero Family when
// the histogram is not an SLI).
func (h Histogram) ExceededFamily() metric.Family {
	if !h.SLI() {
		return metric.Family{}
	}
	return metric.Family{Name: h.Exceeded.Name, Type: metric.Counter, Help: h.Exceeded.Help, Labels: append(h.LabelNames(), ThresholdLabel)}
}

func values[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// The latency SLIs. Their names, labels and label values are the public
// interface that rules, dashboards and users' SLO files match; every
// threshold an SLO uses must be one of the buckets, so that its le series
// exists.
var (
	// RolloutDuration times every rollout episode of the workloads and the
	// configured custom resources (collectors.Episodes).
	RolloutDuration = Histogram{
		Name: "kube_convergence_rollout_duration_seconds",
		Help: "Time from a spec write, as received, until the rollout reached each stage, for rollouts the exporter saw start.",
		Labels: []Label{
			{"kind", values(tracker.Deployment, tracker.StatefulSet, tracker.DaemonSet)},
			{"namespace", nil},
			// observed is the observedGeneration lag.
			{"stage", values(tracker.StageObserved, tracker.StageUpdated, tracker.StageAvailable, tracker.StageReady, tracker.StageEndpointsReady)},
			{"change", values(tracker.ChangeCreate, tracker.ChangeTemplate, tracker.ChangeScale, tracker.ChangeOther)},
		},
		Buckets: RolloutBuckets,
		Exceeded: Counter{
			Name: "kube_convergence_rollout_threshold_exceeded_total",
			Help: "Rollout episodes whose age passed the threshold before they reached the stage, counted when it happened.",
		},
	}

	// PodStartup times the startup conditions of every pod created while
	// the exporter watches (collectors/pods).
	PodStartup = Histogram{
		Name: "kube_convergence_pod_startup_seconds",
		Help: "Time from a pod's creation, as received, until each startup condition first turned True, for pods created while the exporter watches.",
		Labels: []Label{
			{"namespace", nil},
			{"owner_kind", nil}, // ReplicaSet, StatefulSet, DaemonSet, Job, none, ... any controller kind
			{"stage", values(tracker.PodStages...)},
		},
		Buckets: PodStartupBuckets,
		Exceeded: Counter{
			Name: "kube_convergence_pod_startup_threshold_exceeded_total",
			Help: "Starting pods whose age passed the threshold before the stage's condition turned True, counted when it happened.",
		},
	}

	// EndpointPropagation times a Ready pod's publication as a ready
	// endpoint of each Service selecting it (collectors/endpoints).
	EndpointPropagation = Histogram{
		Name:    "kube_convergence_endpoint_propagation_seconds",
		Help:    "Time from a pod turning Ready, as received, until it is a ready endpoint in an EndpointSlice of each Service that selects it.",
		Labels:  []Label{{"namespace", nil}},
		Buckets: EndpointBuckets,
		Exceeded: Counter{
			Name: "kube_convergence_endpoint_propagation_threshold_exceeded_total",
			Help: "Pairs of a Ready pod and a Service selecting it whose propagation passed the threshold before it was published, counted when it happened.",
		},
	}
)

// SLIs are the histograms a latency SLI can read.
func SLIs() []Histogram { return []Histogram{RolloutDuration, PodStartup, EndpointPropagation} }

// WithBuckets is h with the classic buckets b (a subset of h's, from
// config.Config.Buckets): its crossing counter then counts only their
// thresholds.
func (h Histogram) WithBuckets(b []float64) Histogram {
	h.Buckets = b
	return h
}
