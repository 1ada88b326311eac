package e2e

// The acceptance of pod and endpoint timing, against the real binary and
// the sandbox, each number checked against an injected truth: a watch gap
// invents no observation, an ExternalName Service is not a publisher, and a
// gated pod's startup starts at its gate removal. Run alone:
//
//	go test -count=1 -p 1 -run 'TestTruth' ./e2e/

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// A proxy cut of a few seconds with an etcd compaction (so that the pod and
// Service watches, uncached in the watch sandbox, get 410 and relist):
// during it a Deployment's 3 pods are created, turn Ready and are published,
// and a fourth pod is created that turns Ready only after the relist.
// After the relist: no startup, interval, propagation or crossing observed
// for any of them, each counted once in pods_recovered_total. A pod created
// live afterwards is timed again.
//
// Run twice: with the compaction (the pod watch gets 410 and relists: the
// list mark) and without it (the watch resumes from its resource version and
// the API server replays the gap's writes as ordinary events at the resume:
// the list/watch layer marks them by their managedFields time).
func TestTruthPodsGapInventsNothing(t *testing.T) {
	t.Run("relist after 410", func(t *testing.T) { testPodsGap(t, true) })
	t.Run("resume replays the gap", func(t *testing.T) { testPodsGap(t, false) })
}

