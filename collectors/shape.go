package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// The two pieces of metric shape every tracking collector repeats. They are
// not safe for concurrent use: the caller holds the lock it already takes
// for its tracker or its scrape.

// SeriesCap caps a per-object gauge (one series per stalled or stuck object)
// at stall.seriesLimit series, and counts the objects it leaves out in a
// <gauge>_series_dropped_total counter, once per key (an episode, a
// not-ready spell) however many scrapes leave it out.
type SeriesCap struct {
	limit   int
	dropped prometheus.Counter
	family  metric.Family
	keys    map[string]bool
}

// NewSeriesCap returns a cap of limit series whose dropped counter is
// dropped, a counter family without labels.
func NewSeriesCap(dropped metric.Family, limit int) *SeriesCap {
	return &SeriesCap{
		limit:   limit,
		dropped: dropped.NewCounter(),
		family:  dropped,
		keys:    map[string]bool{},
	}
}

// Dropped is the counter to register.
func (s *SeriesCap) Dropped() metric.Declared { return metric.Declare(s.dropped, s.family) }

// Admit reports whether the i-th series of this scrape (0-based, in the
// order of importance: oldest first) is exposed; a key left out is counted
// the first time.
func (s *SeriesCap) Admit(i int, key string) bool {
	if i < s.limit {
		return true
	}
	if !s.keys[key] {
		s.keys[key] = true
		s.dropped.Inc()
	}
	return false
}

// Forget ends key (its episode or spell closed): left out again later, it
// counts again.
func (s *SeriesCap) Forget(key string) { delete(s.keys, key) }

// Retain forgets every counted key that is not alive: for per-object series
// whose end the collector learns only at scrape time (a pod's not-ready
// spell ends when it turns Ready).
func (s *SeriesCap) Retain(alive map[string]bool) {
	for k := range s.keys {
		if !alive[k] {
			delete(s.keys, k)
		}
	}
}

// ZeroKept keeps the label sets an aggregate gauge has exposed, so that a
// count that falls to zero is exposed as 0 instead of vanishing (a vanished
// series reads as "no data", not as "none", in alerts and sums).
type ZeroKept[K comparable] struct{ seen map[K]bool }

// NewZeroKept returns an empty set.
func NewZeroKept[K comparable]() *ZeroKept[K] { return &ZeroKept[K]{seen: map[K]bool{}} }

// Counts returns counts completed with 0 for every key seen before, and
// remembers the keys of counts.
func (z *ZeroKept[K]) Counts(counts map[K]int) map[K]int {
	out := make(map[K]int, len(z.seen)+len(counts))
	for k := range z.seen {
		out[k] = 0
	}
	for k, n := range counts {
		out[k] = n
		z.seen[k] = true
	}
	return out
}

// Forget drops the keys match selects (a deleted namespace's).
func (z *ZeroKept[K]) Forget(match func(K) bool) {
	for k := range z.seen {
		if match(k) {
			delete(z.seen, k)
		}
	}
}
