package pods

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

type metrics struct {
	startup   *prometheus.HistogramVec
	interval  *prometheus.HistogramVec
	exceeded  *prometheus.CounterVec
	recovered *prometheus.CounterVec
	dropped   *collectors.SeriesCap

	notReadyDesc *prometheus.Desc
	stalledDesc  *prometheus.Desc
}

func newMetrics(limit int) *metrics {
	return &metrics{
		startup: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_pod_startup_seconds",
			"Time from a pod's creation (as received by the exporter) until each startup condition first turned True: scheduled (PodScheduled), ready_to_start_containers (PodReadyToStartContainers: sandbox and network), initialized (Initialized), containers_ready (ContainersReady), ready (Ready). Each stage at most once per pod, for pods created while the exporter watches; conditions a node does not report are not observed. owner_kind is the kind of the pod's controller ownerReference when the API server serves it (ReplicaSet, StatefulSet, DaemonSet, Job, ReplicationController, Node), none without a controller, other for any other kind. A pod created with scheduling gates starts when its last gate is removed (as received), not at its creation. Pods first seen through a list cycle are not observed (kube_convergence_pods_recovered_total). Stages not reached are counted by kube_convergence_pod_startup_threshold_exceeded_total.",
			latency.PodStartupBuckets), []string{"namespace", "owner_kind", "stage"}),
		interval: prometheus.NewHistogramVec(latency.HistogramOpts(
			"kube_convergence_pod_stage_interval_seconds",
			"Time between consecutive startup conditions of a pod, in the order they turned True: from is created or the stage reached before, to the stage reached. Measured between the exporter's receive times, so never negative; conditions that turn True in the same update are ordered by lastTransitionTime and are 0 apart.",
			latency.PodStartupBuckets), []string{"namespace", "from", "to"}),
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_pod_startup_threshold_exceeded_total",
			Help: "Pods whose age passed the threshold (seconds, formatted like the startup histogram's le) before the stage's condition turned True, counted when it happened, while the pod was still starting (not terminating, not finished). With the le bucket it makes a pod startup SLI that counts stuck pods while they are stuck. ready_to_start_containers counts only for pods whose node reports that condition.",
		}, []string{"namespace", "owner_kind", "stage", "threshold"}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_convergence_pods_recovered_total",
			Help: "Pods whose startup is not timed because its start was not received live: first delivered by a list cycle (the initial list at the exporter's start, or a relist after a watch gap), first seen by a watch event more than 10 s after its creationTimestamp (a watch resumed after a cut), or whose last scheduling gate was removed during a gap. Counted once per pod. Its increase after the start counts the pods created during watch gaps; at the start it counts the pods that existed then.",
		}, []string{"namespace"}),
		dropped: collectors.NewSeriesCap("kube_convergence_pod_stalled_series_dropped_total",
			"Stalled pods not exposed by kube_convergence_pod_stalled_seconds because the series cap (stall.seriesLimit) was reached, counted once per not-ready spell.", limit),
		notReadyDesc: prometheus.NewDesc("kube_convergence_pods_not_ready",
			"Pods not terminating, in phase Pending or Running, whose Ready condition is not True, by the most specific reason: scheduling_gated (spec.schedulingGates not empty: waiting for an admission queue), unschedulable, node_not_ready, init_failing, image_pull, crash_loop, readiness_gate (containers ready, a readiness gate not True), readiness_failing, other. Every reason is exposed, 0 included, for each namespace that had pods.",
			[]string{"namespace", "reason"}, nil),
		stalledDesc: prometheus.NewDesc("kube_convergence_pod_stalled_seconds",
			"Seconds a pod has not been ready, since its creation (or its last scheduling gate's removal; gated pods are not stalled) or since it stopped being Ready, when longer than the stall threshold (stall.perKind.Pod, else --stall.threshold); stage is the next startup condition not True, reason as in kube_convergence_pods_not_ready. One series per stalled pod, capped.",
			[]string{"namespace", "name", "stage", "reason"}, nil),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.startup, m.interval, m.exceeded, m.recovered, m.dropped.Dropped()} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe turns tracker events into metric updates.
func (c *Collector) observe(evs []tracker.PodEvent) {
	for _, e := range evs {
		ns := c.cfg.NamespaceLabelValue(e.Pod.Namespace)
		switch e.Type {
		case tracker.PodStageReached:
			ex := latency.Exemplar(e.Pod.UID, "", e.Pod.Name)
			latency.Observe(c.m.startup.WithLabelValues(ns, e.Pod.OwnerKind, string(e.Stage)), e.Duration.Seconds(), ex)
			if e.From != "" { // "": the stage before was reached in a watch gap
				latency.Observe(c.m.interval.WithLabelValues(ns, e.From, string(e.Stage)), e.Interval.Seconds(), ex)
			}
		case tracker.PodThresholdCrossed:
			c.m.exceeded.WithLabelValues(ns, e.Pod.OwnerKind, string(e.Stage), latency.Threshold(latency.PodStartupBuckets[e.Threshold])).Inc()
		case tracker.PodStartupOpened:
			// Create the series of this (namespace, owner_kind) at zero:
			// rate() cannot count a series that first appears with its
			// first increment, so the first stuck pod after a restart
			// would burn no budget. Once per pair: owner_kind has eight
			// values, so at most 8 x 5 stages x 27 thresholds per namespace.
			key := [2]string{ns, e.Pod.OwnerKind}
			if c.created[key] {
				continue
			}
			c.created[key] = true
			for _, st := range tracker.PodStages {
				c.m.startup.WithLabelValues(ns, e.Pod.OwnerKind, string(st))
				for _, b := range latency.PodStartupBuckets {
					c.m.exceeded.WithLabelValues(ns, e.Pod.OwnerKind, string(st), latency.Threshold(b))
				}
			}
		case tracker.PodRecovered:
			c.m.recovered.WithLabelValues(ns).Inc()
		}
	}
}

// deleteNamespace deletes every series of a namespace label value.
func (m *metrics) deleteNamespace(ns string) {
	l := prometheus.Labels{"namespace": ns}
	m.startup.DeletePartialMatch(l)
	m.interval.DeletePartialMatch(l)
	m.exceeded.DeletePartialMatch(l)
	m.recovered.DeletePartialMatch(l)
}

// scrape is the part of the collector computed at scrape time from the
// tracker: pods not ready, and stalled pods.
type scrape struct{ c *Collector }

func (s scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.c.m.notReadyDesc
	ch <- s.c.m.stalledDesc
}

// MetricType implements metricdoc.Typed: both scrape-time metrics are gauges.
func (s scrape) MetricType(string) string { return "gauge" }

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