func testPodsGap(t *testing.T, compact bool) {
	s := watchSandbox(t)
	ctx := context.Background()
	proxy, err := s.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Restore)
	direct := kubernetes.NewForConfigOrDie(s.AdminConfig())
	ns := fmt.Sprintf("truth-gap-%d", watchRuns.Add(1))
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"live", "gap"} {
		if _, err := direct.CoreV1().Services(ns).Create(ctx, serviceFor(ns, app, app), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e := startExporter(t, "--kubeconfig="+proxy.Kubeconfig(""))
	e.waitReady(60 * time.Second)

	// A live pod first: proves the collectors' handlers run before the cut
	// (everything before them is the initial list) and gives the baseline.
	if _, err := direct.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "live", 1, demo.Delays(200*time.Millisecond, 300*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podSeconds(t, e, "kube_convergence_pod_startup_seconds", 1, map[string]string{"namespace": ns, "stage": "ready"})
	podSeconds(t, e, "kube_convergence_endpoint_propagation_seconds", 1, map[string]string{"namespace": ns})
	mfs := e.scrape()
	before := podCounts(mfs, ns)
	relistsBefore, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": "pods", "reason": "expired"})
	t.Logf("before the cut: %+v", before)

	proxy.Cut()
	cutAt := time.Now()
	const replicas = 3
	if _, err := direct.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "gap", replicas, demo.Delays(200*time.Millisecond, 300*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And one pod still starting at the relist (Ready 8 s after binding):
	// without the list mark it would be timed from the relist.
	if _, err := direct.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "slow", 1, demo.Delays(200*time.Millisecond, 8*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Truth: every gap pod Ready and published before the restore, as the
	// test sees it directly (not through the proxy).
	eventually(t, faultBudget, "3 gap pods Ready and published during the cut", func() (bool, string) {
		ready, published := readyAndPublished(ctx, t, direct, ns, "gap")
		return ready == replicas && published == replicas, fmt.Sprintf("ready %d, published %d", ready, published)
	})
	time.Sleep(3*time.Second - time.Since(cutAt)) // a cut of a few seconds, as after an API server restart
	var rev int64
	if compact {
		if rev, err = s.CompactEtcd(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if cut := time.Since(cutAt); cut > faultBudget {
		t.Fatalf("the cut lasted %s, over the %s budget: the watches would not get 410", cut, faultBudget)
	}
	proxy.Restore()
	t.Logf("cut for %s, etcd compacted at revision %d (0: not compacted)", time.Since(cutAt).Round(time.Millisecond), rev)

	// Pods and Services are uncached in the watch sandbox: after the
	// compaction their resumed watches get 410 and relist; without it they
	// resume and the gap's events are replayed. The slices' watch is
	// cached: it resumes and replays the gap's slice events either way.
	// Wait for the pod relist (or the resumed watch's first events), give
	// every handler time to run, then compare.
	eventually(t, 30*time.Second, "pods relisted after 410, or the pod watch resumed", func() (bool, string) {
		mfs := e.scrape()
		v, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": "pods", "reason": "expired"})
		if compact {
			return v-relistsBefore >= 1, fmt.Sprintf("+%v relists", v-relistsBefore)
		}
		rec, _ := value(mfs, "kube_convergence_pods_recovered_total", map[string]string{"namespace": ns})
		return v == relistsBefore && rec-before.recovered == replicas+1, fmt.Sprintf("+%v relists, +%v recovered; %+v; restarts %v", v-relistsBefore, rec-before.recovered, podCounts(mfs, ns), mfs["kube_convergence_watch_restarts_total"])
	})
	eventually(t, 30*time.Second, "the slow pod Ready", func() (bool, string) {
		ready, _ := readyAndPublished(ctx, t, direct, ns, "slow")
		return ready == 1, fmt.Sprint(ready)
	})
	time.Sleep(3 * time.Second)
	after := podCounts(e.scrape(), ns)
	t.Logf("after the relist: %+v", after)
	if after.startup != before.startup || after.interval != before.interval {
		t.Errorf("startup/interval observations went %d/%d -> %d/%d: a pod of the gap was timed", before.startup, before.interval, after.startup, after.interval)
	}
	if after.propagation != before.propagation || after.removal != before.removal {
		t.Errorf("propagation/removal observations went %d/%d -> %d/%d: a transition of the gap was observed", before.propagation, before.removal, after.propagation, after.removal)
	}
	if after.podCrossings != before.podCrossings || after.endpointCrossings != before.endpointCrossings {
		t.Errorf("crossings went %v/%v -> %v/%v: invented for the gap", before.podCrossings, before.endpointCrossings, after.podCrossings, after.endpointCrossings)
	}
	if after.recovered-before.recovered != replicas+1 {
		t.Errorf("pods_recovered_total +%v, want +%d (once per pod created in the gap)", after.recovered-before.recovered, replicas+1)
	}

	// Live again: a fourth pod is timed, and counted once.
	scale(t, direct, ns, "gap", replicas+1)
	podSeconds(t, e, "kube_convergence_pod_startup_seconds", 2, map[string]string{"namespace": ns, "stage": "ready"})
	if v, _ := value(e.scrape(), "kube_convergence_pods_recovered_total", map[string]string{"namespace": ns}); v-before.recovered != replicas+1 {
		t.Errorf("pods_recovered_total +%v after a live pod, want still +%d", v-before.recovered, replicas+1)
	}
}

// An ExternalName Service with a selector over Ready pods: the EndpointSlice
// controller publishes nothing for it, and the exporter tracks nothing for
// it. The pods' own Service is the control: its pairs are published in
// about the batch period (2 s) and cross nothing above 3 s; an ExternalName
// pair tracked by mistake would stay pending and cross 5 s and 10 s.
func TestTruthExternalNameServiceNotTracked(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-externalname")
	service(t, ns, "web")
	alias := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alias"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", Selector: map[string]string{"app": "web"}}}
	if _, err := client.CoreV1().Services(ns).Create(ctx, alias, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pw := watchPods(t, ns)
	const replicas = 2
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", replicas, demo.Delays(podCreateDelay, 4*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podSeconds(t, e, "kube_convergence_endpoint_propagation_seconds", replicas, map[string]string{"namespace": ns})
	pw.meanSinceCreated(t, corev1.PodReady, replicas)
	var lastReady time.Time
	for _, at := range pw.readyTimes() {
		if at.After(lastReady) {
			lastReady = at
		}
	}
	// Past the 10 s threshold of every pair due at Ready, plus two ticks.
	time.Sleep(time.Until(lastReady.Add(12 * time.Second)))
	mfs := e.scrape()
	if _, c := histogram(mfs, "kube_convergence_endpoint_propagation_seconds", map[string]string{"namespace": ns}); c != replicas {
		t.Errorf("propagation observations = %d, want %d (web only)", c, replicas)
	}
	for _, th := range []string{"5.0", "10.0"} {
		if v, _ := value(mfs, "kube_convergence_endpoint_propagation_threshold_exceeded_total", map[string]string{"namespace": ns, "threshold": th}); v != 0 {
			t.Errorf("propagation crossings of %s = %v, want 0: the ExternalName Service is tracked", th, v)
		}
	}
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=alias"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EndpointSlices of the ExternalName Service: %d (the controller skips it)", len(slices.Items))
	if len(slices.Items) != 0 {
		t.Errorf("the EndpointSlice controller published %d slices for an ExternalName Service", len(slices.Items))
	}
}

// A pod created with a scheduling gate, removed 20 s later; kwok injects
// pod-create 1 s and pod-ready 2 s after binding. ready = 3 s from the gate
// removal (± 0.3 s), equal to the test's own watch; nothing crossed and not
// stalled while gated; scheduling_gated counted meanwhile.
func TestTruthGatedPodStartsAtGateRemoval(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "truth-gated")
	gt := watchGatedPod(t, ns, "gated")
	tmpl := demo.PodTemplate("gated", demo.Delays(podCreateDelay, podReadyDelay))
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace, pod.Name = ns, "gated"
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/admission"}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "scheduling_gated counted", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_pods_not_ready", map[string]string{"namespace": ns, "reason": "scheduling_gated"})
		return v == 1, fmt.Sprint(v)
	})
	created, _, _ := gt.times(t, "gated created", func(c, _, _ time.Time) bool { return !c.IsZero() })
	time.Sleep(20*time.Second - time.Since(created))
	mfs := e.scrape()
	for _, th := range []string{"0.1", "1.0", "5.0", "10.0"} {
		if v, _ := value(mfs, "kube_convergence_pod_startup_threshold_exceeded_total", map[string]string{"namespace": ns, "stage": "scheduled", "threshold": th}); v != 0 {
			t.Errorf("crossed %s while gated: %v", th, v)
		}
	}
	if v, ok := value(mfs, "kube_convergence_pod_stalled_seconds", map[string]string{"namespace": ns, "name": "gated"}); ok {
		t.Errorf("gated pod stalled for %vs (stall threshold %v)", v, stallThreshold)
	}
	// Remove the gate: the startup clock starts at this update's receipt.
	patch := []byte(`{"spec":{"schedulingGates":null}}`)
	if _, err := client.CoreV1().Pods(ns).Patch(ctx, "gated", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"namespace": ns, "owner_kind": "none"}
	got := podSeconds(t, e, "kube_convergence_pod_startup_seconds", 1, with(labels, "stage", "ready"))
	_, ungated, ready := gt.times(t, "gated ungated and Ready", func(_, u, r time.Time) bool { return !u.IsZero() && !r.IsZero() })
	truth := ready.Sub(ungated).Seconds()
	injected := (podCreateDelay + podReadyDelay).Seconds()
	t.Logf("ready %.3fs after the gate removal; test's own watch %.3fs; injected %.1fs; %.1fs after creation", got, truth, injected, ready.Sub(created).Seconds())
	if !within(got, injected, podTolerance) || !within(got, truth, podTolerance) {
		t.Errorf("ready = %.3fs, want the injected %.1fs and the watched %.3fs ± %.1fs from the gate removal", got, injected, truth, podTolerance)
	}
	mfs = e.scrape()
	crossed := func(th string) float64 {
		v, _ := value(mfs, "kube_convergence_pod_startup_threshold_exceeded_total", with(with(labels, "stage", "ready"), "threshold", th))
		return v
	}
	if crossed("2.0") != 1 || crossed("4.0") != 0 {
		t.Errorf("ready crossings: 2.0 -> %v (want 1), 4.0 -> %v (want 0)", crossed("2.0"), crossed("4.0"))
	}
}

