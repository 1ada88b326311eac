package endpoints

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The adapter over a fake API: a pod turns Ready, its Service's slice
// publishes it 2 s later; a Service created afterwards selects it and is
// due from its creation; a publishNotReadyAddresses Service is not tracked.
func TestCollectorOverInformers(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := New(config.Default(), slog.New(slog.DiscardHandler), clk.now)
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := informers.New(cs, nil, slog.New(slog.DiscardHandler))
	if err := c.Start(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	mustCreateService(t, cs, "web", "web", false)
	mustCreateService(t, cs, "all", "web", true) // publishNotReadyAddresses: not tracked
	// An ExternalName Service with a selector is a DNS
	// alias, skipped by the EndpointSlice controller: not tracked (else the
	// pod's pair would stay pending, 2 pending below instead of 1).
	alias := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "alias"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", Selector: map[string]string{"app": "web"}}}
	if _, err := cs.CoreV1().Services("ns").Create(ctx, alias, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Handlers attach asynchronously once the caches synced, pods last: a
	// probe pod tracked means they all run, so what follows is live.
	mustCreateService(t, cs, "probe", "probe", false)
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "probe", UID: "probe", Labels: map[string]string{"app": "probe"}}}
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "handlers attached", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.tr.Tracked("probe") })
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "p1", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod tracked", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.tr.Tracked("p1") })

	clk.add(time.Second)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "propagation pending", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.tr.Pending() == 1 })
	clk.add(2 * time.Second)
	trigger := clk.now().Add(-2500 * time.Millisecond).UTC().Truncate(time.Second)
	mustCreateSlice(t, cs, "web", trigger, "p1")
	waitFor(t, "propagation observed", func() bool { return histogramCount(t, c.m.propagation.WithLabelValues("ns")) == 1 })
	if sum := histogramSum(t, c.m.propagation.WithLabelValues("ns")); sum != 2 {
		t.Errorf("propagation = %vs, want 2s", sum)
	}
	if got := testutil.ToFloat64(c.m.exceeded.WithLabelValues("ns", "1.0")); got != 1 {
		t.Errorf("crossed 1.0 = %v, want 1", got)
	}
	if got := histogramCount(t, c.m.triggerLag); got != 1 {
		t.Errorf("trigger lag observations = %d, want 1", got)
	}

	// A Service created after its pod: due from its creation.
	clk.add(10 * time.Second)
	mustCreateService(t, cs, "late", "web", false)
	waitFor(t, "the late pair pending", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.tr.Pending() == 1 })
	clk.add(100 * time.Millisecond)
	mustCreateSlice(t, cs, "late", time.Time{}, "p1")
	waitFor(t, "late propagation", func() bool { return histogramCount(t, c.m.propagation.WithLabelValues("ns")) == 2 })
	if sum := histogramSum(t, c.m.propagation.WithLabelValues("ns")); sum < 2.099 || sum > 2.101 {
		t.Errorf("propagation sum = %vs, want 2 s + 100 ms", sum)
	}
}

func mustCreateService(t *testing.T, cs *fake.Clientset, name, app string, publishNotReady bool) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}, PublishNotReadyAddresses: publishNotReady}}
	if _, err := cs.CoreV1().Services("ns").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustCreateSlice(t *testing.T, cs *fake.Clientset, svc string, trigger time.Time, ready ...string) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", UID: types.UID("slice-" + svc),
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}, Annotations: map[string]string{}}}
	if !trigger.IsZero() {
		s.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] = trigger.Format(time.RFC3339Nano)
	}
	yes := true
	for _, uid := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: &yes},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", UID: types.UID(uid)}})
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("ns").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func histogramSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A pair that becomes due creates its
// namespace's series at zero (14 thresholds, propagation and removal); the
// namespace's deletion deletes them.
func TestSeriesCreatedAtZeroAndDeletedWithTheNamespace(t *testing.T) {
	c := New(config.Default(), slog.New(slog.DiscardHandler), time.Now)
	c.observe([]tracker.EndpointEvent{{Type: tracker.EndpointPairDue, Namespace: "team-a", Service: "web", PodUID: "u1"}})
	if n := testutil.CollectAndCount(c.m.exceeded); n != 14 {
		t.Errorf("crossing series = %d, want 14 at zero", n)
	}
	if got := testutil.ToFloat64(c.m.exceeded.WithLabelValues("team-a", "5.0")); got != 0 {
		t.Errorf("crossed 5.0 = %v", got)
	}
	if n := testutil.CollectAndCount(c.m.propagation) + testutil.CollectAndCount(c.m.removal); n != 2 {
		t.Errorf("histograms = %d, want 2", n)
	}
	c.onNamespaceDeleted("team-a")
	if n := testutil.CollectAndCount(c.m.exceeded) + testutil.CollectAndCount(c.m.propagation) + testutil.CollectAndCount(c.m.removal); n != 0 {
		t.Errorf("series left after the namespace's deletion: %d", n)
	}
}

// recreatedCollector is a collector whose Service informer, never started,
// holds Service web selecting app=web: enough for the pod handlers.
func recreatedCollector(t *testing.T, clk *clock) *Collector {
	t.Helper()
	c := New(config.Default(), slog.New(slog.DiscardHandler), clk.now)
	c.services = cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Service{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := c.services.GetIndexer().Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func servedPod(uid string, ready bool, at time.Time, listed bool) *informers.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	informers.Stamp(p, at, listed)
	return informers.CompactPod(p)
}

// A pod deleted and recreated under its name while the watch was down
// reaches the update handler at the relist with another uid: the old pod's
// pending propagation ends instead of staying pending forever.
func TestPodRecreatedDuringAWatchGap(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := recreatedCollector(t, clk)
	old := servedPod("a", true, clk.now(), false)
	informers.Handle(c.podHandlers()).OnAdd(old, false) // Ready, never published: pending
	if c.tr.Pending() != 1 {
		t.Fatalf("pending before the gap: %d, want 1", c.tr.Pending())
	}
	clk.add(time.Minute)
	informers.Handle(c.podHandlers()).OnUpdate(old, servedPod("b", false, clk.now(), true))
	if c.tr.Tracked("a") || c.tr.Pending() != 0 {
		t.Errorf("after the relist: old pod tracked %v, %d pending; want false, 0", c.tr.Tracked("a"), c.tr.Pending())
	}
}

// An EndpointSlice deleted and recreated under its name while the watch was
// down, without the pod: the old slice no longer publishes it, so the pod
// turning Ready is pending until the new slice lists it.
func TestSliceRecreatedDuringAWatchGap(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := recreatedCollector(t, clk)
	slice := func(uid string, ready ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: types.UID(uid),
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
		yes := true
		for _, p := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: &yes},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", UID: types.UID(p)}})
		}
		informers.Stamp(s, clk.now(), true)
		return s
	}
	old := slice("s1", "p")
	informers.Handle(c.sliceHandlers()).OnAdd(old, true)
	informers.Handle(c.podHandlers()).OnAdd(servedPod("p", false, clk.now(), true), true)
	clk.add(time.Minute)
	informers.Handle(c.sliceHandlers()).OnUpdate(old, slice("s2"))
	informers.Handle(c.podHandlers()).OnAdd(servedPod("p", true, clk.now(), false), false)
	if c.tr.Pending() != 1 {
		t.Errorf("pending after the pod turned Ready: %d, want 1 (the recreated slice does not list it)", c.tr.Pending())
	}
}
