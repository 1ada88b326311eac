package endpoints

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// The endpoint families besides the propagation SLI
// (latency.EndpointPropagation). Their detail is in docs/metrics.md.
var (
	endpointRemoval = latency.Histogram{
		Name:    "kube_convergence_endpoint_removal_seconds",
		Help:    "Time from a ready endpoint's pod stopping being Ready, terminating or being deleted, as received, until it is no longer a ready endpoint.",
		Labels:  latency.EndpointPropagation.Labels,
		Buckets: latency.EndpointBuckets,
	}
	sliceTriggerLag = metric.Family{
		Name: "kube_convergence_endpointslice_trigger_lag_seconds", Type: metric.Histogram,
		Help: "Estimate, to the second, of the delay from a pod change on its node to the EndpointSlice update that reflects it.",
	}
)

type metrics struct {
	propagation *latency.Series
	exceeded    *prometheus.CounterVec // propagation.Exceeded
	removal     *latency.Series
	triggerLag  prometheus.Histogram
}

func newMetrics(cfg *config.Config) *metrics {
	propagation := latency.NewSeries(collectors.Classic(cfg, latency.EndpointPropagation))
	return &metrics{
		propagation: propagation,
		exceeded:    propagation.Exceeded,
		removal:     latency.NewSeries(collectors.Classic(cfg, endpointRemoval)),
		triggerLag:  sliceTriggerLag.NewHistogram(latency.BucketOpts(latency.OneSecondBuckets)),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	cs := append(m.propagation.Collectors(), m.removal.Collectors()...)
	return metric.Register(reg, append(cs, metric.Declare(m.triggerLag, sliceTriggerLag))...)
}

// deleteNamespace deletes every series of a namespace label value.
func (m *metrics) deleteNamespace(ns string) {
	m.propagation.ForgetNamespace(ns)
	m.removal.ForgetNamespace(ns)
}

// observe turns tracker events into metric updates.
func (c *Collector) observe(evs []tracker.EndpointEvent) {
	for _, e := range evs {
		ns := c.cfg.NamespaceLabelValue(e.Namespace)
		switch e.Type {
		case tracker.EndpointPropagated:
			c.m.propagation.Observe(e.Duration.Seconds(), latency.Exemplar(e.PodUID, "", e.PodName), ns)
		case tracker.EndpointPropagationCrossed:
			c.m.propagation.Cross(e.Threshold, ns)
		case tracker.EndpointRemoved:
			c.m.removal.Observe(e.Duration.Seconds(), latency.Exemplar(e.PodUID, "", e.PodName), ns)
		case tracker.EndpointTriggerLag:
			c.m.triggerLag.Observe(e.Duration.Seconds())
		case tracker.EndpointPairDue:
			// The first pair stuck after a restart burns budget: its
			// namespace's series exist at zero.
			c.m.propagation.Open(ns)
			c.m.removal.Open(ns)
		}
	}
}
