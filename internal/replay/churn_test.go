package replay_test

// The churn collector over kube-controller-manager's real writes: a
// 100-replica rolling update and an autoscaler's scale writes make no hot
// object, although they write the same objects more often than the hot
// threshold; writers in a loop without progress are hot, with their own
// field manager. The truths are the recordings' own lines (how often each
// object was written, and by what) and the scenarios' injected writes.

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

const hotFamily = "kube_convergence_hot_object_writes"

// liveWrites counts the live updates per kind/namespace/name in a
// recording: what the hot window counted before writes were judged.
func liveWrites(t *testing.T, name string) map[string]int {
	t.Helper()
	rec := recording(t, play(t, name), name)
	out := map[string]int{}
	for _, l := range rec.Lines {
		m, ok := l.Object.(metav1.Object)
		if l.Type != "modified" || !l.Live || !ok {
			continue
		}
		out[fmt.Sprintf("%T %s/%s", l.Object, m.GetNamespace(), m.GetName())]++
	}
	return out
}

func hotSeries(t *testing.T, name string) map[string]float64 {
	t.Helper()
	h := play(t, name)
	out := map[string]float64{}
	for _, m := range series(t, h, hotFamily, nil) {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		out[fmt.Sprintf("%s %s/%s %s", l["kind"], l["namespace"], l["name"], l["manager"])] = m.GetGauge().GetValue()
	}
	return out
}

// TestChurnKubeControllerManagerProgressIsNoHotLoop: the Deployment of the
// 100-replica rollout is written 67 times in 20 s by kube-controller-manager
// (its status, every few pods), the autoscaled one 72 times in a minute (12
// scale writes and the status writes after each), its ReplicaSet 66:
// above the default threshold of 60 in 5 minutes. Every one of those
// writes moves the object to a new state (observedGeneration, replica
// counts, conditions) or is a scale write that asks for one: no hot object.
func TestChurnKubeControllerManagerProgressIsNoHotLoop(t *testing.T) {
	threshold := config.Default().Churn.HotWrites
	for _, name := range []string{"rollout-100-replicas", "hpa-scaling"} {
		t.Run(name, func(t *testing.T) {
			writes, busiest := liveWrites(t, name), ""
			for k, n := range writes {
				if busiest == "" || n > writes[busiest] {
					busiest = k
				}
			}
			if writes[busiest] <= threshold {
				t.Fatalf("the recording writes %s %d times, not above the threshold %d: it proves nothing", busiest, writes[busiest], threshold)
			}
			t.Logf("live writes %v (threshold %d)", writes, threshold)
			if hot := hotSeries(t, name); len(hot) > 0 {
				t.Errorf("hot objects %v, want none", hot)
			}
		})
	}
}

// TestChurnLoopsAreHotWithTheirWriter: replayed with churn.hotWrites 4,
// the loops of churn-loops (30 annotation patches by kce-restamper, a
// condition's lastUpdateTime restamped by kce-status-stamper, which the API
// server stores once per second, 15 applies each of kce-fight-a and
// kce-fight-b over spec.replicas, all but b's first a return) are hot with their writers' names, and
// kube-controller-manager, whose status writes follow every one of them,
// is never hot. The fight is also counted as flaps of the pair.
func TestChurnLoopsAreHotWithTheirWriter(t *testing.T) {
	const ns = "replay-churn-loops"
	hot := hotSeries(t, "churn-loops")
	t.Logf("hot: %v", hot)
	stamps := conditionRestamps(t, "churn-loops", "stamped")
	want := map[string]float64{
		"Deployment " + ns + "/restamped kce-restamper":    30,
		"Deployment " + ns + "/stamped kce-status-stamper": float64(stamps),
		"Deployment " + ns + "/fought kce-fight-a":         15,
		"Deployment " + ns + "/fought kce-fight-b":         14,
	}
	for k, n := range want {
		// A write in the same second as another manager's may be given to
		// it before the object is busy (informers.Writer): two at most here.
		if got, ok := hot[k]; !ok || got < n-2 || got > n {
			t.Errorf("%s: %v writes (present %v), want %v (at most 2 fewer)", k, got, ok, n)
		}
	}
	for k := range hot {
		if _, ok := want[k]; !ok {
			t.Errorf("hot %s: not a loop writer", k)
		}
	}
	flaps := series(t, play(t, "churn-loops"), "kube_convergence_field_ownership_flaps_total",
		map[string]string{"kind": "Deployment", "manager_a": "kce-fight-a", "manager_b": "kce-fight-b"})
	// 30 applies in turn: the first applies the creator's value (the
	// field is then shared, no sole owner), the second takes it, the third
	// is a move, every later one a return.
	if len(flaps) != 1 || flaps[0].GetCounter().GetValue() != 27 {
		t.Errorf("flaps of the fight: %v, want 27", flaps)
	}
}

// conditionRestamps counts the stored writes of Deployment name that moved
// its Available condition's lastUpdateTime.
func conditionRestamps(t *testing.T, rec, name string) int {
	t.Helper()
	r := recording(t, play(t, rec), rec)
	n, last := 0, ""
	for _, l := range r.Lines {
		d, ok := l.Object.(*appsv1.Deployment)
		if l.Type != "modified" || !ok || d.Name != name {
			continue
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable {
				at := c.LastUpdateTime.String()
				if last != "" && at != last {
					n++
				}
				last = at
			}
		}
	}
	return n
}
