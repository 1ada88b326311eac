package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/prometheus/common/model"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

const (
	retriesTotal   = "kube_convergence_controller_retries_total"
	retryInterval  = "kube_convergence_controller_retry_interval_seconds"
	failingObjects = "kube_convergence_controller_failing_objects"
)

func newNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// rejectedPodCreates counts, in the API server's audit log, the pod creates
// in namespace that were answered 403: the truth the ReplicaSet
// controller's FailedCreate events stand for.
func rejectedPodCreates(t *testing.T, namespace string) int {
	t.Helper()
	return len(audited(t, "pods", namespace, func(e auditEvent) bool {
		return e.Verb == "create" && e.ResponseStatus.Code == 403
	}))
}

// intervalBuckets returns the cumulative bucket counts of the retry
// interval histogram of (controller, kind), by upper bound.
func intervalBuckets(mfs map[string]*dto.MetricFamily, match map[string]string) map[float64]uint64 {
	out := map[float64]uint64{}
	mf := mfs[retryInterval]
	if mf == nil {
		return out
	}
	for _, m := range mf.Metric {
		if labelsMatch(m, match) && m.Histogram != nil {
			for _, b := range m.Histogram.Bucket {
				out[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			out[-1] = m.Histogram.GetSampleCount()
		}
	}
	return out
}

// quotaNamespace creates namespace ns with a ResourceQuota of 0 pods and
// waits until the quota controller has computed it.
func quotaNamespace(t *testing.T, ns string) {
	t.Helper()
	newNamespace(t, client, ns)
	podQuota(t, ns, "no-pods", "0")
}

// podQuota creates the ResourceQuota name in ns allowing pods pods, and
// waits until the quota controller has computed it: until it has set
// status.hard, quota admission rejects for another reason ("status unknown
// for quota"), so a test would not see only "exceeded quota".
func podQuota(t *testing.T, ns, name, pods string) {
	t.Helper()
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}}}
	if _, err := client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "quota status computed", func() (bool, string) {
		q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, ok := q.Status.Hard[corev1.ResourcePods]
		return ok, fmt.Sprint(q.Status)
	})
}

// blockedReplicaSet creates the ReplicaSet "blocked" of one replica in ns,
// whose pod the quota forbids.
func blockedReplicaSet(t *testing.T, ns string) {
	t.Helper()
	labels := map[string]string{"app": "quota"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}}}
	if _, err := client.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRetriesQuotaFailedCreate: a ReplicaSet whose pods a ResourceQuota
