package rollouts

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

type metrics struct {
	duration          *prometheus.HistogramVec
	recoveredDuration *prometheus.HistogramVec
	closed            *prometheus.CounterVec
	exceeded          *prometheus.CounterVec
	recovered         *prometheus.CounterVec
	dropped           prometheus.Counter

	inProgressDesc *prometheus.Desc
	stalledDesc    *prometheus.Desc
}

func newMetrics() *metrics {
	return &metrics{
		duration: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_rollout_duration_seconds",
			"Time from a spec write (as received by the exporter) until the rollout reached the stage: observed (status.observedGeneration caught up: the observedGeneration lag), updated, available, ready (StatefulSet), endpoints_ready. Stages not reached are counted by kube_convergence_rollout_threshold_exceeded_total. Live rollouts only: those the exporter did not see start are in kube_convergence_rollout_recovered_duration_seconds.",
			latency.RolloutBuckets), []string{"kind", "namespace", "stage", "change"}),
		recoveredDuration: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_rollout_recovered_duration_seconds",
			"Like kube_convergence_rollout_duration_seconds, for rollouts the exporter did not see start (found in flight at its start or after a watch gap; counted by kube_convergence_rollouts_recovered_total): time from the API-side write time (one-second precision, the API server's clock; the exporter's last receipt of the object when later) until a stage still ahead was reached. Stages passed before are not observed. Not read by the bundled SLIs, which count live rollouts only.",
			latency.RolloutBuckets), []string{"kind", "namespace", "stage", "change"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_rollouts_total",
			Help: "Rollout episodes (one per object generation) that ended, by outcome: converged, superseded (a newer generation came first), deleted, paused, manual (OnDelete).",
		}, []string{"kind", "namespace", "change", "outcome"}),
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_rollout_threshold_exceeded_total",
			Help: "Rollout episodes whose age passed the threshold (seconds, formatted like the duration histogram's le) before they reached the stage, counted when it happened. With the le bucket it makes a latency SLI that counts stuck rollouts while they are stuck.",
		}, []string{"kind", "namespace", "stage", "change", "threshold"}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_rollouts_recovered_total",
			Help: "Rollout episodes found in flight when the exporter started or after a watch gap; they are timed from the API-side spec write time and stages already passed are not observed.",
		}, []string{"kind"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kube_convergence_rollout_stalled_series_dropped_total",
			Help: "Stalled rollouts not exposed by kube_convergence_rollout_stalled_seconds because the series cap (stall.seriesLimit) was reached, counted once per episode.",
		}),
		inProgressDesc: prometheus.NewDesc("kube_convergence_rollouts_in_progress",
			"Rollout episodes open now: written, not yet converged or otherwise closed.", []string{"kind", "namespace"}, nil),
		stalledDesc: prometheus.NewDesc("kube_convergence_rollout_stalled_seconds",
			"Seconds since the spec write of a rollout older than the stall threshold; stage is the next stage not reached, reason the most specific cause found. One series per stalled object, capped.",
			[]string{"kind", "namespace", "name", "stage", "reason"}, nil),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.duration, m.recoveredDuration, m.closed, m.exceeded, m.recovered, m.dropped} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, k := range []tracker.Kind{tracker.Deployment, tracker.StatefulSet, tracker.DaemonSet} {
		m.recovered.WithLabelValues(string(k))
	}
	return nil
}

