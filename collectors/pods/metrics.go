package pods

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// The pod families besides the pod startup SLI (latency.PodStartup). Their
// detail is in docs/metrics.md.
var (
	podStageInterval = latency.Histogram{
		Name:    "kube_convergence_pod_stage_interval_seconds",
		Help:    "Time between consecutive startup conditions of a pod turning True, from the one before (or its creation) to the one reached.",
		Labels:  []latency.Label{{Name: "namespace"}, {Name: "from"}, {Name: "to"}},
		Buckets: latency.PodStartupBuckets,
	}
	podsRecovered = metric.Family{
		Name: "kube_convergence_pods_recovered_total", Type: metric.Counter,
		Help:   "Pods whose startup is not timed because its start was not received live, counted once per pod.",
		Labels: []string{"namespace"},
	}
	podStalledDropped = metric.Family{
		Name: "kube_convergence_pod_stalled_series_dropped_total", Type: metric.Counter,
		Help: "Stalled pods left out of kube_convergence_pod_stalled_seconds by stall.seriesLimit, counted once per not-ready spell.",
	}
	podsNotReady = metric.Family{
		Name: "kube_convergence_pods_not_ready", Type: metric.Gauge,
		Help:   "Pods not terminating, Pending or Running, whose Ready condition is not True, by the most specific reason.",
		Labels: []string{"namespace", "reason"},
	}
	podStalled = metric.Family{
		Name: "kube_convergence_pod_stalled_seconds", Type: metric.Gauge,
		Help:   "Seconds each pod has not been ready, when longer than the stall threshold, by the next startup condition not True and why; capped.",
		Labels: []string{"namespace", "name", "stage", "reason"},
	}
)

type metrics struct {
	startup   *latency.Series
	exceeded  *prometheus.CounterVec // startup.Exceeded
	interval  *latency.Series
	recovered *prometheus.CounterVec
	dropped   *collectors.SeriesCap

	notReadyDesc *prometheus.Desc
	stalledDesc  *prometheus.Desc
}

func newMetrics(cfg *config.Config) *metrics {
	limit := cfg.Stall.SeriesLimit
	startup := latency.NewSeries(collectors.Classic(cfg, latency.PodStartup))
	return &metrics{
		startup:      startup,
		exceeded:     startup.Exceeded,
		interval:     latency.NewSeries(collectors.Classic(cfg, podStageInterval)),
		recovered:    podsRecovered.NewCounterVec(),
		dropped:      collectors.NewSeriesCap(podStalledDropped, limit),
		notReadyDesc: podsNotReady.Desc(),
		stalledDesc:  podStalled.Desc(),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	cs := append(m.startup.Collectors(), m.interval.Collectors()...)
	return metric.Register(reg, append(cs, metric.Declare(m.recovered, podsRecovered), m.dropped.Dropped())...)
}

// observe turns tracker events into metric updates.
func (c *Collector) observe(evs []tracker.PodEvent) {
	for _, e := range evs {
		ns := c.cfg.NamespaceLabelValue(e.Pod.Namespace)
		switch e.Type {
		case tracker.PodStageReached:
			ex := latency.Exemplar(e.Pod.UID, "", e.Pod.Name)
			c.m.startup.Observe(e.Duration.Seconds(), ex, ns, e.Pod.OwnerKind, string(e.Stage))
			if e.From != "" { // "": the stage before was reached in a watch gap
				c.m.interval.Observe(e.Interval.Seconds(), ex, ns, e.From, string(e.Stage))
			}
		case tracker.PodThresholdCrossed:
			c.m.startup.Cross(e.Threshold, ns, e.Pod.OwnerKind, string(e.Stage))
		case tracker.PodStartupOpened:
			// owner_kind has eight values, so at most 8 x 5 stages x 27
			// thresholds per namespace.
			for _, st := range tracker.PodStages {
				c.m.startup.Open(ns, e.Pod.OwnerKind, string(st))
			}
		case tracker.PodRecovered:
			c.m.recovered.WithLabelValues(ns).Inc()
		}
	}
}

// deleteNamespace deletes every series of a namespace label value.
func (m *metrics) deleteNamespace(ns string) {
	m.startup.ForgetNamespace(ns)
	m.interval.ForgetNamespace(ns)
	m.recovered.DeletePartialMatch(prometheus.Labels{"namespace": ns})
}

// scrape is the part of the collector computed at scrape time from the
// tracker: pods not ready, and stalled pods.
type scrape struct{ c *Collector }

func (s scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.c.m.notReadyDesc
	ch <- s.c.m.stalledDesc
}

// Families implements metric.Declared.
func (s scrape) Families() []metric.Family { return []metric.Family{podsNotReady, podStalled} }

func (s scrape) Collect(ch chan<- prometheus.Metric) {
	c := s.c
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := map[[2]string]int{}
	for ns := range c.seenNS {
		for _, r := range tracker.PodReasons {
			counts[[2]string{ns, r}] = 0 // every reason of every namespace seen, 0 included
		}
	}
	for ns, byReason := range c.tr.NotReady() {
		label := c.cfg.NamespaceLabelValue(ns)
		for r, n := range byReason {
			counts[[2]string{label, r}] += n
		}
	}
	keys := make([][2]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(c.m.notReadyDesc, prometheus.GaugeValue, float64(counts[k]), k[0], k[1])
	}
	stalled := map[string]bool{}
	for i, st := range c.tr.Stalled(now) {
		stalled[st.Pod.UID] = true
		if !c.m.dropped.Admit(i, st.Pod.UID) {
			continue
		}
		// The per-object series carries the real namespace: it exists to
		// name the pod, and the cap bounds its cardinality.
		ch <- prometheus.MustNewConstMetric(c.m.stalledDesc, prometheus.GaugeValue, st.Age.Seconds(),
			st.Pod.Namespace, st.Pod.Name, string(st.Stage), st.Reason)
	}
	c.m.dropped.Retain(stalled) // a spell that ended counts again next time
}
