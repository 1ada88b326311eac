package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// Acceptance tolerance of the pod and endpoint stages against the injected
// kwok delays and the slice batch period, and against the test's
// own watch: both are receive times on this machine.
const podTolerance = 0.3

// resyncAfterOwnWrite: after writing a slice, the EndpointSlice controller
// may sync the Service once more, max(1 s, batch period) later. It records
// the generation it wrote only after the API call returns, so when its own
// watch event comes first, ShouldSync says the slice changed
// (k8s.io/endpointslice util/endpointslice_tracker.go). A pod change inside
// that window is published early: 1.90 s instead of 2 s was seen here. The
// endpoint tests act only once the slices were quiet that long (plus 300 ms
// for the sync itself), so the batch period alone delays what they measure.
const resyncAfterOwnWrite = sliceBatchPeriod + 300*time.Millisecond

// Pods of a Deployment on kwok's general stages with exact delays: the
// exporter's stages match the injected delays and the test's own watch;
// ready_to_start_containers, which the stock stages never set, is neither
// observed nor counted as stuck.
func TestPodStartupStagesMeasured(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ns := namespace(t, "pod-stages")
	pw := watchPods(t, ns)
	const replicas = 3
	if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), demo.Deployment(ns, "web", replicas, demo.Delays(podCreateDelay, podReadyDelay)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"namespace": ns, "owner_kind": "ReplicaSet"}
	injected := map[string]float64{
		"initialized":      podCreateDelay.Seconds(),
		"containers_ready": (podCreateDelay + podReadyDelay).Seconds(),
		"ready":            (podCreateDelay + podReadyDelay).Seconds(),
	}
	truthCond := map[string]corev1.PodConditionType{"scheduled": corev1.PodScheduled, "initialized": corev1.PodInitialized,
		"containers_ready": corev1.ContainersReady, "ready": corev1.PodReady}
	for _, stage := range []string{"scheduled", "initialized", "containers_ready", "ready"} {
		got := podSeconds(t, e, "kube_convergence_pod_startup_seconds", replicas, with(labels, "stage", stage))
		truth := pw.meanSinceCreated(t, truthCond[stage], replicas)
		t.Logf("%s: measured %.3fs, test's own watch %.3fs, injected %.1fs", stage, got, truth, injected[stage])
		if !within(got, truth, podTolerance) {
			t.Errorf("%s = %.3fs, test's own watch saw %.3fs", stage, got, truth)
		}
		if want, ok := injected[stage]; ok && !within(got, want, podTolerance) {
			t.Errorf("%s = %.3fs, want the injected %.1fs ± %.1fs", stage, got, want, podTolerance)
		}
	}
	if got := podSeconds(t, e, "kube_convergence_pod_startup_seconds", replicas, with(labels, "stage", "scheduled")); got < 0 || got > 1 {
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
		got := podSeconds(t, e, "kube_convergence_pod_stage_interval_seconds", replicas, map[string]string{"namespace": ns, "from": iv.from, "to": iv.to})
		t.Logf("interval %s -> %s: %.3fs (injected %.1fs)", iv.from, iv.to, got, iv.want)
		if !within(got, iv.want, podTolerance) {
			t.Errorf("interval %s -> %s = %.3fs, want %.1fs ± %.1fs", iv.from, iv.to, got, iv.want, podTolerance)
		}
	}
	mfs := e.scrape()
	if _, c := histogram(mfs, "kube_convergence_pod_stage_interval_seconds", map[string]string{"namespace": ns, "from": "created", "to": "scheduled"}); c != replicas {
		t.Errorf("interval created -> scheduled count = %d, want %d", c, replicas)
	}
	if _, c := histogram(mfs, "kube_convergence_pod_startup_seconds", with(labels, "stage", "ready_to_start_containers")); c != 0 {
		t.Errorf("ready_to_start_containers observed %d times; kwok's stock stages never set it", c)
	}
	exceeded := func(stage, threshold string) float64 {
		v, _ := value(mfs, "kube_convergence_pod_startup_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": stage, "threshold": threshold})
		return v
	}
	if v := exceeded("ready_to_start_containers", "0.1"); v != 0 {
		t.Errorf("ready_to_start_containers counted as stuck %v times on a node that never reports it", v)
	}
	// Ready at about 3 s: every pod crossed 2 s, none 4 s (3 s is too close to call).
	if v := exceeded("ready", "2.0"); v != replicas {
		t.Errorf("threshold_exceeded{stage=ready,threshold=2.0} = %v, want %d", v, replicas)
	}
	if v := exceeded("ready", "4.0"); v != 0 {
		t.Errorf("threshold_exceeded{stage=ready,threshold=4.0} = %v, want 0", v)
	}
	// No Service selects these pods: not endpoint-tracked, never "unpublished".
	if _, c := histogram(mfs, "kube_convergence_endpoint_propagation_seconds", map[string]string{"namespace": ns}); c != 0 {
		t.Errorf("propagation observed for pods without a Service: %d", c)
	}
	if v, ok := value(mfs, "kube_convergence_endpoint_propagation_threshold_exceeded_total", map[string]string{"namespace": ns}); ok {
		t.Errorf("propagation crossings for pods without a Service: %v", v)
	}
}

