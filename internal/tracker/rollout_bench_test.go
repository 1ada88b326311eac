package tracker

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRolloutObserve: one workload status update through the tracker,
// for a cluster with 10,000 settled workloads and 100 open episodes.
func BenchmarkRolloutObserve(b *testing.B) {
	tr := NewRolloutTracker(RolloutConfig{Thresholds: thresholds})
	for i := range 10000 {
		w := deploy(1, 1, 3, 3, 3)
		w.UID = fmt.Sprint("settled-", i)
		tr.Observe(w, ListedAt(t0))
	}
	for i := range 100 {
		w := deploy(1, 0, 3, 0, 0)
		w.UID = fmt.Sprint("open-", i)
		tr.Observe(w, LiveAt(t0))
	}
	w := deploy(1, 1, 3, 1, 0)
	w.UID = "open-0"
	now := t0.Add(time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr.Observe(w, LiveAt(now))
	}
}

// BenchmarkRolloutTick: the once-a-second threshold check over 100 open
// episodes among 10,000 workloads.
func BenchmarkRolloutTick(b *testing.B) {
	tr := NewRolloutTracker(RolloutConfig{Thresholds: thresholds})
	for i := range 10000 {
		w := deploy(1, 1, 3, 3, 3)
		w.UID = fmt.Sprint("settled-", i)
		tr.Observe(w, ListedAt(t0))
	}
	for i := range 100 {
		w := deploy(1, 0, 3, 0, 0)
		w.UID = fmt.Sprint("open-", i)
		tr.Observe(w, LiveAt(t0))
	}
	now := t0.Add(2 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr.Tick(now)
	}
}
