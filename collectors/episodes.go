package collectors

import (
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// EpisodeSource is a collector that feeds Episodes: at scrape time it
// reports its open episodes and those past their stall threshold (as
// tracker.RolloutTracker's Open and Stalled do), taking its own lock.
type EpisodeSource interface {
	Episodes(now time.Time) (open []tracker.Episode, stalled []tracker.Stall)
}

// EpisodeSink receives every rollout and custom-resource episode event
// after the metrics were updated: the timeline store and the tracer. The
// feeding collector's Outbox calls it after releasing the collector's
// lock, with one collector's events in the order it produced them and
// never two of its batches at once (another collector's may overlap). It
// must not call back into a collector.
type EpisodeSink interface {
	ObserveEpisodes(evs []tracker.Event)
}

// Episodes is the one set of rollout episode metric families
// (kube_convergence_rollout_*, kube_convergence_rollouts_*) that every
// collector timing spec write -> convergence episodes feeds: rollouts for
// Deployments, StatefulSets and DaemonSets, resources for custom resources.
// Their kind label tells them apart. It is registered once, however many
// collectors feed it, so that a second feeder adds series, not families.
type Episodes struct {
	cfg *config.Config
	now func() time.Time

	// Duration is the rollout SLI (live episodes), with its crossing
	// counter Duration.Exceeded; RecoveredDuration times the episodes the
	// exporter did not see start.
	Duration          *latency.Series
	RecoveredDuration *latency.Series
	Closed            *prometheus.CounterVec
	Recovered         *prometheus.CounterVec

	inProgressDesc *prometheus.Desc
	stalledDesc    *prometheus.Desc

	mu         sync.Mutex
	sources    []EpisodeSource
	sinks      []EpisodeSink
	traceIDs   func(uid string, generation int64) string
	registered map[prometheus.Registerer]bool
	inProgress *ZeroKept[[2]string]
	stalled    *SeriesCap
}

// The episode families besides the rollout SLI (latency.RolloutDuration).
// Their detail is in docs/metrics.md.
var (
	rolloutRecoveredDuration = latency.Histogram{
		Name:    "kube_convergence_rollout_recovered_duration_seconds",
		Help:    "Time from the API-side spec write until a stage still ahead was reached, for rollouts found in flight at the start or after a watch gap.",
		Labels:  latency.RolloutDuration.Labels,
		Buckets: latency.RolloutBuckets,
	}
	rolloutsClosed = metric.Family{
		Name: "kube_convergence_rollouts_total", Type: metric.Counter,
		Help:   "Rollout episodes, one per object generation, that ended, by outcome.",
		Labels: []string{"kind", "namespace", "change", "outcome"},
	}
	rolloutsRecovered = metric.Family{
		Name: "kube_convergence_rollouts_recovered_total", Type: metric.Counter,
		Help:   "Rollout episodes found in flight when the exporter started or after a watch gap.",
		Labels: []string{"kind"},
	}
	rolloutsInProgress = metric.Family{
		Name: "kube_convergence_rollouts_in_progress", Type: metric.Gauge,
		Help:   "Rollout episodes open now: written, not yet converged or otherwise closed.",
		Labels: []string{"kind", "namespace"},
	}
	rolloutStalled = metric.Family{
		Name: "kube_convergence_rollout_stalled_seconds", Type: metric.Gauge,
		Help:   "Seconds since the spec write of each rollout older than the stall threshold, by the next stage not reached and why; capped.",
		Labels: []string{"kind", "namespace", "name", "stage", "reason"},
	}
	rolloutStalledDropped = metric.Family{
		Name: "kube_convergence_rollout_stalled_series_dropped_total", Type: metric.Counter,
		Help: "Stalled rollouts left out of kube_convergence_rollout_stalled_seconds by stall.seriesLimit, counted once per episode.",
	}
)

// NewEpisodes returns the episode metrics; cfg gives the namespace label
// policy and stall.seriesLimit. now is the scrape clock.
func NewEpisodes(cfg *config.Config, now func() time.Time) *Episodes {
	if now == nil {
		now = time.Now
	}
	return &Episodes{
		cfg:               cfg,
		now:               now,
		Duration:          latency.NewSeries(Classic(cfg, latency.RolloutDuration)),
		RecoveredDuration: latency.NewSeries(Classic(cfg, rolloutRecoveredDuration)),
		Closed:            rolloutsClosed.NewCounterVec(),
		Recovered:         rolloutsRecovered.NewCounterVec(),
		inProgressDesc:    rolloutsInProgress.Desc(),
		stalledDesc:       rolloutStalled.Desc(),
		registered:        map[prometheus.Registerer]bool{},
		inProgress:        NewZeroKept[[2]string](),
		stalled:           NewSeriesCap(rolloutStalledDropped, cfg.Stall.SeriesLimit),
	}
}

// Feed adds a source of open and stalled episodes, read at every scrape.
func (e *Episodes) Feed(s EpisodeSource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sources = append(e.sources, s)
}

// AddSink adds a receiver of every episode event, which the feeders'
// Outboxes deliver.
func (e *Episodes) AddSink(s EpisodeSink) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sinks = append(e.sinks, s)
}

