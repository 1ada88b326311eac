package tracker

import "testing"

// Gaps for endpoints. "listed" steps come from a
// list cycle; for deletions, "listed" is a delete tombstone.

// Item 6: the pod's live Ready event at +1s is handled before the initial
// replay of the slices at +1.2s, which already lists it ready (published at
// an unknown time). The pair closes without an observation: nothing at
// +1.2s, and no crossing ever after (it used to cross every threshold).
func TestPendingPairClosedByTheInitialSliceReplay(t *testing.T) {
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "not-ready", "web"), listed: true},
		{at: "1s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "1.2s", slice: slice("web-1", "web", "0s", "p1"), listed: true},
		{at: "3s"},
		{at: "1h"},
	})
	if tr.Pending() != 0 || tr.due.len() != 0 {
		t.Fatalf("pending = %d, indexed = %d, want none", tr.Pending(), tr.due.len())
	}
}

// Cut from +1s to +6s: p1 turned Ready at +2s and was published at +3s, both
// during the cut. The relist delivers the pod (Ready) at +6s and the slice at
// +6.1s: no propagation is observed, not as 0 s, not at all, and no crossing
// either. Same when the slice comes back first.
func TestTransitionsOfAGapAreNotObserved(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "not-ready", "web")},
		{at: "0.5s", slice: slice("web-1", "web", "")},
		{at: "6s", pod: served("p1", "ready", "web"), listed: true},
		{at: "6.1s", slice: slice("web-1", "web", "2s", "p1"), listed: true},
		{at: "20s"},
	})
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "not-ready", "web")},
		{at: "6s", slice: slice("web-1", "web", "2s", "p1"), listed: true},
		{at: "6.1s", pod: served("p1", "ready", "web"), listed: true},
		{at: "20s"},
	})
	// A pod created during the cut, first seen in the relist already
	// published: nothing.
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "6s", slice: slice("web-1", "web", "2s", "p2"), listed: true},
		{at: "6.1s", pod: served("p2", "ready", "web"), listed: true},
		{at: "20s"},
	})
}

// A published pod stopped serving during a cut: the relist shows it not
// Ready and the slice without it. No removal is observed. Then live again:
// its next Ready is timed.
func TestRemovalDuringAGapIsNotObserved(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "0.2s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 200ms"}},
		{at: "6s", pod: served("p1", "not-ready", "web"), listed: true},
		{at: "6.1s", slice: slice("web-1", "web", "3s"), listed: true},
		{at: "10s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "10.4s", slice: slice("web-1", "web", "10s", "p1"), want: []string{"lag web-1 400ms", "propagated web/p1 400ms"}},
	})
	// Deleted during the cut (tombstones for the pod and the slice).
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "0.2s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 200ms"}},
		{at: "6s", delPod: "p1", listed: true},
		{at: "6.1s", delSlice: "web-1", listed: true},
	})
	if tr.Tracked("p1") {
		t.Fatal("pod deleted during a gap still tracked")
	}
}

// A pending pair whose pod was deleted during a gap: no crossing flushed at
// the tombstone, and the pair leaves the deadline index.
func TestPendingPairDeletedDuringAGap(t *testing.T) {
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "1.5s", want: []string{"crossed web/p1 >1"}},
		{at: "10s", delPod: "p1", listed: true},
		{at: "20s"},
	})
	if tr.due.len() != 0 {
		t.Fatalf("%d pairs left in the deadline index", tr.due.len())
	}
}

// Receive times out of order: the slice publishing p1 was received at +0.9s
// but handled after a Tick at +1.1s counted the 1 s crossing: timed at the
// crossing, so counted bad for 1 s once and not also good.
func TestPublicationReceivedBeforeATickThatCrossedIsClamped(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "1.1s", want: []string{"crossed web/p1 >1"}},
		{at: "0.9s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 1.1s"}},
	})
}

// A Service created during a gap selects a Ready pod: the pod is re-observed
// with the Service's list mark, so the new pair is not due (when the Service
// began selecting is unknown), whether its slice comes listed or live. A
// Service created live afterwards is timed.
func TestServiceCreatedDuringAGapIsNotTimed(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "a"), want: []string{"due a/p1"}},
		{at: "0.1s", slice: slice("a-1", "a", "", "p1"), want: []string{"propagated a/p1 100ms"}},
		{at: "6s", pod: served("p1", "ready", "a", "b"), listed: true},
		{at: "6.2s", slice: slice("b-1", "b", "", "p1")},
		{at: "20s"},
		{at: "30s", pod: served("p1", "ready", "a", "b", "c"), want: []string{"due c/p1"}},
		{at: "30.05s", slice: slice("c-1", "c", "", "p1"), want: []string{"propagated c/p1 50ms"}},
	})
}