// forbids. The ReplicaSet controller retries with its per-item back-off
// (5 ms doubling) and records FailedCreate with the legacy recorder; the
// exporter's count must match the 403s in the API server's audit log within
// ±1, while below the recorder's burst of 25, and its intervals must grow.
func TestRetriesQuotaFailedCreate(t *testing.T) {
	ctx := context.Background()
	ns := "retries-quota"
	exp := shared.forTest(t)
	key := map[string]string{"controller": "replicaset-controller", "reason": "FailedCreate", "kind": "ReplicaSet"}
	ikey := map[string]string{"controller": "replicaset-controller", "kind": "ReplicaSet"}
	quotaNamespace(t, ns)
	mfs := exp.scrape()
	before, _ := value(mfs, retriesTotal, key)
	bucketsBefore := intervalBuckets(mfs, ikey)
	blockedReplicaSet(t, ns)
	created := time.Now()
	// 13 attempts take about 20 s of back-off (5 ms doubling: the 13th
	// comes about 10 s after the 12th), well below the legacy recorder's
	// burst of 25 events per object.
	const attempts = 13
	eventually(t, 60*time.Second, fmt.Sprintf("%d pod creates rejected", attempts), func() (bool, string) {
		n := rejectedPodCreates(t, ns)
		return n >= attempts, fmt.Sprint(n, " rejected")
	})
	if err := client.AppsV1().ReplicaSets(ns).Delete(ctx, "blocked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var rejected int
	var counted float64
	eventually(t, 20*time.Second, "retries counted as the audit log's 403s", func() (bool, string) {
		rejected = rejectedPodCreates(t, ns)
		v, _ := value(exp.scrape(), retriesTotal, key)
		counted = v - before
		return counted == float64(rejected), fmt.Sprintf("counted %v, rejected %d", counted, rejected)
	})
	t.Logf("ReplicaSet retried for %s: %d pod creates rejected (audit log), %v FailedCreate occurrences counted", stopped.Sub(created).Round(time.Millisecond), rejected, counted)
	if !within(counted, float64(rejected), 1) || rejected >= 25 {
		t.Errorf("counted %v, audit log %d rejected creates (want within ±1, below 25)", counted, rejected)
	}
	mfs = exp.scrape()
	if v, _ := value(mfs, failingObjects, key); v < 1 {
		t.Errorf("failing_objects %v, want at least the blocked ReplicaSet", v)
	}
	after := intervalBuckets(mfs, ikey)
	d := func(le float64) uint64 { return after[le] - bucketsBefore[le] }
	t.Logf("interval histogram deltas: le=1 %d, le=2 %d, le=5 %d, le=10 %d, le=30 %d, count %d", d(1), d(2), d(5), d(10), d(30), d(-1))
	// Back-off doubling from 5 ms: most gaps are under 1 s, the last ones
	// grow past 5 s. One interval per occurrence after the first.
	if d(-1) < uint64(rejected)-2 || d(1) < 5 || d(-1)-d(5) < 1 {
		t.Errorf("intervals do not show a growing back-off: %d observations, %d ≤ 1 s, %d > 5 s", d(-1), d(1), d(-1)-d(5))
	}
}

// TestRetriesUnschedulablePod: the scheduler records FailedScheduling with
// the events.k8s.io recorder: the first occurrence creates the Event, a
// second isomorphic one sets series.count 2, later ones reach the API only
// every 30 minutes. A pod that fits no node is tried once (1), once more
// when a node matching its selector appears but is tainted (2), and then not
// again within the test. Seen on v1.37: the second occurrence is a second
// Event (count 1), not series.count 2, because the recorder's isomorphic
// key holds the regarding reference with its resourceVersion, which the
// scheduler's PodScheduled=False status write between the attempts changed
// (client-go tools/events event_broadcaster.go getKey). Counted alike: 1,
// then 2, then nothing new.
func TestRetriesUnschedulablePod(t *testing.T) {
	ctx := context.Background()
	ns := "retries-sched"
	newNamespace(t, client, ns)
	exp := shared.forTest(t)
	key := map[string]string{"controller": "default-scheduler", "reason": "FailedScheduling", "kind": "Pod"}
	before, _ := value(exp.scrape(), retriesTotal, key)
	delta := func() float64 { v, _ := value(exp.scrape(), retriesTotal, key); return v - before }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kce.test/pool": "retries"},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), "nowhere", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	eventually(t, 20*time.Second, "first FailedScheduling counted", func() (bool, string) {
		d := delta()
		return d == 1, fmt.Sprint(d)
	})
	// A node that matches the selector wakes the pod (NodeAffinity's
	// queueing hint), and its taint rejects it again.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kce-retries-tainted", Labels: map[string]string{"kce.test/pool": "retries"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kce.test/blocked", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The pod goes first (cleanups run last-in first-out... so delete it
		// here too): a node deletion would wake it once more.
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), "nowhere", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		_ = client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	eventually(t, 30*time.Second, "second FailedScheduling counted", func() (bool, string) {
		d := delta()
		return d == 2, fmt.Sprint(d)
	})
	// Nothing new: the next occurrences only reach the API at the series'
	// 30-minute refresh (or the scheduler's 5-minute flush of unschedulable
	// pods). Watch for 5 s.
	quiet := time.Now().Add(5 * time.Second)
	for time.Now().Before(quiet) {
		if d := delta(); d != 2 {
			t.Fatalf("FailedScheduling counted %v, want 2 and nothing new", d)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The API's own record of it.
	evs, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling,regarding.name=nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	var total int32
	for _, e := range evs.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		total += n
		t.Logf("Event %s: series %v, note %q", e.Name, e.Series, e.Note)
	}
	if total != 2 {
		t.Errorf("the API shows %d FailedScheduling occurrences in %d Events, the exporter counted 2", total, len(evs.Items))
	}
}