func (e *Episodes) episodeSinks() []EpisodeSink {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sinks
}

// SetTraceIDs makes the duration exemplars carry the episode's trace id,
// as f gives it ("" for none): set when tracing is on, so that an
// exemplar leads to the trace of its episode. Only episode exemplars carry
// one: rollouts and custom resources are the episodes that have traces.
func (e *Episodes) SetTraceIDs(f func(uid string, generation int64) string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.traceIDs = f
}

// Register registers the families on reg once: every feeder calls it from
// its own Register, and calls after the first on the same reg do nothing.
// kinds are the feeder's kinds known in advance, whose recovered counter
// starts at 0.
func (e *Episodes) Register(reg prometheus.Registerer, kinds ...tracker.Kind) error {
	e.mu.Lock()
	first := !e.registered[reg]
	e.registered[reg] = true
	e.mu.Unlock()
	if first {
		cs := append(e.Duration.Collectors(), e.RecoveredDuration.Collectors()...)
		cs = append(cs, metric.Declare(e.Closed, rolloutsClosed), metric.Declare(e.Recovered, rolloutsRecovered), e.stalled.Dropped(), episodesScrape{e})
		if err := metric.Register(reg, cs...); err != nil {
			return err
		}
	}
	for _, k := range kinds {
		e.Recovered.WithLabelValues(string(k))
	}
	return nil
}

// Observe turns tracker events into metric updates; the feeder's Outbox
// (Outbox.Observe) calls it and delivers the events to the sinks. logger
// says which collector recovered an episode.
func (e *Episodes) Observe(evs []tracker.Event, logger *slog.Logger) {
	if len(evs) == 0 {
		return
	}
	e.mu.Lock()
	traceIDs := e.traceIDs
	e.mu.Unlock()
	for _, ev := range evs {
		ep := ev.Episode
		ns := e.cfg.NamespaceLabelValue(ep.Namespace)
		switch ev.Type {
		case tracker.StageReached:
			s := e.Duration
			if ep.Recovered {
				s = e.RecoveredDuration
			}
			traceID := ""
			if traceIDs != nil {
				traceID = traceIDs(ep.UID, ep.Generation)
			}
			s.Observe(ev.Duration.Seconds(), latency.TracedExemplar(ep.UID, strconv.FormatInt(ep.Generation, 10), traceID, ep.Name),
				string(ep.Kind), ns, string(ev.Stage), string(ep.Change))
		case tracker.ThresholdCrossed:
			e.Duration.Cross(ev.Threshold, string(ep.Kind), ns, string(ev.Stage), string(ep.Change))
		case tracker.EpisodeClosed:
			e.Closed.WithLabelValues(string(ep.Kind), ns, string(ep.Change), string(ev.Outcome)).Inc()
			e.mu.Lock()
			e.stalled.Forget(ep.UID)
			e.mu.Unlock()
		case tracker.EpisodeOpened:
			e.Closed.WithLabelValues(string(ep.Kind), ns, string(ep.Change), string(tracker.OutcomeConverged))
			if ep.Recovered {
				break // no crossings, and its durations go to the recovered family
			}
			for _, st := range tracker.Stages(ep.Kind) {
				e.Duration.Open(string(ep.Kind), ns, string(st), string(ep.Change))
			}
		case tracker.EpisodeRecovered:
			e.Recovered.WithLabelValues(string(ep.Kind)).Inc()
			logger.Info("recovered a rollout in flight", "kind", ep.Kind, "namespace", ep.Namespace, "name", ep.Name, "generation", ep.Generation, "since", ep.Start)
		}
	}
}

