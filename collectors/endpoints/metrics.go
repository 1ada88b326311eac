package endpoints

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

type metrics struct {
	propagation *prometheus.HistogramVec
	exceeded    *prometheus.CounterVec
	removal     *prometheus.HistogramVec
	triggerLag  prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		propagation: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_endpoint_propagation_seconds",
			"Time from a pod turning Ready (as received by the exporter), or from a Service starting to select a Ready pod, until the pod is a ready endpoint (conditions.ready true) in an EndpointSlice of that Service. Observed once per pod, Service and Ready transition, for Services with a selector, not of type ExternalName and without publishNotReadyAddresses; 0 when the slice update arrived before the pod update. Transitions that happened during a watch gap (delivered by a list cycle) are not observed. Ready pods never published are counted by kube_convergence_endpoint_propagation_threshold_exceeded_total.",
			latency.EndpointBuckets), []string{"namespace"}),
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_endpoint_propagation_threshold_exceeded_total",
			Help: "Pairs of a Ready pod and a Service selecting it whose propagation time passed the threshold (seconds, formatted like the propagation histogram's le) while the pod was not yet a ready endpoint of the Service, counted when it happened. With the le bucket it makes a propagation SLI that counts pods never published while they wait.",
		}, []string{"namespace", "threshold"}),
		removal: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_endpoint_removal_seconds",
			"Time from a pod that is a ready endpoint of a Service stopping being Ready, starting to terminate or being deleted (as received by the exporter) until it is no longer a ready endpoint in the Service's EndpointSlices: how long traffic may still be sent to it. Observed once per pod, Service and transition, for Services with a selector and without publishNotReadyAddresses; 0 when the slice update arrived before the pod update.",
			latency.EndpointBuckets), []string{"namespace"}),
		triggerLag: prometheus.NewHistogram(latency.HistogramOpts(
			"kube_convergence_endpointslice_trigger_lag_seconds",
			"Estimate of the delay from a pod change on the node (kubelet) to the EndpointSlice update that reflects it, with one-second precision: the exporter's receive time of a slice update minus its endpoints.kubernetes.io/last-change-trigger-time annotation (the earliest pod change among those the update reflects, by the node's clock, truncated to the second), observed once per new annotation value of each slice, not for the initial list. Reads up to 1 s high; clock skew between node and exporter adds to it; negative values are observed as 0.",
			latency.OneSecondBuckets)),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.propagation, m.exceeded, m.removal, m.triggerLag} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// deleteNamespace deletes every series of a namespace label value.
func (m *metrics) deleteNamespace(ns string) {
	l := prometheus.Labels{"namespace": ns}
	m.propagation.DeletePartialMatch(l)
	m.exceeded.DeletePartialMatch(l)
	m.removal.DeletePartialMatch(l)
}

// observe turns tracker events into metric updates.
func (c *Collector) observe(evs []tracker.EndpointEvent) {
	for _, e := range evs {
		ns := c.cfg.NamespaceLabelValue(e.Namespace)
		switch e.Type {
		case tracker.EndpointPropagated:
			latency.Observe(c.m.propagation.WithLabelValues(ns), e.Duration.Seconds(), latency.Exemplar(e.PodUID, "", e.PodName))
		case tracker.EndpointPropagationCrossed:
			c.m.exceeded.WithLabelValues(ns, latency.Threshold(latency.EndpointBuckets[e.Threshold])).Inc()
		case tracker.EndpointRemoved:
			latency.Observe(c.m.removal.WithLabelValues(ns), e.Duration.Seconds(), latency.Exemplar(e.PodUID, "", e.PodName))
		case tracker.EndpointTriggerLag:
			c.m.triggerLag.Observe(e.Duration.Seconds())
		case tracker.EndpointPairDue:
			// Create the namespace's series at zero (rate() cannot count a
			// series that first appears with its first increment): the first
			// pair stuck after a restart burns budget.
			if c.created[ns] {
				continue
			}
			c.created[ns] = true
			c.m.propagation.WithLabelValues(ns)
			c.m.removal.WithLabelValues(ns)
			for _, b := range latency.EndpointBuckets {
				c.m.exceeded.WithLabelValues(ns, latency.Threshold(b))
			}
		}
	}
}
