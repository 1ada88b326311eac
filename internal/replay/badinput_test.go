package replay_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// TestBadInput replays testdata/bad-input.jsonl, what a broken informer
// could hand: objects of an unexpected type, a tombstone without an
// object and one of a pod never added, a recreation of a Deployment never
// seen, deletes with no prior add. No collector panics (Play would return
// the panic); the type cases are counted per watch in
// kube_convergence_informer_unexpected_objects_total and logged once per
// watch; the others are counted and logged once by the harness, which
// knows what its informers held.
func TestBadInput(t *testing.T) {
	h, logs := playLogged(t, "bad-input")
	mfs, err := h.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, m := range mfs["kube_convergence_informer_unexpected_objects_total"].GetMetric() {
		var collector, resource string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "collector":
				collector = l.GetValue()
			case "resource":
				resource = l.GetValue()
			}
		}
		if v := m.GetCounter().GetValue(); v > 0 {
			counted[collector+" "+resource] = v
			// One line per watch, however many objects it dropped.
			line := `collector=` + collector + ` resource=` + resource + ` `
			if n := strings.Count(logs, line); n != 1 {
				t.Errorf("%s %s: %d log lines for %v unexpected objects, want 1", collector, resource, n, v)
			}
		}
	}
	// Every watch of the resource counts its own, and nothing else does.
	want := map[string]float64{
		"pods pods":      2, // the Node, the tombstone without object
		"endpoints pods": 2,
		"rollouts pods":  2,
		"churn pods":     2,
		"endpoints endpointslices.discovery.k8s.io": 1, // the Service
		"rollouts endpointslices.discovery.k8s.io":  1,
		"rollouts deployments.apps":                 1, // the Pod
		"churn deployments.apps":                    1,
		"retries events.events.k8s.io":              1, // the Pod
		"timelines events.events.k8s.io":            1,
	}
	if !maps.Equal(counted, want) {
		t.Errorf("unexpected objects counted per watch:\n%v\nwant\n%v", counted, want)
	}
	for kind, want := range map[string]int{
		replay.AnomalyTombstone: 2, // bad/ghost, bad/never
		replay.AnomalyUpdate:    1, // web from dep-old
		replay.AnomalyDelete:    3, // the pod, the Deployment, the Event
	} {
		if got := h.Anomalies()[kind]; got != want {
			t.Errorf("%s: %d, want %d", kind, got, want)
		}
		if n := strings.Count(logs, `anomaly="`+kind+`"`); n < 1 {
			t.Errorf("%s never logged", kind)
		}
	}
	if n := strings.Count(logs, `anomaly="`+replay.AnomalyTombstone+`" resource=pods`); n != 1 {
		t.Errorf("tombstones of pods logged %d times, want once", n)
	}
}