// The project's kwok Stage sets PodReadyToStartContainers: the stage is
// observed at its injected delay, in the order the conditions happened.
func TestPodReadyToStartContainersStage(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "pod-sandbox")
	pw := watchPods(t, ns)
	const sandboxDelay, createDelay, readyDelay = 500 * time.Millisecond, time.Second, time.Second
	const n = 2
	for i := range n {
		tmpl := demo.PodTemplate("sandbox", demo.ReadyToStartContainers(sandboxDelay, createDelay, readyDelay))
		p := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		p.Namespace, p.Name = ns, fmt.Sprintf("sandbox-%d", i)
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"namespace": ns, "owner_kind": "none"}
	for _, s := range []struct {
		stage string
		cond  corev1.PodConditionType
		want  time.Duration
	}{
		{"ready_to_start_containers", corev1.PodReadyToStartContainers, sandboxDelay},
		{"initialized", corev1.PodInitialized, sandboxDelay + createDelay},
		{"ready", corev1.PodReady, sandboxDelay + createDelay + readyDelay},
	} {
		got := podSeconds(t, e, "kube_convergence_pod_startup_seconds", n, with(labels, "stage", s.stage))
		truth := pw.meanSinceCreated(t, s.cond, n)
		t.Logf("%s: measured %.3fs, test's own watch %.3fs, injected %v", s.stage, got, truth, s.want)
		if !within(got, s.want.Seconds(), podTolerance) || !within(got, truth, podTolerance) {
			t.Errorf("%s = %.3fs, want the injected %v and the watched %.3fs ± %.1fs", s.stage, got, s.want, truth, podTolerance)
		}
	}
	for _, iv := range []struct {
		from, to string
		want     time.Duration
	}{
		{"scheduled", "ready_to_start_containers", sandboxDelay},
		{"ready_to_start_containers", "initialized", createDelay},
		{"initialized", "containers_ready", readyDelay},
	} {
		got := podSeconds(t, e, "kube_convergence_pod_stage_interval_seconds", n, map[string]string{"namespace": ns, "from": iv.from, "to": iv.to})
		t.Logf("interval %s -> %s: %.3fs (injected %v)", iv.from, iv.to, got, iv.want)
		if !within(got, iv.want.Seconds(), podTolerance) {
			t.Errorf("interval %s -> %s = %.3fs, want %v ± %.1fs", iv.from, iv.to, got, iv.want, podTolerance)
		}
	}
}