// ForgetNamespace deletes the series of a deleted namespace, so that
// cardinality does not grow with every namespace a cluster ever had. A
// namespace folded into another label value (namespaceLabel allowlist or
// drop) shares its series with others, which stay.
func (e *Episodes) ForgetNamespace(namespace string) {
	ns := e.cfg.NamespaceLabelValue(namespace)
	if ns != namespace {
		return
	}
	e.Duration.ForgetNamespace(ns)
	e.RecoveredDuration.ForgetNamespace(ns)
	e.Closed.DeletePartialMatch(prometheus.Labels{"namespace": ns})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inProgress.Forget(func(k [2]string) bool { return k[1] == ns })
}

// episodesScrape is the part computed at scrape time from the sources:
// open and stalled episodes.
type episodesScrape struct{ e *Episodes }

func (s episodesScrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.e.inProgressDesc
	ch <- s.e.stalledDesc
}

// Families implements metric.Declared.
func (s episodesScrape) Families() []metric.Family {
	return []metric.Family{rolloutsInProgress, rolloutStalled}
}

func (s episodesScrape) Collect(ch chan<- prometheus.Metric) {
	e := s.e
	now := e.now()
	e.mu.Lock()
	sources := append([]EpisodeSource(nil), e.sources...)
	e.mu.Unlock()
	// Sources are read without e.mu: they take their own lock, which their
	// event handlers hold while they call Observe (which takes e.mu). The
	// sinks are called under neither (Outbox).
	open := map[[2]string]int{}
	var stalled []tracker.Stall
	for _, src := range sources {
		o, st := src.Episodes(now)
		for _, ep := range o {
			open[[2]string{string(ep.Kind), e.cfg.NamespaceLabelValue(ep.Namespace)}]++
		}
		stalled = append(stalled, st...)
	}
	sort.SliceStable(stalled, func(i, j int) bool {
		if stalled[i].Age != stalled[j].Age {
			return stalled[i].Age > stalled[j].Age
		}
		return stalled[i].Episode.UID < stalled[j].Episode.UID
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	counts := e.inProgress.Counts(open)
	keys := make([][2]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(e.inProgressDesc, prometheus.GaugeValue, float64(counts[k]), k[0], k[1])
	}
	for i, st := range stalled {
		ep := st.Episode
		if !e.stalled.Admit(i, ep.UID) {
			continue
		}
		// The per-object series carries the real namespace: it exists to
		// name the object, and the cap bounds its cardinality.
		ch <- prometheus.MustNewConstMetric(e.stalledDesc, prometheus.GaugeValue, st.Age.Seconds(),
			string(ep.Kind), ep.Namespace, ep.Name, string(st.Stage), st.Reason)
	}
}

// Classic is h with the classic buckets of cfg's histograms section.
func Classic(cfg *config.Config, h latency.Histogram) latency.Histogram {
	return h.WithBuckets(cfg.Buckets(h.Name, h.Buckets))
}
