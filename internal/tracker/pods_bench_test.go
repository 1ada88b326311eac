package tracker

import (
	"fmt"
	"testing"
	"time"
)

// 20,000 tracked pods, the scale target: 19,900 settled (seen Ready) and 100
// starting, created at t0. Tick runs at t0+0.05s, before the first threshold
// (0.1 s): nothing is due.
func benchPodTracker() *PodTracker {
	tr := NewPodTracker(PodStartupConfig{Thresholds: podThresholds, StallAfter: time.Minute})
	ready := startingPod("scheduled@0s", "initialized@0s", "containers_ready@0s", "ready@0s")
	for i := range 19900 {
		p := ready
		p.UID = fmt.Sprint("settled-", i)
		tr.Observe(p, LiveAt(t0))
	}
	for i := range 100 {
		p := startingPod()
		p.UID = fmt.Sprint("starting-", i)
		tr.Observe(p, LiveAt(t0))
	}
	return tr
}

// BenchmarkPodTick: the once-a-second threshold check with nothing due.
func BenchmarkPodTick(b *testing.B) {
	tr := benchPodTracker()
	now := t0.Add(50 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr.Tick(now)
	}
}

// 20,000 pods each selected by one Service: 19,900 published, 100 Ready and
// pending since t0. Tick at t0+0.5s: before the first threshold (1 s).
func benchEndpointTracker() *EndpointTracker {
	tr := NewEndpointTracker(EndpointConfig{Thresholds: endpointThresholds})
	var published []string
	for i := range 19900 {
		published = append(published, fmt.Sprint("settled-", i))
	}
	tr.ObserveSlice(*slice("web-1", "web", "", published...), LiveAt(t0))
	for _, uid := range published {
		tr.ObservePod(*served(uid, "ready", "web"), LiveAt(t0))
	}
	for i := range 100 {
		tr.ObservePod(*served(fmt.Sprint("pending-", i), "ready", "web"), LiveAt(t0))
	}
	return tr
}

// BenchmarkEndpointTick: the once-a-second threshold check with nothing due.
func BenchmarkEndpointTick(b *testing.B) {
	tr := benchEndpointTracker()
	now := t0.Add(500 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr.Tick(now)
	}
}