// A Service in front of a Deployment: each pod is a ready endpoint about one
// batch period (2 s) after it turned Ready; a Service created after its pods
// publishes them without that batching (Service changes are not batched);
// each (pod, Service) pair counts once.
func TestEndpointPropagationMeasured(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "ep-propagation")
	pw := watchPods(t, ns)
	sw := watchSlices(t, ns)
	service(t, ns, "web")
	const replicas = 2
	// The controller writes the slice (endpoints not ready) one batch period
	// after the pods' creation, and may resync once more a batch period
	// after that write (see resyncAfterOwnWrite): Ready at 1 s + 4 s comes
	// after both, so its own batch period is all that delays it.
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", replicas, demo.Delays(podCreateDelay, 4*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := podSeconds(t, e, "kube_convergence_endpoint_propagation_seconds", replicas, map[string]string{"namespace": ns})
	truth := sw.meanPublishedAfter(t, "web", pw.readyTimes(), replicas)
	t.Logf("propagation: measured %.3fs, test's own watches %.3fs, batch period %v", got, truth, sliceBatchPeriod)
	if !within(got, sliceBatchPeriod.Seconds(), podTolerance) || !within(got, truth, podTolerance) {
		t.Errorf("propagation = %.3fs, want the batch period %v and the watched %.3fs ± %.1fs", got, sliceBatchPeriod, truth, podTolerance)
	}
	mfs := e.scrape()
	crossed := func(threshold string) float64 {
		v, _ := value(mfs, "kube_convergence_endpoint_propagation_threshold_exceeded_total", map[string]string{"namespace": ns, "threshold": threshold})
		return v
	}
	if crossed("1.0") != replicas || crossed("3.0") != 0 {
		t.Errorf("propagation crossings: 1.0 -> %v (want %d), 3.0 -> %v (want 0)", crossed("1.0"), replicas, crossed("3.0"))
	}
	if _, c := histogram(mfs, "kube_convergence_endpointslice_trigger_lag_seconds", nil); c == 0 {
		t.Errorf("no trigger lag observed")
	}
	lagTruth := sw.meanTriggerLag()
	t.Logf("trigger lag seen by the test's own watch: mean %.3fs (1 s precision)", lagTruth)

	// A second Service created after its pods are Ready: the pods are due
	// when it selects them; not batched, so well under the batch period.
	if _, err := client.CoreV1().Services(ns).Create(ctx, serviceFor(ns, "web-late", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "propagation to the late Service", func() (bool, string) {
		_, c := histogram(e.scrape(), "kube_convergence_endpoint_propagation_seconds", map[string]string{"namespace": ns})
		return c == 2*replicas, fmt.Sprint("count ", c)
	})
	sum, c := histogram(e.scrape(), "kube_convergence_endpoint_propagation_seconds", map[string]string{"namespace": ns})
	late := (sum - got*replicas) / replicas
	t.Logf("propagation to a Service created after its pods: %.3fs", late)
	if late < 0 || late > 1 {
		t.Errorf("late Service propagation = %.3fs, want below 1 s (Service changes are not batched)", late)
	}
	if c != 2*replicas {
		t.Errorf("propagation count = %d, want one per (pod, Service): %d", c, 2*replicas)
	}
}

// A published pod stops being Ready, another starts terminating: each stays
// a ready endpoint for about one batch period.
func TestEndpointRemovalMeasured(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "ep-removal")
	pw := watchPods(t, ns)
	sw := watchSlices(t, ns)
	service(t, ns, "web")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(300*time.Millisecond, 300*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podSeconds(t, e, "kube_convergence_endpoint_propagation_seconds", 2, map[string]string{"namespace": ns})
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %v, %d", err, len(pods.Items))
	}
	a, b := pods.Items[0], pods.Items[1]
	sw.waitQuiet(t, "web", resyncAfterOwnWrite)

	// The kubelet's readiness probe fails: the test plays it (no kwok
	// stage matches a Running pod, so nothing sets it back).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := podSeconds(t, e, "kube_convergence_endpoint_removal_seconds", 1, map[string]string{"namespace": ns})
	truth := sw.removedAfter(t, "web", string(a.UID), pw.notServingTime(t, a.Name))
	t.Logf("removal after readiness lost: measured %.3fs, test's own watches %.3fs, batch period %v", got, truth, sliceBatchPeriod)
	if !within(got, sliceBatchPeriod.Seconds(), podTolerance) || !within(got, truth, podTolerance) {
		t.Errorf("removal = %.3fs, want the batch period %v and the watched %.3fs ± %.1fs", got, sliceBatchPeriod, truth, podTolerance)
	}

	// Scale-down by hand: b terminates (1 s grace: kwok deletes it then).
	sw.waitQuiet(t, "web", resyncAfterOwnWrite)
	grace := int64(1)
	if err := client.CoreV1().Pods(ns).Delete(ctx, b.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	sum, _ := histogram(e.scrape(), "kube_convergence_endpoint_removal_seconds", map[string]string{"namespace": ns})
	eventually(t, 30*time.Second, "the second removal", func() (bool, string) {
		s, c := histogram(e.scrape(), "kube_convergence_endpoint_removal_seconds", map[string]string{"namespace": ns})
		sum = s
		return c == 2, fmt.Sprint("count ", c)
	})
	terminated := sum - got
	truth = sw.removedAfter(t, "web", string(b.UID), pw.notServingTime(t, b.Name))
	t.Logf("removal after termination started: measured %.3fs, test's own watches %.3fs", terminated, truth)
	if !within(terminated, sliceBatchPeriod.Seconds(), podTolerance) || !within(terminated, truth, podTolerance) {
		t.Errorf("removal = %.3fs, want the batch period %v and the watched %.3fs ± %.1fs", terminated, sliceBatchPeriod, truth, podTolerance)
	}
}

