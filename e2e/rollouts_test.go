package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// Tolerance between the exporter's measurement and the test's own watch
// (both receive times on this machine; issue acceptance: 0.5 s).
const measureTolerance = 0.5

// A Deployment created with a Service, then given a new template: the
// exporter's `available` matches the test's own watch within 0.5 s and the
// injected kwok delays; endpoints_ready comes after available.
func TestDeploymentRolloutMeasured(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "roll-measure")
	service(t, ns, "web")
	w := watchKind(t, ns, "Deployment")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 3, demo.Delays(podCreateDelay, podReadyDelay)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := w.until(10*time.Second, "the created Deployment", generationIs(1))
	done := w.until(60*time.Second, "generation 1 available", deploymentAvailable(1))
	truth := done.Sub(start).Seconds()
	labels := map[string]string{"kind": "Deployment", "namespace": ns, "change": "create"}
	got := stageSeconds(t, e, 1, with(labels, "stage", "available"))
	t.Logf("create: available measured %.3fs, test's own watch %.3fs, injected pod delays %v", got, truth, podCreateDelay+podReadyDelay)
	if !within(got, truth, measureTolerance) {
		t.Errorf("available = %.3fs, test saw %.3fs (tolerance %.1fs)", got, truth, measureTolerance)
	}
	if inj := (podCreateDelay + podReadyDelay).Seconds(); got < inj || got > inj+1.5 {
		t.Errorf("available = %.3fs, inconsistent with the injected %.1fs of pod stages", got, inj)
	}
	observed := stageSeconds(t, e, 1, with(labels, "stage", "observed"))
	eps := stageSeconds(t, e, 1, with(labels, "stage", "endpoints_ready"))
	t.Logf("create: observed %.3fs, endpoints_ready %.3fs (slice batch period %v)", observed, eps, sliceBatchPeriod)
	if observed < 0 || observed > got {
		t.Errorf("observed = %.3fs, want within [0, available]", observed)
	}
	if eps < got {
		t.Errorf("endpoints_ready %.3fs < available %.3fs", eps, got)
	}

	// A template change: a second rollout, change=template.
	setImage(t, ns, "web", "registry.example/app:v2")
	start = w.until(10*time.Second, "generation 2", generationIs(2))
	done = w.until(90*time.Second, "generation 2 available", deploymentAvailable(2))
	truth = done.Sub(start).Seconds()
	labels["change"] = "template"
	got = stageSeconds(t, e, 1, with(labels, "stage", "available"))
	t.Logf("template: available measured %.3fs, test's own watch %.3fs", got, truth)
	if !within(got, truth, measureTolerance) {
		t.Errorf("template available = %.3fs, test saw %.3fs", got, truth)
	}
	eventually(t, 30*time.Second, "two converged episodes", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "outcome": "converged", "change": "template"})
		return v == 1, fmt.Sprint(v)
	})
}

// A ResourceQuota blocks pod creation: the rollout stalls with reason
// replica_failure, and counts as bad while it is stuck.
func TestQuotaBlockedRolloutStalls(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "roll-quota")
	podQuota(t, ns, "one-pod", "1")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "big", 3, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	stalled := map[string]string{"kind": "Deployment", "namespace": ns, "name": "big", "reason": "replica_failure"}
	eventually(t, stallThreshold+30*time.Second, "stalled gauge with reason replica_failure", func() (bool, string) {
		v, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", stalled)
		return ok && v > stallThreshold.Seconds(), fmt.Sprintf("found=%v value=%v", ok, v)
	})
	// The crossing of 15 s is counted by the next tick (every second).
	eventually(t, 5*time.Second, "the 15 s crossing", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_rollout_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": "available", "threshold": "15.0"})
		return v == 1, fmt.Sprint(v)
	})
	age := time.Since(created).Seconds()
	mfs := e.scrape()
	// Still stuck: no episode closed, and every threshold it passed counts.
	if v, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns}); v != 0 {
		t.Errorf("rollouts_total = %v while stuck, want 0", v)
	}
	for _, th := range []string{"1.0", "10.0", "15.0"} {
		v, _ := value(mfs, "kube_convergence_rollout_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": "available", "threshold": th})
		if v != 1 {
			t.Errorf("threshold_exceeded{stage=available,threshold=%s} = %v after %.0fs stuck, want 1", th, v, age)
		}
	}
	if v, _ := value(mfs, "kube_convergence_rollout_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": "available", "threshold": "60.0"}); v != 0 && age < 60 {
		t.Errorf("threshold 60 crossed after %.0fs", age)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_in_progress", map[string]string{"kind": "Deployment", "namespace": ns}); v != 1 {
		t.Errorf("rollouts_in_progress = %v, want 1", v)
	}
}

