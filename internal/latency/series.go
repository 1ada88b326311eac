package latency

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// Series is the one implementation of a latency histogram's lifecycle, as
// every collector that times something needs it: its series exist at zero
// from the moment an episode, a startup or a pair opens (Open), an
// observation carries its exemplar (Observe), a threshold crossing the
// tracker reports once is counted once (Cross), and a deleted namespace's
// series go (ForgetNamespace).
//
// It embeds the histogram, so that tests and scrape code read it as the
// client_golang family it is; Exceeded is the crossing counter (nil when
// the declaration is not an SLI). Observe and Cross take no lock and do
// not allocate beyond client_golang's own work; Open and ForgetNamespace
// take the Series' lock, so that collectors feeding one Series (rollouts
// and custom resources feed RolloutDuration) need no lock of their own.
type Series struct {
	*prometheus.HistogramVec
	Exceeded *prometheus.CounterVec

	decl       Histogram
	thresholds []string // the threshold label of each bucket, formatted once
	namespace  int      // index of the namespace label, -1 without one

	mu sync.Mutex
	// opened holds the label values (joined by keySep) whose series exist
	// at zero, with their namespace value: opening them again is one map
	// lookup instead of a WithLabelValues per stage and threshold (72 for
	// a Deployment: 4 stages, 17 buckets; 140 for a pod: 5 stages, 27
	// buckets), and a deleted namespace forgets them.
	opened map[string]string
}

// keySep joins label values into a key of opened: a byte that is not
// valid UTF-8, so it is in no label value.
const keySep = '\xff'

// maxLabels is the room on the stack for a crossing counter's label
// values: the most labels an SLI has (4, rollouts) plus the threshold.
const maxLabels = 8

// NewSeries builds the histogram and, for an SLI, its crossing counter.
func NewSeries(h Histogram) *Series {
	s := &Series{
		HistogramVec: h.Family().NewHistogramVec(BucketOpts(h.Buckets)),
		decl:         h,
		namespace:    slices.Index(h.LabelNames(), "namespace"),
		opened:       map[string]string{},
	}
	if h.SLI() {
		s.Exceeded = h.ExceededFamily().NewCounterVec()
		s.thresholds = make([]string, len(h.Buckets))
		for i, b := range h.Buckets {
			s.thresholds[i] = Threshold(b)
		}
	}
	return s
}

// Buckets are the classic buckets: the thresholds a tracker feeding Cross
// must be configured with.
func (s *Series) Buckets() []float64 { return s.decl.Buckets }

// Collectors are the histogram and the crossing counter with their
// declarations, to register.
func (s *Series) Collectors() []metric.Declared {
	out := []metric.Declared{metric.Declare(s.HistogramVec, s.decl.Family())}
	if s.Exceeded != nil {
		out = append(out, metric.Declare(s.Exceeded, s.decl.ExceededFamily()))
	}
	return out
}

// Register registers the histogram and the crossing counter on reg.
func (s *Series) Register(reg prometheus.Registerer) error {
	return metric.Register(reg, s.Collectors()...)
}

// Open creates at zero the histogram series of the label values lvs (in
// the declaration's order) and, for an SLI, their crossing counter at every
// threshold: Prometheus' rate() cannot count a series that first appears
// with its first increment, so without it the first stuck object after a
// restart would burn no error budget. Opening label values again does
// nothing until their namespace is forgotten.
func (s *Series) Open(lvs ...string) {
	var buf [128]byte
	k := buf[:0]
	for i, v := range lvs {
		if i > 0 {
			k = append(k, keySep)
		}
		k = append(k, v...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.opened[string(k)]; ok {
		return
	}
	ns := ""
	if s.namespace >= 0 && s.namespace < len(lvs) {
		ns = lvs[s.namespace]
	}
	s.opened[string(k)] = ns
	s.WithLabelValues(lvs...)
	if s.Exceeded == nil {
		return
	}
	var l [maxLabels]string
	withThreshold := append(l[:0], lvs...)
	for _, t := range s.thresholds {
		s.Exceeded.WithLabelValues(append(withThreshold, t)...)
	}
}

// Observe records v seconds on the series of lvs with its exemplar (nil
// for none).
func (s *Series) Observe(v float64, exemplar prometheus.Labels, lvs ...string) {
	Observe(s.WithLabelValues(lvs...), v, exemplar)
}

// Cross counts a crossing of the threshold-th bucket boundary by an
// episode of lvs that had not reached its stage: threshold is an index in
// the declaration's Buckets, which is why the collectors configure their
// tracker with those Buckets. The tracker reports each crossing once; this
// counts what it reports.
func (s *Series) Cross(threshold int, lvs ...string) {
	var l [maxLabels]string
	s.Exceeded.WithLabelValues(append(append(l[:0], lvs...), s.thresholds[threshold])...).Inc()
}

// ForgetNamespace deletes every series whose namespace label is ns, so
// that cardinality follows the namespaces that exist; its label values
// open again at zero when something opens in it.
func (s *Series) ForgetNamespace(ns string) {
	if s.namespace < 0 {
		return
	}
	match := prometheus.Labels{"namespace": ns}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.DeletePartialMatch(match)
	if s.Exceeded != nil {
		s.Exceeded.DeletePartialMatch(match)
	}
	for k, v := range s.opened {
		if v == ns {
			delete(s.opened, k)
		}
	}
}