// Pods that never become Ready, and one that cannot be scheduled: counted
// in pods_not_ready with their reason, as bad against the startup SLI while
// they are stuck, then stalled; never as endpoint propagation.
func TestNotReadyPodsCountWhileStuck(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "pod-stuck")
	service(t, ns, "stuck")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "stuck", 2, demo.NeverReady), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := demo.PodTemplate("nowhere", nil)
	lost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere", Labels: tmpl.Labels}, Spec: tmpl.Spec}
	lost.Spec.NodeSelector = map[string]string{"type": "no-such-node"}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, lost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	notReady := func(reason string) float64 {
		v, _ := value(e.scrape(), "kube_convergence_pods_not_ready", map[string]string{"namespace": ns, "reason": reason})
		return v
	}
	eventually(t, 30*time.Second, "pods_not_ready by reason", func() (bool, string) {
		rf, un := notReady("readiness_failing"), notReady("unschedulable")
		return rf == 2 && un == 1, fmt.Sprintf("readiness_failing=%v unschedulable=%v", rf, un)
	})
	if _, ok := value(e.scrape(), "kube_convergence_pods_not_ready", map[string]string{"namespace": ns, "reason": "image_pull"}); !ok {
		t.Errorf("pods_not_ready{reason=image_pull} not zero-initialised")
	}
	// Bad while stuck: the 5 s crossings come 5 s after creation, not when
	// (if ever) the pods become Ready.
	exceeded := func(owner, stage, threshold string) float64 {
		v, _ := value(e.scrape(), "kube_convergence_pod_startup_threshold_exceeded_total",
			map[string]string{"namespace": ns, "owner_kind": owner, "stage": stage, "threshold": threshold})
		return v
	}
	eventually(t, 20*time.Second, "the 5 s crossings of the stuck pods", func() (bool, string) {
		r, s := exceeded("ReplicaSet", "ready", "5.0"), exceeded("none", "scheduled", "5.0")
		return r == 2 && s == 1, fmt.Sprintf("ready=%v scheduled=%v", r, s)
	})
	t.Logf("5 s crossings counted %.1fs after creation, pods still not ready", time.Since(created).Seconds())
	if exceeded("ReplicaSet", "ready", "30.0") != 0 && time.Since(created) < 30*time.Second {
		t.Errorf("30 s crossed early")
	}
	eventually(t, stallThreshold+30*time.Second, "stalled pods", func() (bool, string) {
		mfs := e.scrape()
		var stuck, unsched int
		for _, m := range mfs["kube_convergence_pod_stalled_seconds"].GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["namespace"] != ns || m.GetGauge().GetValue() <= stallThreshold.Seconds() {
				continue
			}
			switch {
			case l["stage"] == "containers_ready" && l["reason"] == "readiness_failing":
				stuck++
			case l["name"] == "nowhere" && l["stage"] == "scheduled" && l["reason"] == "unschedulable":
				unsched++
			}
		}
		return stuck == 2 && unsched == 1, fmt.Sprintf("stalled readiness_failing=%d unschedulable=%d", stuck, unsched)
	})
	mfs := e.scrape()
	if _, c := histogram(mfs, "kube_convergence_pod_startup_seconds", map[string]string{"namespace": ns, "stage": "ready"}); c != 0 {
		t.Errorf("never-ready pods observed as ready: %d", c)
	}
	if v, _ := value(mfs, "kube_convergence_endpoint_propagation_threshold_exceeded_total", map[string]string{"namespace": ns}); v != 0 {
		t.Errorf("never-ready pods counted against endpoint propagation: %v", v)
	}
}

