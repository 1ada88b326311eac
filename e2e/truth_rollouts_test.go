package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// Write patterns clusters produce all day, against the real
// control plane: each number is checked against what the test injected.

// A Deployment whose new template's pods never turn Ready, while an HPA-like
// writer flips spec.replicas between 2 and 3 every 15 s through the /scale
// subresource (which leaves no managedFields time). The template episode
// must survive every scale write: the stalled gauge keeps growing from the
// template write, its 60 s crossing is counted once as change="template",
// and no scale episode is superseded or recovered.
func TestStuckTemplateRolloutSurvivesScaleWrites(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-hpa")
	recoveredBefore, _ := value(e.scrape(), "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"})
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(200*time.Millisecond, 200*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := watchKind(t, ns, "Deployment")
	w.until(60*time.Second, "the create available", deploymentAvailable(1))
	updateDeployment(t, client, ns, "web", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = demo.NeverReady
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:broken"
	})
	written := w.until(10*time.Second, "the template write", generationIs(2))

	stalled := map[string]string{"kind": "Deployment", "namespace": ns, "name": "web"}
	var firstAge float64
	var firstAt time.Time
	for i, replicas := range []int32{3, 2, 3, 2, 3, 2} {
		at := written.Add(time.Duration(i+1) * 15 * time.Second)
		time.Sleep(time.Until(at))
		scale(t, client, ns, "web", replicas)
		if i == 1 { // 30 s in: past the 15 s stall threshold
			mfs := e.scrape()
			v, ok := value(mfs, "kube_convergence_rollout_stalled_seconds", stalled)
			if !ok {
				t.Fatalf("no stalled series 30 s into the stuck rollout: %v", mfs["kube_convergence_rollout_stalled_seconds"])
			}
			firstAge, firstAt = v, time.Now()
		}
	}
	time.Sleep(time.Until(written.Add(100 * time.Second)))
	mfs := e.scrape()
	age, ok := value(mfs, "kube_convergence_rollout_stalled_seconds", stalled)
	grew := time.Since(firstAt).Seconds()
	t.Logf("stalled: %.1fs at the second scale write, %.1fs %.1fs later; truth since the template write %.1fs", firstAge, age, grew, time.Since(written).Seconds())
	if !ok || !within(age-firstAge, grew, 2) || !within(age, time.Since(written).Seconds(), 2) {
		t.Errorf("stalled gauge %.1fs (found %v), want it to keep growing from the template write (%.1fs ago)", age, ok, time.Since(written).Seconds())
	}
	ex := func(labels map[string]string) float64 {
		var sum float64
		for _, m := range mfs["kube_convergence_rollout_threshold_exceeded_total"].GetMetric() {
			if labelsMatch(m, with(labels, "namespace", ns)) {
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	if v := ex(map[string]string{"change": "template", "stage": "available", "threshold": "60.0"}); v != 1 {
		t.Errorf("template crossings of 60 s at available = %v, want 1", v)
	}
	if v := ex(map[string]string{"change": "scale"}); v != 0 {
		t.Errorf("crossings counted under change=scale: %v, want 0", v)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "outcome": "superseded"}); v != 0 {
		t.Errorf("superseded episodes = %v, want 0 (scale writes re-target)", v)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_in_progress", map[string]string{"kind": "Deployment", "namespace": ns}); v != 1 {
		t.Errorf("rollouts_in_progress = %v, want the one template rollout", v)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"}); v != recoveredBefore {
		t.Errorf("rollouts_recovered_total went from %v to %v on a cluster without restart or gap", recoveredBefore, v)
	}
}

// A converged Deployment annotated two minutes after its create (a CI
// "deployed-at" annotation): the generation moves while the newest f:spec
// time is two minutes old. Timed live, nothing recovered, nothing slow.
func TestAnnotationWriteIsNotRecovered(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-annotate")
	recoveredBefore, _ := value(e.scrape(), "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"})
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(200*time.Millisecond, 200*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := watchKind(t, ns, "Deployment")
	created := w.until(10*time.Second, "the create", generationIs(1))
	w.until(60*time.Second, "the create available", deploymentAvailable(1))
	time.Sleep(time.Until(created.Add(2 * time.Minute)))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"ci.example.com/deployed-at":%q}}}`, time.Now().UTC().Format(time.RFC3339))
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the annotated generation", generationIs(2))
	eventually(t, 30*time.Second, "the annotate episode closed", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "other", "outcome": "converged"})
		return v == 1, fmt.Sprint(v)
	})
	mfs := e.scrape()
	if v, _ := value(mfs, "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"}); v != recoveredBefore {
		t.Errorf("rollouts_recovered_total went from %v to %v", recoveredBefore, v)
	}
	for _, m := range mfs["kube_convergence_rollout_duration_seconds"].GetMetric() {
		if !labelsMatch(m, map[string]string{"namespace": ns}) {
			continue
		}
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 10 && b.GetCumulativeCount() != h.GetSampleCount() {
				t.Errorf("an observation >= 10 s in %v: %d of %d within 10 s", m.GetLabel(), b.GetCumulativeCount(), h.GetSampleCount())
			}
		}
	}
	if _, c := histogram(mfs, "kube_convergence_rollout_recovered_duration_seconds", map[string]string{"namespace": ns}); c != 0 {
		t.Errorf("%d recovered observations", c)
	}
}

// A 3-replica StatefulSet behind a headless Service, partition 2, template
// change with an injected Ready delay: only pod 2 is updated; pods 0 and 1
// stay on the old revision and stay published. The episode converges.
func TestPartitionedStatefulSetConverges(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-partition")
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}}
	if _, err := client.CoreV1().Services(ns).Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: demo.PodTemplate("db", demo.Delays(100*time.Millisecond, 200*time.Millisecond)),
		},
	}
	// kwok deletes a terminating pod at a random time before its
	// deletionTimestamp: a 1 s grace period keeps that short.
	sts.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	ws := watchKind(t, ns, "StatefulSet")
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the create converged", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "create", "outcome": "converged"})
		return v == 1, fmt.Sprint(v)
	})
	pods, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pods.Stop)
	podw := &watcher{t: t, w: pods, ch: pods.ResultChan()}
	const create, ready = 500 * time.Millisecond, 2 * time.Second // the injected truth d = 2.5 s
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
		s.Spec.Template.Annotations = demo.Delays(create, ready)
		s.Spec.Template.Spec.Containers[0].Image = "registry.example/db:v2"
		_, err = client.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	start := ws.until(10*time.Second, "generation 2", generationIs(2))
	// The old pod 2 is deleted (kwok: within its 1 s grace period) and
	// recreated on the new revision, which then takes the injected d.
	recreated := podw.until(60*time.Second, "the updated pod db-2", func(o runtime.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Name == "db-2" && p.Spec.Containers[0].Image == "registry.example/db:v2"
	}).Sub(start).Seconds()
	truth := ws.until(60*time.Second, "partitioned update done", func(o runtime.Object) bool {
		s := o.(*appsv1.StatefulSet)
		return s.Generation == 2 && s.Status.ObservedGeneration >= 2 && s.Status.UpdatedReplicas >= 1 && s.Status.ReadyReplicas == 3
	}).Sub(start).Seconds()
	labels := map[string]string{"kind": "StatefulSet", "namespace": ns, "change": "template"}
	got := stageSeconds(t, e, 1, with(labels, "stage", "ready"))
	d := (create + ready).Seconds()
	t.Logf("partition 2 of 3: ready measured %.3fs, test's watch %.3fs; updated pod created at +%.3fs, injected pod stages d=%.1fs", got, truth, recreated, d)
	if !within(got, truth, measureTolerance) {
		t.Errorf("ready = %.3fs, test saw %.3fs", got, truth)
	}
	if !within(got, recreated+d, measureTolerance) {
		t.Errorf("ready = %.3fs, want d=%.1fs after the updated pod's creation at +%.3fs (± %.1fs)", got, d, recreated, measureTolerance)
	}
	eventually(t, 30*time.Second, "the partitioned episode converged", func() (bool, string) {
		mfs := e.scrape()
		conv, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "template", "outcome": "converged"})
		open, _ := value(mfs, "kube_convergence_rollouts_in_progress", map[string]string{"namespace": ns})
		_, eps := histogram(mfs, "kube_convergence_rollout_duration_seconds", with(labels, "stage", "endpoints_ready"))
		return conv == 1 && open == 0 && eps == 1, fmt.Sprintf("converged=%v in_progress=%v endpoints_ready observations=%d", conv, open, eps)
	})
	time.Sleep(stallThreshold + 2*time.Second)
	if v, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"namespace": ns}); ok {
		t.Errorf("stalled series %v after the partitioned rollout converged", v)
	}
}

// kubectl rollout pause; set image; resume: one template rollout, timed
// from the resume, matching the test's own watch and the injected delays.
func TestPauseSetImageResumeIsOneTemplateRollout(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-pause")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(200*time.Millisecond, 200*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := watchKind(t, ns, "Deployment")
	w.until(60*time.Second, "the create available", deploymentAvailable(1))
	updateDeployment(t, client, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	w.until(10*time.Second, "paused observed", func(o runtime.Object) bool {
		d := o.(*appsv1.Deployment)
		return d.Generation == 2 && d.Status.ObservedGeneration == 2
	})
	const create, ready = 1 * time.Second, 2 * time.Second
	updateDeployment(t, client, ns, "web", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = demo.Delays(create, ready)
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:v2"
	})
	w.until(10*time.Second, "set image while paused", generationIs(3))
	time.Sleep(2 * time.Second) // paused: nothing rolls
	updateDeployment(t, client, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	start := w.until(10*time.Second, "the resume", generationIs(4))
	truth := w.until(60*time.Second, "the resumed rollout available", deploymentAvailable(4)).Sub(start).Seconds()
	labels := map[string]string{"kind": "Deployment", "namespace": ns, "change": "template", "stage": "available"}
	got := stageSeconds(t, e, 1, labels)
	d := (create + ready).Seconds()
	t.Logf("resume: available measured %.3fs, test's watch %.3fs, injected pod stages %.1fs per pod", got, truth, d)
	if !within(got, truth, measureTolerance) {
		t.Errorf("available = %.3fs, test saw %.3fs", got, truth)
	}
	if got < d {
		t.Errorf("available = %.3fs, shorter than the injected %.1fs of pod stages", got, d)
	}
	mfs := e.scrape()
	if _, c := histogram(mfs, "kube_convergence_rollout_duration_seconds", labels); c != 1 {
		t.Errorf("%d template observations of available, want 1", c)
	}
	if v, _ := value(mfs, "kube_convergence_rollouts_total", map[string]string{"namespace": ns, "change": "template", "outcome": "paused"}); v != 1 {
		t.Errorf("the set-image-while-paused episode closed paused %v times, want 1", v)
	}
}
