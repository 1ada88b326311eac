package tracker

import (
	"fmt"
	"strings"
	"testing"
)

// Endpoint timelines: at each step the tracker sees a pod or an
// EndpointSlice (or their deletion, or a tick) and emits events, shown as
// short strings:
//
//	"propagated web/p1 2s"     p1 became a ready endpoint of Service web, 2 s after it was due
//	"crossed web/p1 >1"        ... was still not one when 1 s passed
//	"removed web/p1 2s"        p1 stopped being one, 2 s after it stopped serving
//	"lag web-1 2.5s"           slice web-1 arrived 2.5 s after its trigger time
var endpointThresholds = []float64{1, 2, 5}

func formatEndpoints(evs []EndpointEvent) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		switch e.Type {
		case EndpointPropagated:
			out = append(out, fmt.Sprintf("propagated %s/%s %v", e.Service, e.PodUID, e.Duration))
		case EndpointPropagationCrossed:
			out = append(out, fmt.Sprintf("crossed %s/%s >%g", e.Service, e.PodUID, endpointThresholds[e.Threshold]))
		case EndpointRemoved:
			out = append(out, fmt.Sprintf("removed %s/%s %v", e.Service, e.PodUID, e.Duration))
		case EndpointTriggerLag:
			out = append(out, fmt.Sprintf("lag %s %v", e.Slice, e.Duration))
		case EndpointPairDue:
			out = append(out, fmt.Sprintf("due %s/%s", e.Service, e.PodUID))
		}
	}
	return out
}

// pod states: "ready", "not-ready", "terminating".
func served(uid, state string, services ...string) *ServedPod {
	return &ServedPod{UID: uid, Namespace: "ns", Name: "pod-" + uid, Ready: state == "ready" || state == "terminating",
		Terminating: state == "terminating", Services: services}
}

// slice builds slice `name` of Service svc listing ready pods; trigger is an
// offset from t0 ("" for none).
func slice(name, svc, trigger string, ready ...string) *Slice {
	s := &Slice{UID: name, Namespace: "ns", Name: name, Service: svc, Ready: ready}
	if trigger != "" {
		s.TriggerTime = at(trigger)
	}
	return s
}

type epStep struct {
	at       string
	pod      *ServedPod
	slice    *Slice
	delPod   string
	delSlice string
	listed   bool // delivered by a list cycle; for a deletion, a tombstone
	want     []string
}

func runEndpoints(t *testing.T, tr *EndpointTracker, steps []epStep) {
	t.Helper()
	for i, s := range steps {
		now := at(s.at)
		var evs []EndpointEvent
		switch {
		case s.pod != nil:
			evs = tr.ObservePod(*s.pod, Seen{At: now, Live: !s.listed})
		case s.slice != nil:
			evs = tr.ObserveSlice(*s.slice, Seen{At: now, Live: !s.listed})
		case s.delPod != "":
			evs = tr.DeletePod(s.delPod, Seen{At: now, Live: !s.listed})
		case s.delSlice != "":
			evs = tr.DeleteSlice(s.delSlice, Seen{At: now, Live: !s.listed})
		default:
			evs = tr.Tick(now)
		}
		if got, want := strings.Join(formatEndpoints(evs), "; "), strings.Join(s.want, "; "); got != want {
			t.Errorf("step %d at +%s:\n got: %s\nwant: %s", i, s.at, got, want)
		}
	}
}

func newEndpointTracker() *EndpointTracker {
	return NewEndpointTracker(EndpointConfig{Thresholds: endpointThresholds})
}

// The EndpointSlice controller batches pod-triggered updates (2 s on the
// sandbox): Ready at 3 s is published at 5 s; terminating at 10 s is
// dropped at 12 s.
func TestPropagationAndRemoval(t *testing.T) {
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "not-ready", "web")},
		{at: "2s", slice: slice("web-1", "web", "0s"), want: []string{"lag web-1 2s"}},
		{at: "3s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "4.5s", want: []string{"crossed web/p1 >1"}},
		{at: "5s", slice: slice("web-1", "web", "3s", "p1"), want: []string{"lag web-1 2s", "propagated web/p1 2s"}},
		{at: "6s"}, // published: nothing more to cross
		{at: "10s", pod: served("p1", "terminating", "web")},
		{at: "12s", slice: slice("web-1", "web", "10s"), want: []string{"lag web-1 2s", "removed web/p1 2s"}},
		{at: "13s", delPod: "p1"},
	})
	if tr.Tracked("p1") || tr.Pending() != 0 {
		t.Fatalf("state left after the pod went away")
	}
}

