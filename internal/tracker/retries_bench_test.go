package tracker

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchRetryTracker holds 10,000 Warning Events on 5,000 objects under 50
// reasons, as after a bad rollout across a large cluster.
func benchRetryTracker() (*RetryTracker, []Warning) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	ws := make([]Warning, 10000)
	for i := range ws {
		ws[i] = Warning{
			UID:        fmt.Sprint("event-", i),
			Controller: "replicaset-controller",
			Reason:     fmt.Sprint("Reason", i%50),
			Kind:       "ReplicaSet",
			Object:     fmt.Sprint("rs-", i/2),
			Count:      1,
			Legacy:     true,
		}
		tr.Observe(ws[i], LiveAt(r0))
	}
	return tr, ws
}

// BenchmarkRetryObserve: one live Warning update whose count grew by one
// (counted, interval observed), round-robin over 10,000 Events.
func BenchmarkRetryObserve(b *testing.B) {
	tr, ws := benchRetryTracker()
	at := r0
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := &ws[i%len(ws)]
		w.Count++
		at = at.Add(time.Millisecond)
		tr.Observe(*w, LiveAt(at))
		i++
	}
}

// BenchmarkRetryMemory: heap kept per tracked Event UID (with its object),
// for docs/benchmarks.md.
func BenchmarkRetryMemory(b *testing.B) {
	const n = 10000
	uids := make([]string, n)
	objs := make([]string, n)
	for i := range uids {
		uids[i] = fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		objs[i] = fmt.Sprintf("%08d-1111-0000-0000-000000000000", i)
	}
	var perEvent float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
		for i := range n {
			tr.Observe(Warning{UID: uids[i], Controller: "replicaset-controller", Reason: "FailedCreate", Kind: "ReplicaSet", Object: objs[i], Count: 1}, LiveAt(r0))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEvent = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(perEvent, "B/event")
}