// gapEvent is an events.k8s.io Event the test writes as a recorder would.
func gapEvent(ns, name, controller string, count int32) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: controller,
		ReportingInstance:   "e2e",
		Action:              "Sync",
		Reason:              "BackOff",
		Type:                corev1.EventTypeWarning,
		Note:                "retrying",
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name},
	}
	if count > 1 {
		e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(time.Now())}
	}
	return e
}

func setSeries(t *testing.T, c kubernetes.Interface, ns, name string, count int32) {
	t.Helper()
	ctx := context.Background()
	e, err := c.EventsV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(time.Now())}
	if _, err := c.EventsV1().Events(ns).Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRetriesGapsCountNothing: occurrences written while the exporter was
// cut off, a relist after an API server restart, and a restarted exporter
// count nothing; live occurrences after each count exactly. The churn
// collector's updates likewise: Service writes of the gap come back by a
// relist and are not counted.
func TestRetriesGapsCountNothing(t *testing.T) {
	s := watchSandbox(t)
	ctx := context.Background()
	proxy, err := s.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Restore)
	direct := kubernetes.NewForConfigOrDie(s.AdminConfig())
	run := watchRuns.Add(1)
	ns := fmt.Sprintf("retries-gap-%d", run)
	controller := fmt.Sprintf("kce.test/retries-gap-%d", run)
	newNamespace(t, direct, ns)
	e := startExporter(t, "--kubeconfig="+proxy.Kubeconfig(""))
	e.waitReady(60 * time.Second)
	key := map[string]string{"controller": controller, "reason": "BackOff", "kind": "Pod"}
	events := map[string]string{"resource": informers.WarningEvents.String()}
	counted := func(e *exporterProc) float64 { v, _ := value(e.scrape(), retriesTotal, key); return v }
	waitCounted := func(e *exporterProc, want float64, what string) {
		t.Helper()
		eventually(t, 15*time.Second, what, func() (bool, string) {
			v := counted(e)
			return v == want, fmt.Sprint(v)
		})
	}
	if _, err := direct.EventsV1().Events(ns).Create(ctx, gapEvent(ns, "a", controller, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCounted(e, 1, "the live occurrence counted")

	// The churn collector's updates, on a Service (uncached in this
	// sandbox: it relists after the compaction below).
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := direct.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writeStatus := func(ip string) {
		t.Helper()
		s, err := direct.CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if _, err := direct.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	serviceUpdates := func() float64 {
		v, _ := value(e.scrape(), objectWrites, map[string]string{"kind": "Service", "namespace": ns})
		return v
	}
	writeStatus("192.0.2.1")
	eventually(t, 15*time.Second, "a live Service update counted", func() (bool, string) {
		v := serviceUpdates()
		return v == 1, fmt.Sprint(v)
	})

	// 1. A cut of a few seconds with an etcd compaction, as in the watch
	// tests (seen: the Events watch gets 410 and relists, reason expired).
	mfs := e.scrape()
	relists, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": events["resource"], "reason": "expired"})
	serviceRelists, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": "services", "reason": "expired"})
	proxy.Cut()
	cutAt := time.Now()
	setSeries(t, direct, ns, "a", 5)
	if _, err := direct.EventsV1().Events(ns).Create(ctx, gapEvent(ns, "b", controller, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		writeStatus(ip)
	}
	time.Sleep(2*time.Second - time.Since(cutAt)) // the writes must be older than the second the watch resumes
	if _, err := s.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	// b, created in the gap, shows as a second failing object once the
	// exporter has read the gap (from b's own last-occurrence time).
	eventually(t, 30*time.Second, "the gap's Event seen", func() (bool, string) {
		v, _ := value(e.scrape(), failingObjects, key)
		return v == 2, fmt.Sprint(v)
	})
	mfs = e.scrape()
	r, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": events["resource"], "reason": "expired"})
	t.Logf("after the cut: Warning Events relisted %v times (0: resumed and replayed)", r-relists)
	if v := counted(e); v != 1 {
		t.Errorf("after the cut: counted %v, want 1 (the gap's 4+3 occurrences are not counted)", v)
	}
	setSeries(t, direct, ns, "a", 6)
	waitCounted(e, 2, "a live occurrence after the cut counted once")
	eventually(t, 30*time.Second, "Services relisted", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_watch_relists_total", map[string]string{"resource": "services", "reason": "expired"})
		return v > serviceRelists, fmt.Sprint(v)
	})
	if v := serviceUpdates(); v != 1 {
		t.Errorf("after the relist: Service updates %v, want 1 (the gap's 3 writes are not counted)", v)
	}
	writeStatus("192.0.2.5")
	eventually(t, 15*time.Second, "a live Service update after the relist counted once", func() (bool, string) {
		v := serviceUpdates()
		return v == 2, fmt.Sprint(v)
	})

	// 2. An API server restart, with a write made while the exporter was
	// cut off from it (seen: the Events watch resumes and the new server
	// replays the write as an ordinary event, which the list/watch layer
	// marks as replayed). Whether it relists or resumes, writes made before
	// the watch is back are the gap's: a probe Event is created every 2 s
	// until one is counted live; then the count is 2 + that probe, and a's
	// 3 occurrences of the gap are not in it.
	relistCount := func() string {
		mfs := e.scrape()
		var out string
		for _, reason := range []string{"expired", "error"} {
			v, _ := value(mfs, "kube_convergence_watch_relists_total", map[string]string{"resource": events["resource"], "reason": reason})
			out += fmt.Sprintf("%s=%v ", reason, v)
		}
		return out
	}
	before2 := relistCount()
	proxy.Cut()
	setSeries(t, direct, ns, "a", 9)
	if err := s.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	probes := 0
	deadline := time.Now().Add(60 * time.Second)
	for counted(e) == 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no probe Event counted within 60 s of the restart (%d created)", probes)
		}
		probes++
		if _, err := direct.EventsV1().Events(ns).Create(ctx, gapEvent(ns, fmt.Sprint("probe-", probes), controller, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(2 * time.Second)
		for counted(e) == 2 && time.Now().Before(until) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if v := counted(e); v != 3 {
		t.Errorf("after the restart: counted %v, want 3 (the first probe counted live; a's 3 occurrences of the gap not)", v)
	}
	t.Logf("after the restart: probe %d was the first counted live (earlier ones were written before the watch was back)", probes)
	t.Logf("events relists before the restart %s, after %s", before2, relistCount())
	setSeries(t, direct, ns, "a", 10)
	waitCounted(e, 4, "a live occurrence after the restart counted once")

	// 3. A restarted exporter takes every Event as its baseline.
	if _, err := e.stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	e2 := startExporter(t, "--kubeconfig="+s.Kubeconfig(""))
	e2.waitReady(60 * time.Second)
	if v := counted(e2); v != 0 {
		t.Errorf("restarted exporter counted %v old occurrences, want 0", v)
	}
	// Its failing objects come from the Events' own last-occurrence times:
	// a, b and the probes regard 2 + probes pods, all within the failing
	// window.
	if v, _ := value(e2.scrape(), failingObjects, key); v != float64(2+probes) {
		t.Errorf("restarted exporter: failing_objects %v, want %d", v, 2+probes)
	}
	setSeries(t, direct, ns, "a", 11)
	waitCounted(e2, 1, "the restarted exporter counts the next live occurrence once")
}

// TestForbiddenEventsDisableRetriesAlone: without list/watch on Events the
// retries collector is off (collector_up 0, named in /readyz), and so is
// timelines (its Warning Events feed); every other collector runs.
func TestForbiddenEventsDisableRetriesAlone(t *testing.T) {
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(noEventsUser))
	body := e.waitReady(60 * time.Second)
	if !strings.Contains(body, "collector retries: disabled (forbidden by RBAC") {
		t.Errorf("/readyz does not name the retries collector as forbidden:\n%s", body)
	}
	mfs := e.scrape()
	for _, c := range []string{"rollouts", "pods", "endpoints", "resources", "retries", "timelines"} {
		want := map[bool]float64{true: 0, false: 1}[c == "retries" || c == "timelines"]
		if v, ok := value(mfs, "kube_convergence_collector_up", map[string]string{"collector": c}); !ok || v != want {
			t.Errorf("collector_up{%s} = %v (found %v), want %v", c, v, ok, want)
		}
	}
}

// TestControllerRulesOnKCM: a real Prometheus scrapes the sandbox's
// kube-controller-manager with the bundled rules; during a quota-blocked
// ReplicaSet every workqueue record returns a result for it, and the
// replicaset queue retries (its retries per add is above 0). The reconcile
// error ratio is controller-runtime's (KCM has no reconcile counters); it is
// tested by promtool (rules/tests/controllers.test.yml).
func TestControllerRulesOnKCM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prom := startRulesPrometheus(ctx, t, shared.forTest(t), "")
	if _, err := prom.WaitFor(ctx, `up{job="kube-controller-manager"} == 1`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ns := "retries-rules"
	quotaNamespace(t, ns)
	blockedReplicaSet(t, ns)
	for _, q := range []string{
		`job_name:workqueue_retries_per_add:ratio_rate5m{job="kube-controller-manager", name="replicaset"} > 0`,
		`job_name:workqueue_queue_duration_seconds:p99_rate5m{job="kube-controller-manager", name="replicaset"}`,
		`job_name:workqueue_unfinished_work_seconds:max{job="kube-controller-manager", name="replicaset"}`,
		`job_name:workqueue_longest_running_processor_seconds:max{job="kube-controller-manager", name="replicaset"}`,
	} {
		v, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) > 0 }, 60*time.Second)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		t.Logf("%s = %v", q, v[0].Value)
	}
	n, err := prom.RuleEvaluationFailures(ctx)
	if err != nil || n != 0 {
		t.Errorf("rule evaluation failures %v (err %v), want 0", n, err)
	}
}