// podCountsT are the pod and endpoint observations of one namespace.
type podCountsT struct {
	startup, interval, propagation, removal uint64
	podCrossings, endpointCrossings         float64
	recovered                               float64
}

func podCounts(mfs map[string]*dto.MetricFamily, ns string) podCountsT {
	sel := map[string]string{"namespace": ns}
	var c podCountsT
	c.startup = histogramCountAll(mfs, "kube_convergence_pod_startup_seconds", sel)
	c.interval = histogramCountAll(mfs, "kube_convergence_pod_stage_interval_seconds", sel)
	c.propagation = histogramCountAll(mfs, "kube_convergence_endpoint_propagation_seconds", sel)
	c.removal = histogramCountAll(mfs, "kube_convergence_endpoint_removal_seconds", sel)
	c.podCrossings = counterSum(mfs, "kube_convergence_pod_startup_threshold_exceeded_total", sel)
	c.endpointCrossings = counterSum(mfs, "kube_convergence_endpoint_propagation_threshold_exceeded_total", sel)
	c.recovered, _ = value(mfs, "kube_convergence_pods_recovered_total", sel)
	return c
}

// histogramCountAll sums the observation counts of every series matching.
func histogramCountAll(mfs map[string]*dto.MetricFamily, name string, match map[string]string) uint64 {
	var n uint64
	for _, m := range mfs[name].GetMetric() {
		if labelsMatch(m, match) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

func counterSum(mfs map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var v float64
	for _, m := range mfs[name].GetMetric() {
		if labelsMatch(m, match) {
			v += m.GetCounter().GetValue()
		}
	}
	return v
}

// readyAndPublished counts an app's pods that are Ready, and those that are
// ready endpoints of the app's Service.
func readyAndPublished(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, app string) (ready, published int) {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready++
				uids[p.UID] = true
			}
		}
	}
	slices, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + app})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && uids[ep.TargetRef.UID] && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				published++
			}
		}
	}
	return ready, published
}

// gateTimeline is the test's own watch of one pod, with its own receive
// times: first seen, first seen without scheduling gates, first seen Ready.
type gateTimeline struct {
	mu                      sync.Mutex
	created, ungated, ready time.Time
}

func watchGatedPod(t *testing.T, ns, name string) *gateTimeline {
	t.Helper()
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	gt := &gateTimeline{}
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			gt.mu.Lock()
			if gt.created.IsZero() {
				gt.created = now
			}
			if len(p.Spec.SchedulingGates) == 0 && gt.ungated.IsZero() {
				gt.ungated = now
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && gt.ready.IsZero() {
					gt.ready = now
				}
			}
			gt.mu.Unlock()
		}
	}()
	return gt
}

// times waits until cond holds and returns the three receive times.
func (gt *gateTimeline) times(t *testing.T, what string, cond func(created, ungated, ready time.Time) bool) (created, ungated, ready time.Time) {
	t.Helper()
	eventually(t, 30*time.Second, what+" in the test's watch", func() (bool, string) {
		gt.mu.Lock()
		defer gt.mu.Unlock()
		created, ungated, ready = gt.created, gt.ungated, gt.ready
		return cond(created, ungated, ready), fmt.Sprintf("created %v, ungated %v, ready %v", created, ungated, ready)
	})
	return created, ungated, ready
}