// New pods that start but never pass readiness: reason readiness_failing.
func TestNeverReadyRolloutStalls(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ns := namespace(t, "roll-never-ready")
	if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), demo.Deployment(ns, "stuck", 2, demo.NeverReady), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stalled := map[string]string{"kind": "Deployment", "namespace": ns, "name": "stuck", "stage": "available", "reason": "readiness_failing"}
	eventually(t, stallThreshold+30*time.Second, "stalled gauge with reason readiness_failing", func() (bool, string) {
		mfs := e.scrape()
		v, ok := value(mfs, "kube_convergence_rollout_stalled_seconds", stalled)
		return ok && v > stallThreshold.Seconds(), fmt.Sprintf("found=%v value=%v; all stalled: %v", ok, v, mfs["kube_convergence_rollout_stalled_seconds"])
	})
}

// Two applies in quick succession: superseded, then converged.
func TestSupersededThenConverged(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "roll-supersede")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(300*time.Millisecond, 300*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setImage(t, ns, "web", "registry.example/app:v2")
	eventually(t, 60*time.Second, "superseded create, converged template", func() (bool, string) {
		mfs := e.scrape()
		sup, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "create", "outcome": "superseded"})
		conv, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "template", "outcome": "converged"})
		return sup == 1 && conv == 1, fmt.Sprintf("superseded=%v converged=%v", sup, conv)
	})
}

// Deleted mid-rollout.
func TestDeletedMidRollout(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "roll-delete")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(5*time.Second, 5*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the episode open", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_rollouts_in_progress", map[string]string{"namespace": ns})
		return v == 1, fmt.Sprint(v)
	})
	if err := client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "outcome deleted", func() (bool, string) {
		mfs := e.scrape()
		v, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "outcome": "deleted"})
		open, _ := value(mfs, "kube_convergence_rollouts_in_progress", map[string]string{"namespace": ns})
		return v == 1 && open == 0, fmt.Sprintf("deleted=%v open=%v", v, open)
	})
}

// The exporter is killed mid-rollout and restarted: one recovered episode,
// one `available` observation, no duplicate, no loss.
func TestRestartMidRolloutRecoversOnce(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "roll-restart")
	// rollouts_recovered_total has no namespace label: wait until no other
	// rollout is in flight (an earlier sequential test may leave some, such
	// as the demo workload's, until its namespaces are deleted).
	eventually(t, 2*time.Minute, "no rollout in flight elsewhere", func() (bool, string) {
		var open float64
		for _, m := range shared.forTest(t).scrape()["kube_convergence_rollouts_in_progress"].GetMetric() {
			open += m.GetGauge().GetValue()
		}
		return open == 0, fmt.Sprintf("%v rollouts in progress", open)
	})
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""))
	e.waitReady(60 * time.Second)
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(1*time.Second, 6*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"kind": "Deployment", "namespace": ns, "change": "create"}
	stageSeconds(t, e, 1, with(labels, "stage", "observed"))
	_ = e.cmd.Process.Kill() // no graceful shutdown
	<-e.done                 //nolint:errcheck // killed: the exit error says only that
	e2 := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""))
	e2.waitReady(60 * time.Second)
	// Recovered: observed in its own family, never in the live one.
	var got float64
	eventually(t, 30*time.Second, "the recovered available observation", func() (bool, string) {
		s, c := histogram(e2.scrape(), "kube_convergence_rollout_recovered_duration_seconds", with(labels, "stage", "available"))
		got = s
		return c == 1, fmt.Sprintf("count %d", c)
	})
	mfs := e2.scrape()
	if _, c := histogram(mfs, "kube_convergence_rollout_duration_seconds", with(labels, "stage", "available")); c != 0 {
		t.Errorf("recovered episode observed in the live histogram: %d", c)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"}); v != 1 {
		t.Errorf("recovered_total = %v, want 1 (only the in-flight rollout; converged ones are not observed)", v)
	}
	if _, c := histogram(mfs, "kube_convergence_rollout_duration_seconds", with(labels, "stage", "observed")); c != 0 {
		t.Errorf("observed re-counted after restart: %d", c)
	}
	// Timed from the API-side write (1 s precision): 7 s of pod stages.
	if got < 6.5 || got > 9.5 {
		t.Errorf("recovered available = %.3fs, want about 7s from the API-side write", got)
	}
	t.Logf("recovered episode: available %.3fs after the API-side write", got)
}