// podSeconds waits until the histogram has n observations for the labels
// and returns their mean.
func podSeconds(t *testing.T, e *exporterProc, name string, n uint64, labels map[string]string) float64 {
	t.Helper()
	var sum float64
	eventually(t, 60*time.Second, fmt.Sprintf("%s%v count %d", name, labels, n), func() (bool, string) {
		s, c := histogram(e.scrape(), name, labels)
		sum = s
		return c == n, fmt.Sprintf("count %d sum %.3f", c, s)
	})
	return sum / float64(n)
}

// podTimeline is the test's own record of its pods, with its own receive
// times: when each was created and when each condition first turned True.
type podTimeline struct {
	mu         sync.Mutex
	created    map[string]time.Time
	reached    map[string]map[corev1.PodConditionType]time.Time
	uid        map[string]string    // name -> uid
	notServing map[string]time.Time // name -> first receive time not Ready or terminating after being Ready
}

func watchPods(t *testing.T, ns string) *podTimeline {
	t.Helper()
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	pt := &podTimeline{created: map[string]time.Time{}, reached: map[string]map[corev1.PodConditionType]time.Time{},
		uid: map[string]string{}, notServing: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pt.mu.Lock()
			if _, seen := pt.created[p.Name]; !seen {
				pt.created[p.Name] = now
				pt.reached[p.Name] = map[corev1.PodConditionType]time.Time{}
				pt.uid[p.Name] = string(p.UID)
			}
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					continue
				}
				if c.Type == corev1.PodReady {
					ready = true
				}
				if _, done := pt.reached[p.Name][c.Type]; !done {
					pt.reached[p.Name][c.Type] = now
				}
			}
			_, wasReady := pt.reached[p.Name][corev1.PodReady]
			if wasReady && (!ready || p.DeletionTimestamp != nil) {
				if _, done := pt.notServing[p.Name]; !done {
					pt.notServing[p.Name] = now
				}
			}
			pt.mu.Unlock()
		}
	}()
	return pt
}

// meanSinceCreated waits until n pods reached cond and returns the mean time
// from their creation.
func (pt *podTimeline) meanSinceCreated(t *testing.T, cond corev1.PodConditionType, n int) float64 {
	t.Helper()
	var mean float64
	eventually(t, 30*time.Second, fmt.Sprintf("%d pods with %s in the test's watch", n, cond), func() (bool, string) {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		var sum float64
		count := 0
		for name, r := range pt.reached {
			if at, ok := r[cond]; ok {
				sum += at.Sub(pt.created[name]).Seconds()
				count++
			}
		}
		if count > 0 {
			mean = sum / float64(count)
		}
		return count == n, fmt.Sprint(count)
	})
	return mean
}

// readyTimes returns the receive time of each pod's Ready, by pod UID.
func (pt *podTimeline) readyTimes() map[string]time.Time {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := map[string]time.Time{}
	for name, r := range pt.reached {
		if at, ok := r[corev1.PodReady]; ok {
			out[pt.uid[name]] = at
		}
	}
	return out
}

func (pt *podTimeline) notServingTime(t *testing.T, name string) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, 10*time.Second, name+" not serving in the test's watch", func() (bool, string) {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		v, ok := pt.notServing[name]
		at = v
		return ok, "not yet"
	})
	return at
}