// observe turns tracker events into metric updates.
func (c *Collector) observe(evs []tracker.Event) {
	for _, e := range evs {
		ep := e.Episode
		ns := c.cfg.NamespaceLabelValue(ep.Namespace)
		switch e.Type {
		case tracker.StageReached:
			h := c.m.duration
			if ep.Recovered {
				h = c.m.recoveredDuration
			}
			latency.Observe(h.WithLabelValues(string(ep.Kind), ns, string(e.Stage), string(ep.Change)),
				e.Duration.Seconds(), latency.Exemplar(ep.UID, strconv.FormatInt(ep.Generation, 10), ep.Name))
		case tracker.ThresholdCrossed:
			c.m.exceeded.WithLabelValues(string(ep.Kind), ns, string(e.Stage), string(ep.Change), latency.Threshold(latency.RolloutBuckets[e.Threshold])).Inc()
		case tracker.EpisodeClosed:
			c.m.closed.WithLabelValues(string(ep.Kind), ns, string(ep.Change), string(e.Outcome)).Inc()
			delete(c.droppedEpisodes, ep.UID)
		case tracker.EpisodeOpened:
			c.m.closed.WithLabelValues(string(ep.Kind), ns, string(ep.Change), string(tracker.OutcomeConverged))
			if ep.Recovered {
				break // no crossings, and its durations go to the recovered family
			}
			// Create this episode's series at zero: Prometheus' rate() cannot
			// count a series that first appears with its first increment.
			for _, st := range tracker.Stages(ep.Kind) {
				c.m.duration.WithLabelValues(string(ep.Kind), ns, string(st), string(ep.Change))
				for _, b := range latency.RolloutBuckets {
					c.m.exceeded.WithLabelValues(string(ep.Kind), ns, string(st), string(ep.Change), latency.Threshold(b))
				}
			}
		case tracker.EpisodeRecovered:
			c.m.recovered.WithLabelValues(string(ep.Kind)).Inc()
			c.logger.Info("recovered a rollout in flight", "kind", ep.Kind, "namespace", ep.Namespace, "name", ep.Name, "generation", ep.Generation, "since", ep.Start)
		}
	}
}

// scrape is the part of the collector computed at scrape time from the
// tracker: open and stalled episodes.
type scrape struct{ c *Collector }

func (s scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.c.m.inProgressDesc
	ch <- s.c.m.stalledDesc
}

// MetricType implements metricdoc.Typed: both scrape-time metrics are gauges.
func (s scrape) MetricType(string) string { return "gauge" }

func (s scrape) Collect(ch chan<- prometheus.Metric) {
	c := s.c
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	open := map[[2]string]int{}
	for key := range c.seenInProgress {
		open[key] = 0 // keep series that fell to zero
	}
	for _, ep := range c.tr.Open() {
		key := [2]string{string(ep.Kind), c.cfg.NamespaceLabelValue(ep.Namespace)}
		open[key]++
		c.seenInProgress[key] = true
	}
	keys := make([][2]string, 0, len(open))
	for k := range open {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(c.m.inProgressDesc, prometheus.GaugeValue, float64(open[k]), k[0], k[1])
	}
	for i, st := range c.tr.Stalled(now) {
		ep := st.Episode
		if i >= c.cfg.Stall.SeriesLimit {
			if !c.droppedEpisodes[ep.UID] {
				c.droppedEpisodes[ep.UID] = true
				c.m.dropped.Inc()
			}
			continue
		}
		// The per-object series carries the real namespace: it exists to
		// name the object, and the cap bounds its cardinality.
		ch <- prometheus.MustNewConstMetric(c.m.stalledDesc, prometheus.GaugeValue, st.Age.Seconds(),
			string(ep.Kind), ep.Namespace, ep.Name, string(st.Stage), st.Reason)
	}
}

// forgetNamespace deletes the series of a deleted namespace, so that
// cardinality does not grow with every namespace a cluster ever had. A
// namespace folded into another label value (namespaceLabel allowlist or
// drop) shares its series with others, which stay.
func (c *Collector) forgetNamespace(namespace string) {
	ns := c.cfg.NamespaceLabelValue(namespace)
	if ns != namespace {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	match := prometheus.Labels{"namespace": ns}
	c.m.duration.DeletePartialMatch(match)
	c.m.recoveredDuration.DeletePartialMatch(match)
	c.m.closed.DeletePartialMatch(match)
	c.m.exceeded.DeletePartialMatch(match)
	for key := range c.seenInProgress {
		if key[1] == ns {
			delete(c.seenInProgress, key)
		}
	}
}