// Events out of order: pods and slices come on separate watches, so the
// slice update may arrive before the pod update that caused it. The pair
// then counts 0, never negative, both ways.
func TestSliceUpdateBeforePodUpdateCountsZero(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "not-ready", "web")},
		{at: "2.9s", slice: slice("web-1", "web", "", "p1")},
		{at: "3s", pod: served("p1", "ready", "web"), want: []string{"propagated web/p1 0s"}},
		{at: "9.9s", slice: slice("web-1", "web", "")},
		{at: "10s", pod: served("p1", "not-ready", "web"), want: []string{"removed web/p1 0s"}},
		// Ready again: a new propagation.
		{at: "20s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "20.5s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 500ms"}},
	})
}

// A pod in several Services: one observation per (pod, Service), each when
// that Service's slice publishes it; a slice update that changes nothing
// observes nothing.
func TestPodInSeveralServices(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "not-ready", "a", "b")},
		{at: "1s", pod: served("p1", "ready", "a", "b"), want: []string{"due a/p1", "due b/p1"}},
		{at: "1.5s", slice: slice("a-1", "a", "", "p1"), want: []string{"propagated a/p1 500ms"}},
		{at: "2.5s", want: []string{"crossed b/p1 >1"}},
		{at: "3s", slice: slice("b-1", "b", "", "p1"), want: []string{"propagated b/p1 2s"}},
		{at: "4s", slice: slice("a-1", "a", "", "p1")},
		{at: "5s", pod: served("p1", "terminating", "a", "b")},
		{at: "6s", slice: slice("b-1", "b", ""), want: []string{"removed b/p1 1s"}},
		{at: "7s", slice: slice("a-1", "a", ""), want: []string{"removed a/p1 2s"}},
	})
}

// A Service created after its pods: the pods were Ready long before; they
// are due from the moment the Service selects them (its receive time).
func TestServiceCreatedAfterItsPods(t *testing.T) {
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "not-ready")}, // no Service: not tracked
		{at: "3s", pod: served("p1", "ready")},
		{at: "10s", pod: served("p1", "ready", "late"), want: []string{"due late/p1"}},
		{at: "10.05s", slice: slice("late-1", "late", "", "p1"), want: []string{"propagated late/p1 50ms"}},
	})
	tr2 := newEndpointTracker()
	tr2.ObservePod(*served("p1", "ready"), LiveAt(at("0s")))
	if tr2.Tracked("p1") {
		t.Fatal("a pod selected by no Service is tracked")
	}
}

// A selector change: the pod leaves Service a before a publishes it (the
// time it waited counts as crossings), and joins Service b.
func TestSelectorChange(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "a"), want: []string{"due a/p1"}},
		{at: "1.5s", pod: served("p1", "ready", "b"), want: []string{"crossed a/p1 >1", "due b/p1"}},
		{at: "1.6s", slice: slice("a-1", "a", "")}, // a's slice drops it: a is no longer its Service
		{at: "1.8s", slice: slice("b-1", "b", "", "p1"), want: []string{"propagated b/p1 300ms"}},
		{at: "2s", pod: served("p1", "ready")},
		{at: "2.1s", slice: slice("b-1", "b", "")}, // no removal: not a readiness change
		{at: "10s"},
	})
}