// TestRetriesHostileEvents: Events any client can write: one regarding a
// kind nobody serves, one without regarding, one with a 1 KB note of
// label-like text. Each is counted under its kind (none without one); notes
// never become labels; the exporter keeps serving.
func TestRetriesHostileEvents(t *testing.T) {
	ctx := context.Background()
	exp := shared.forTest(t)
	ns := "retries-hostile"
	newNamespace(t, client, ns)
	const controller = "kce.test/hostile"
	invented := gapEvent(ns, "invented", controller, 1)
	invented.Regarding = corev1.ObjectReference{APIVersion: "evil.example.com/v1", Kind: "Frobnicator", Namespace: ns, Name: "x"}
	invented.Note = strings.Repeat(`kind="Pod",reason="x"} 1e9 `, 40)[:1000]
	// An Event without regarding must live in the default namespace (API
	// validation: the regarding namespace must match the Event's, empty
	// only in default).
	bare := gapEvent(metav1.NamespaceDefault, "kce-retries-bare", controller, 1)
	bare.Regarding = corev1.ObjectReference{}
	t.Cleanup(func() {
		_ = client.EventsV1().Events(metav1.NamespaceDefault).Delete(context.Background(), bare.Name, metav1.DeleteOptions{})
	})
	before := map[string]float64{}
	mfs := exp.scrape()
	for _, kind := range []string{"Frobnicator.evil.example.com", "none"} {
		before[kind], _ = value(mfs, retriesTotal, map[string]string{"controller": controller, "reason": "BackOff", "kind": kind})
	}
	for _, e := range []*eventsv1.Event{invented, bare} {
		if _, err := client.EventsV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", e.Name, err)
		}
	}
	for kind, before := range before {
		eventually(t, 15*time.Second, "counted under kind "+kind, func() (bool, string) {
			v, _ := value(exp.scrape(), retriesTotal, map[string]string{"controller": controller, "reason": "BackOff", "kind": kind})
			return v-before == 1, fmt.Sprint(v - before)
		})
	}
	for _, m := range exp.scrape()[retriesTotal].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), "1e9") {
				t.Errorf("a note became a label: %v", m)
			}
		}
	}
}