// StatefulSets (rolling and partitioned) and DaemonSets, with the same accuracy.
func TestStatefulSetAndDaemonSetRollouts(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "roll-sts-ds")
	replicas := int32(2)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: demo.PodTemplate("db", demo.Delays(500*time.Millisecond, 1*time.Second)),
		},
	}
	ws := watchKind(t, ns, "StatefulSet")
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stsReady := func(g int64) func(runtime.Object) bool {
		return func(o runtime.Object) bool {
			s := o.(*appsv1.StatefulSet)
			return s.Generation == g && s.Status.ObservedGeneration >= g && s.Status.CurrentRevision == s.Status.UpdateRevision &&
				s.Status.ReadyReplicas == *s.Spec.Replicas && s.Status.UpdatedReplicas == *s.Spec.Replicas
		}
	}
	start := ws.until(10*time.Second, "created StatefulSet", generationIs(1))
	truth := ws.until(60*time.Second, "StatefulSet ready", stsReady(1)).Sub(start).Seconds()
	got := stageSeconds(t, e, 1, map[string]string{"kind": "StatefulSet", "namespace": ns, "stage": "ready", "change": "create"})
	t.Logf("StatefulSet create: ready measured %.3fs, test saw %.3fs", got, truth)
	if !within(got, truth, measureTolerance) {
		t.Errorf("StatefulSet ready = %.3fs, test saw %.3fs", got, truth)
	}

	// Partitioned update: partition 1 of 2 updates one pod only.
	s, err := client.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part := int32(1)
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &part}}
	s.Spec.Template.Spec.Containers[0].Image = "registry.example/db:v2"
	if _, err := client.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = ws.until(10*time.Second, "generation 2", generationIs(2))
	truth = ws.until(60*time.Second, "partitioned update done", func(o runtime.Object) bool {
		s := o.(*appsv1.StatefulSet)
		return s.Generation == 2 && s.Status.ObservedGeneration >= 2 && s.Status.UpdatedReplicas >= 1 && s.Status.ReadyReplicas == 2
	}).Sub(start).Seconds()
	got = stageSeconds(t, e, 1, map[string]string{"kind": "StatefulSet", "namespace": ns, "stage": "ready", "change": "template"})
	t.Logf("StatefulSet partitioned update: ready measured %.3fs, test saw %.3fs", got, truth)
	if !within(got, truth, measureTolerance) {
		t.Errorf("partitioned ready = %.3fs, test saw %.3fs", got, truth)
	}

	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: demo.PodTemplate("agent", demo.Delays(500*time.Millisecond, 1*time.Second)),
		},
	}
	wd := watchKind(t, ns, "DaemonSet")
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = wd.until(10*time.Second, "created DaemonSet", generationIs(1))
	truth = wd.until(60*time.Second, "DaemonSet available", func(o runtime.Object) bool {
		d := o.(*appsv1.DaemonSet)
		st := d.Status
		return d.Generation == 1 && st.ObservedGeneration >= 1 && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled && st.NumberUnavailable == 0
	}).Sub(start).Seconds()
	got = stageSeconds(t, e, 1, map[string]string{"kind": "DaemonSet", "namespace": ns, "stage": "available", "change": "create"})
	t.Logf("DaemonSet create: available measured %.3fs, test saw %.3fs", got, truth)
	if !within(got, truth, measureTolerance) {
		t.Errorf("DaemonSet available = %.3fs, test saw %.3fs", got, truth)
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for kk, vv := range m {
		if kk != k {
			out[kk] = vv
		}
	}
	return out
}
