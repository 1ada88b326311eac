package replay_test

// The replay equivalents of end-to-end tests that check only a tracker's
// arithmetic over real notifications: the same assertions, against the
// recording's injected truths (kwok's exact delays, the scenario's own
// steps) and its receive times, which the collectors were fed.

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// Tolerances: against an injected delay, that of the end-to-end tests
// (kwok and the API server take their own milliseconds); against the
// recording's receive times, none to speak of: the replay feeds them.
const (
	injectedTolerance = 0.3
	exactTolerance    = 1e-6
)

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// recording reads testdata/<name>.jsonl as the harness would.
func recording(t *testing.T, h *replay.Harness, name string) *replay.Recording {
	t.Helper()
	rec, err := replay.ReadFile(filepath.Join("testdata", name+".jsonl"), h.Resources())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// series finds the metrics of family whose labels include match.
func series(t *testing.T, h *replay.Harness, family string, match map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := h.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
next:
	for _, m := range mfs[family].GetMetric() {
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// histogram sums the matching histograms' sums and counts.
func histogram(t *testing.T, h *replay.Harness, family string, match map[string]string) (mean float64, count uint64) {
	t.Helper()
	var sum float64
	for _, m := range series(t, h, family, match) {
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	}
	if count > 0 {
		mean = sum / float64(count)
	}
	return mean, count
}

// counter sums the matching counters (and gauges).
func counter(t *testing.T, h *replay.Harness, family string, match map[string]string) (v float64, found bool) {
	t.Helper()
	for _, m := range series(t, h, family, match) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		found = true
	}
	return v, found
}

// podTruth is the recording's own view of its pods: when each was first
// received and when each condition was first received True.
type podTruth struct {
	created map[string]time.Time
	reached map[string]map[corev1.PodConditionType]time.Time
}

func podsOf(rec *replay.Recording) podTruth {
	pt := podTruth{created: map[string]time.Time{}, reached: map[string]map[corev1.PodConditionType]time.Time{}}
	for _, l := range rec.Lines {
		p, ok := l.Object.(*corev1.Pod)
		if !ok || l.Type == "deleted" {
			continue
		}
		uid := string(p.UID)
		if _, seen := pt.created[uid]; !seen {
			pt.created[uid] = l.At
			pt.reached[uid] = map[corev1.PodConditionType]time.Time{}
		}
		for _, c := range p.Status.Conditions {
			if _, done := pt.reached[uid][c.Type]; !done && c.Status == corev1.ConditionTrue {
				pt.reached[uid][c.Type] = l.At
			}
		}
	}
	return pt
}

// meanSinceCreated is the mean time from creation to cond over the pods
// that reached it, and how many did.
func (pt podTruth) meanSinceCreated(cond corev1.PodConditionType) (float64, int) {
	var sum float64
	n := 0
	for uid, at := range pt.reached {
		if r, ok := at[cond]; ok {
			sum += r.Sub(pt.created[uid]).Seconds()
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// The replay of e2e TestPodStartupStagesMeasured, over the pods of
// scale-during-rollout (no Service selects them): each stage matches the
// recording's own receive times and the injected kwok delays, the stock
// stages never set ready_to_start_containers, crossings count as the delays
// say, and no endpoint is timed.
func TestPodStartupStagesReplayed(t *testing.T) {
	const name, ns = "scale-during-rollout", "replay-scale-during-rollout"
	h := play(t, name)
	pt := podsOf(recording(t, h, name))
	labels := map[string]string{"namespace": ns, "owner_kind": "ReplicaSet"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range labels {
			m[a] = b
		}
		return m
	}
	injected := map[string]float64{
		"initialized":      podCreateDelay.Seconds(),
		"containers_ready": (podCreateDelay + podReadyDelay).Seconds(),
		"ready":            (podCreateDelay + podReadyDelay).Seconds(),
	}
	truthCond := map[string]corev1.PodConditionType{"scheduled": corev1.PodScheduled, "initialized": corev1.PodInitialized,
		"containers_ready": corev1.ContainersReady, "ready": corev1.PodReady}
	var ready int
	for _, stage := range []string{"scheduled", "initialized", "containers_ready", "ready"} {
		got, n := histogram(t, h, "kube_convergence_pod_startup_seconds", with("stage", stage))
		truth, want := pt.meanSinceCreated(truthCond[stage])
		t.Logf("%s: measured %.3fs over %d pods, recording %.3fs over %d, injected %.1fs", stage, got, n, truth, want, injected[stage])
		if int(n) != want || want == 0 {
			t.Errorf("%s observed %d times, the recording has %d pods reaching it", stage, n, want)
		}
		if !within(got, truth, exactTolerance) {
			t.Errorf("%s = %.6fs, the recording's receive times say %.6fs", stage, got, truth)
		}
		if inj, ok := injected[stage]; ok && !within(got, inj, injectedTolerance) {
			t.Errorf("%s = %.3fs, want the injected %.1fs ± %.1fs", stage, got, inj, injectedTolerance)
		}
		if stage == "ready" {
			ready = want
		}
	}
	if got, _ := histogram(t, h, "kube_convergence_pod_startup_seconds", with("stage", "scheduled")); got < 0 || got > 1 {
		t.Errorf("scheduled = %.3fs, want small and not negative (the real scheduler)", got)
	}
	for _, iv := range []struct {
		from, to string
		want     float64
	}{
		{"scheduled", "initialized", podCreateDelay.Seconds()},
		{"initialized", "containers_ready", podReadyDelay.Seconds()},
		{"containers_ready", "ready", 0}, // one kwok update sets both
	} {
		got, n := histogram(t, h, "kube_convergence_pod_stage_interval_seconds", map[string]string{"namespace": ns, "from": iv.from, "to": iv.to})
		_, want := pt.meanSinceCreated(truthCond[iv.to])
		if int(n) != want || !within(got, iv.want, injectedTolerance) {
			t.Errorf("interval %s -> %s = %.3fs over %d pods, want %.1fs ± %.1fs over %d", iv.from, iv.to, got, n, iv.want, injectedTolerance, want)
		}
	}
	if _, n := histogram(t, h, "kube_convergence_pod_stage_interval_seconds", map[string]string{"namespace": ns, "from": "created", "to": "scheduled"}); int(n) != len(pt.created) {
		t.Errorf("interval created -> scheduled count = %d, want %d", n, len(pt.created))
	}
	if _, n := histogram(t, h, "kube_convergence_pod_startup_seconds", with("stage", "ready_to_start_containers")); n != 0 {
		t.Errorf("ready_to_start_containers observed %d times; kwok's stock stages never set it", n)
	}
	exceeded := func(stage, threshold string) float64 {
		v, _ := counter(t, h, "kube_convergence_pod_startup_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": stage, "threshold": threshold})
		return v
	}
	if v := exceeded("ready_to_start_containers", "0.1"); v != 0 {
		t.Errorf("ready_to_start_containers counted as stuck %v times on a node that never reports it", v)
	}
	// Ready at about 3 s: every pod crossed 2 s, none 4 s.
	if v := exceeded("ready", "2.0"); v != float64(ready) {
		t.Errorf("threshold_exceeded{stage=ready,threshold=2.0} = %v, want %d", v, ready)
	}
	if v := exceeded("ready", "4.0"); v != 0 {
		t.Errorf("threshold_exceeded{stage=ready,threshold=4.0} = %v, want 0", v)
	}
	if _, n := histogram(t, h, "kube_convergence_endpoint_propagation_seconds", map[string]string{"namespace": ns}); n != 0 {
		t.Errorf("propagation observed for pods without a Service: %d", n)
	}
	if v, ok := counter(t, h, "kube_convergence_endpoint_propagation_threshold_exceeded_total", map[string]string{"namespace": ns}); ok && v != 0 {
		t.Errorf("propagation crossings for pods without a Service: %v", v)
	}
}

// deploymentTruth is when the recording first received generation g of the
// Deployment, and when it first received it available (the end-to-end
// tests' deploymentAvailable).
func deploymentTruth(rec *replay.Recording, name string, g int64) (start, available time.Time) {
	for _, l := range rec.Lines {
		d, ok := l.Object.(*appsv1.Deployment)
		if !ok || d.Name != name || d.Generation != g {
			continue
		}
		if start.IsZero() {
			start = l.At
		}
		n := *d.Spec.Replicas
		if !available.IsZero() || d.Status.ObservedGeneration < g || d.Status.UpdatedReplicas != n || d.Status.AvailableReplicas != n || d.Status.Replicas != n {
			continue
		}
		ok = true
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				ok = c.Reason == "NewReplicaSetAvailable"
			}
		}
		if ok {
			available = l.At
		}
	}
	return start, available
}

// The replay of e2e TestDeploymentRolloutMeasured, over rollout: a
// Deployment created with a Service, then given a new template. available
// matches the recording's receive times and the injected pod delays;
// observed comes before it and endpoints_ready after; both episodes
// converge.
func TestDeploymentRolloutReplayed(t *testing.T) {
	const name, ns = "rollout", "replay-rollout"
	h := play(t, name)
	rec := recording(t, h, name)
	for _, c := range []struct {
		change string
		gen    int64
	}{{"create", 1}, {"template", 2}} {
		labels := map[string]string{"kind": "Deployment", "namespace": ns, "change": c.change}
		stage := func(s string) float64 {
			t.Helper()
			m := map[string]string{"stage": s}
			for k, v := range labels {
				m[k] = v
			}
			got, n := histogram(t, h, "kube_convergence_rollout_duration_seconds", m)
			if n != 1 {
				t.Errorf("%s %s observed %d times, want 1", c.change, s, n)
			}
			return got
		}
		start, done := deploymentTruth(rec, "web", c.gen)
		truth := done.Sub(start).Seconds()
		got := stage("available")
		t.Logf("%s: available measured %.3fs, recording %.3fs, injected pod delays %v", c.change, got, truth, podCreateDelay+podReadyDelay)
		if start.IsZero() || done.IsZero() || !within(got, truth, exactTolerance) {
			t.Errorf("%s available = %.6fs, the recording says %.6fs", c.change, got, truth)
		}
		if inj := (podCreateDelay + podReadyDelay).Seconds(); c.change == "create" && (got < inj || got > inj+1.5) {
			t.Errorf("available = %.3fs, inconsistent with the injected %.1fs of pod stages", got, inj)
		}
		observed, eps := stage("observed"), stage("endpoints_ready")
		if observed < 0 || observed > got {
			t.Errorf("%s observed = %.3fs, want within [0, available %.3fs]", c.change, observed, got)
		}
		if eps < got {
			t.Errorf("%s endpoints_ready %.3fs < available %.3fs", c.change, eps, got)
		}
		if v, _ := counter(t, h, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "outcome": "converged", "change": c.change}); v != 1 {
			t.Errorf("%s: %v converged episodes, want 1", c.change, v)
		}
	}
}

// The replay of e2e TestQuotaBlockedRolloutStalls, over quota-blocked (a
// quota of one pod, three replicas, a stall threshold of 15 s, 20 s
// recorded): the rollout stalls with reason replica_failure, every
// threshold it passed counts once, none it did not, and it stays in
// progress.
func TestQuotaBlockedRolloutReplayed(t *testing.T) {
	const name, ns = "quota-blocked", "replay-quota-blocked"
	h := play(t, name)
	rec := recording(t, h, name)
	start, _ := deploymentTruth(rec, "web", 1)
	age := h.Now().Sub(start).Seconds()
	v, ok := counter(t, h, "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Deployment", "namespace": ns, "name": "web", "reason": "replica_failure"})
	if !ok || !within(v, age, exactTolerance) || v < 15 {
		t.Errorf("stalled gauge %v (found %v), want the rollout's age %.3fs past the 15 s threshold, reason replica_failure", v, ok, age)
	}
	if v, _ := counter(t, h, "kube_convergence_rollouts_total", map[string]string{"namespace": ns}); v != 0 {
		t.Errorf("rollouts_total = %v while stuck, want 0", v)
	}
	exceeded := func(th string) float64 {
		v, _ := counter(t, h, "kube_convergence_rollout_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": "available", "threshold": th})
		return v
	}
	for _, th := range []string{"1.0", "10.0", "15.0"} {
		if v := exceeded(th); v != 1 {
			t.Errorf("threshold_exceeded{stage=available,threshold=%s} = %v after %.0fs stuck, want 1", th, v, age)
		}
	}
	if v := exceeded("60.0"); v != 0 {
		t.Errorf("threshold 60 crossed after %.0fs", age)
	}
	if v, _ := counter(t, h, "kube_convergence_rollouts_in_progress", map[string]string{"kind": "Deployment", "namespace": ns}); v != 1 {
		t.Errorf("rollouts_in_progress = %v, want 1", v)
	}
}
