package rollouts

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// metrics are the shared rollout episode families (collectors.Episodes),
// which this collector feeds with the workload kinds.
type metrics struct {
	*collectors.Episodes
	duration, recoveredDuration *prometheus.HistogramVec
	exceeded, recovered         *prometheus.CounterVec
}

func newMetrics(e *collectors.Episodes) *metrics {
	return &metrics{Episodes: e, duration: e.Duration.HistogramVec, recoveredDuration: e.RecoveredDuration.HistogramVec, exceeded: e.Duration.Exceeded, recovered: e.Recovered}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	return m.Register(reg, tracker.Deployment, tracker.StatefulSet, tracker.DaemonSet)
}

// observe turns tracker events into metric updates and queues them for
// the episode sinks. c.mu is held.
func (c *Collector) observe(evs []tracker.Event) { c.out.Observe(evs) }

// Episodes implements collectors.EpisodeSource.
func (c *Collector) Episodes(now time.Time) ([]tracker.Episode, []tracker.Stall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tr.Open(), c.tr.Stalled(now)
}

// forgetNamespace deletes the series of a deleted namespace (see
// collectors.Episodes.ForgetNamespace).
func (c *Collector) forgetNamespace(namespace string) { c.m.ForgetNamespace(namespace) }