// sliceTimeline is the test's own record of EndpointSlices: when each pod
// first became, and then stopped being, a ready endpoint of each Service,
// and the trigger lag of each update, with its own receive times.
type sliceTimeline struct {
	mu        sync.Mutex
	ready     map[string]map[string]map[string]bool // service -> slice -> pod UID ready
	published map[string]time.Time                  // service/uid
	removed   map[string]time.Time                  // service/uid, after published
	lags      []float64
	trigger   map[string]string    // slice -> last trigger annotation
	last      map[string]time.Time // service -> receive time of its last slice event
}

func watchSlices(t *testing.T, ns string) *sliceTimeline {
	t.Helper()
	w, err := client.DiscoveryV1().EndpointSlices(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	st := &sliceTimeline{ready: map[string]map[string]map[string]bool{}, published: map[string]time.Time{},
		removed: map[string]time.Time{}, trigger: map[string]string{}, last: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			svc := s.Labels[discoveryv1.LabelServiceName]
			st.mu.Lock()
			st.last[svc] = now
			if st.ready[svc] == nil {
				st.ready[svc] = map[string]map[string]bool{}
			}
			cur := map[string]bool{}
			for _, ep := range s.Endpoints {
				terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
				if ep.TargetRef != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) && !terminating {
					cur[string(ep.TargetRef.UID)] = true
				}
			}
			if ev.Type == "DELETED" {
				cur = map[string]bool{}
			}
			st.ready[svc][s.Name] = cur
			union := map[string]bool{}
			for _, sl := range st.ready[svc] {
				for uid := range sl {
					union[uid] = true
				}
			}
			for uid := range union {
				if _, ok := st.published[svc+"/"+uid]; !ok {
					st.published[svc+"/"+uid] = now
				}
			}
			for key := range st.published {
				if svcOf, uid := splitKey(key); svcOf == svc && !union[uid] {
					if _, ok := st.removed[key]; !ok {
						st.removed[key] = now
					}
				}
			}
			if v := s.Annotations["endpoints.kubernetes.io/last-change-trigger-time"]; v != "" && v != st.trigger[s.Name] {
				st.trigger[s.Name] = v
				if tt, err := time.Parse(time.RFC3339Nano, v); err == nil {
					st.lags = append(st.lags, now.Sub(tt).Seconds())
				}
			}
			st.mu.Unlock()
		}
	}()
	return st
}

func splitKey(key string) (string, string) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

// meanPublishedAfter waits until n pods with a Ready time are ready
// endpoints of svc and returns the mean delay, never negative.
func (st *sliceTimeline) meanPublishedAfter(t *testing.T, svc string, readyAt map[string]time.Time, n int) float64 {
	t.Helper()
	var mean float64
	eventually(t, 30*time.Second, fmt.Sprintf("%d pods published in %s in the test's watch", n, svc), func() (bool, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		var sum float64
		count := 0
		for uid, ready := range readyAt {
			if at, ok := st.published[svc+"/"+uid]; ok {
				sum += max(0, at.Sub(ready).Seconds())
				count++
			}
		}
		if count > 0 {
			mean = sum / float64(count)
		}
		return count == n, fmt.Sprint(count)
	})
	return mean
}

// removedAfter waits until uid is no longer a ready endpoint of svc and
// returns the time since since, never negative.
func (st *sliceTimeline) removedAfter(t *testing.T, svc, uid string, since time.Time) float64 {
	t.Helper()
	var d float64
	eventually(t, 30*time.Second, uid+" removed from "+svc+" in the test's watch", func() (bool, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		at, ok := st.removed[svc+"/"+uid]
		d = max(0, at.Sub(since).Seconds())
		return ok, "not yet"
	})
	return d
}

// waitQuiet waits until no slice of svc changed for d: the controller's
// syncs caused by its last write are over.
func (st *sliceTimeline) waitQuiet(t *testing.T, svc string, d time.Duration) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("slices of %s quiet for %v", svc, d), func() (bool, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		since := time.Since(st.last[svc])
		return since > d, fmt.Sprintf("last change %v ago", since)
	})
}

func (st *sliceTimeline) meanTriggerLag() float64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.lags) == 0 {
		return 0
	}
	var sum float64
	for _, l := range st.lags {
		sum += l
	}
	return sum / float64(len(st.lags))
}

// serviceFor is a Service selecting app, published by readiness.
func serviceFor(ns, name, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}