// Several slices per Service: publication is the union of the slices; an
// endpoint moving between slices is neither removed nor propagated.
func TestSeveralSlicesPerService(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "0s", pod: served("p2", "not-ready", "web")},
		{at: "0.5s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 500ms"}},
		{at: "1s", slice: slice("web-2", "web", "", "p1")},
		{at: "1.1s", slice: slice("web-1", "web", "")},
		{at: "2s", pod: served("p2", "ready", "web"), want: []string{"due web/p2"}},
		{at: "2.2s", slice: slice("web-2", "web", "", "p1", "p2"), want: []string{"propagated web/p2 200ms"}},
		{at: "3s", pod: served("p1", "terminating", "web")},
		{at: "3.5s", delSlice: "web-1"},
		{at: "4s", delSlice: "web-2", want: []string{"removed web/p1 1s"}},
	})
}

// A Ready pod never published counts against every threshold while stuck;
// its deletion flushes the crossings since the last tick.
func TestNeverPublishedCountsWhileStuck(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "1.5s", want: []string{"crossed web/p1 >1"}},
		{at: "6s", delPod: "p1", want: []string{"crossed web/p1 >2", "crossed web/p1 >5"}},
	})
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "2.5s", pod: served("p1", "not-ready", "web"), want: []string{"crossed web/p1 >1", "crossed web/p1 >2"}},
		{at: "10s"}, // not serving: not due any more
		{at: "11s", slice: slice("web-1", "web", "", "p1")},
	})
}

// Force deletion (no terminating phase): removal from the deletion until the
// slices drop the pod, then the tracker forgets it.
func TestDeletedWhileServing(t *testing.T) {
	tr := newEndpointTracker()
	runEndpoints(t, tr, []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), listed: true},
		{at: "0s", slice: slice("web-1", "web", "-1h", "p1"), listed: true},
		{at: "5s", delPod: "p1"},
		{at: "7s", slice: slice("web-1", "web", "5s"), want: []string{"lag web-1 2s", "removed web/p1 2s"}},
	})
	if tr.Tracked("p1") {
		t.Fatal("deleted pod still tracked after its removal")
	}
}

// The initial list is settled state: nothing is observed from it, not even a
// pod Ready but not yet published (when it became due is unknown); a live
// change of an initial pod is.
func TestEndpointsInitialListNotObserved(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), listed: true},
		{at: "0s", pod: served("p2", "ready", "web"), listed: true},
		{at: "0s", slice: slice("web-1", "web", "-10s", "p1"), listed: true},
		{at: "5s"},
		{at: "6s", slice: slice("web-1", "web", "-10s", "p1", "p2")}, // same trigger time: no new lag
		{at: "7s", pod: served("p1", "terminating", "web")},
		{at: "9s", slice: slice("web-1", "web", "7s", "p2"), want: []string{"lag web-1 2s", "removed web/p1 2s"}},
	})
}

// Readiness lost and regained within the controller's batch period: the
// slice never dropped the pod, so nothing was removed, and the pod is
// already published when it is due again.
func TestReadinessFlapWithinTheBatchPeriod(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "0s", pod: served("p1", "ready", "web"), want: []string{"due web/p1"}},
		{at: "0.1s", slice: slice("web-1", "web", "", "p1"), want: []string{"propagated web/p1 100ms"}},
		{at: "5s", pod: served("p1", "not-ready", "web")},
		{at: "5.5s", pod: served("p1", "ready", "web"), want: []string{"propagated web/p1 0s"}},
		{at: "9s", slice: slice("web-1", "web", "", "p1")},
	})
}

// The trigger time is the node's, truncated to the second: a clock ahead of
// the exporter's reads negative, observed as 0.
func TestTriggerLagNeverNegative(t *testing.T) {
	runEndpoints(t, newEndpointTracker(), []epStep{
		{at: "1s", slice: slice("web-1", "web", "3s"), want: []string{"lag web-1 0s"}},
	})
}

func TestEndpointDurationsNeverNegative(t *testing.T) {
	// Receive times from two watches can be equal; an injected clock could
	// even step back. No duration is negative.
	tr := newEndpointTracker()
	tr.ObservePod(*served("p1", "ready", "web"), LiveAt(at("5s")))
	evs := tr.ObserveSlice(*slice("web-1", "web", "", "p1"), LiveAt(at("4s")))
	if len(evs) != 1 || evs[0].Duration != 0 {
		t.Fatalf("events %v", formatEndpoints(evs))
	}
}
