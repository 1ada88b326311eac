package pods

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// clock is the collector's injected clock.
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

// The adapter end to end over a fake API: live pods are timed from their
// creation, every reason of a namespace is exposed, and stalled pods are
// capped with the rest counted as dropped.
func TestCollectorOverInformers(t *testing.T) {
	clk := &clock{t: time.Now()}
	cfg := config.Default()
	cfg.Stall.SeriesLimit = 1
	c := New(cfg, time.Minute, slog.New(slog.DiscardHandler), clk.now)
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
	waitFor(t, "pods informer synced", func() bool { return f.Synced(informers.Pods) && f.Synced(informers.Nodes) })
	// Handlers attach after the sync, asynchronously: a pod created before
	// them would count as the initial list. Wait until a probe pod is seen.
	create(t, cs, pod("probe", clk.now()))
	waitFor(t, "handlers attached", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.seenNS) > 0 })

	p := pod("web-1", clk.now())
	create(t, cs, p)
	waitFor(t, "web-1 starting", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.tr.Starting(string(p.UID)) })
	// The startup opened, so its (namespace, owner_kind)
	// series exist at zero before anything is counted: 5 stages x 27
	// thresholds, and 5 histograms.
	if n := testutil.CollectAndCount(c.m.exceeded); n != 5*27 {
		t.Errorf("pre-created crossing series = %d, want 135", n)
	}
	if got := testutil.ToFloat64(c.m.exceeded.WithLabelValues("ns", "none", "ready", "5.0")); got != 0 {
		t.Errorf("ready crossed 5.0 = %v before anything happened", got)
	}
	if n := testutil.CollectAndCount(c.m.startup); n != 5 {
		t.Errorf("pre-created startup histograms = %d, want 5", n)
	}
	clk.add(1500 * time.Millisecond)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(clk.now())}}
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "scheduled observed", func() bool { return sampleCount(t, reg, "scheduled") == 1 })
	if got := testutil.ToFloat64(c.m.exceeded.WithLabelValues("ns", "none", "scheduled", "1.0")); got != 1 {
		t.Errorf("scheduled crossed 1.0: %v, want 1 (flushed before the observation)", got)
	}

	clk.add(2 * time.Minute)
	want := `
# HELP kube_convergence_pod_stalled_series_dropped_total Stalled pods left out of kube_convergence_pod_stalled_seconds by stall.seriesLimit, counted once per not-ready spell.
# TYPE kube_convergence_pod_stalled_series_dropped_total counter
kube_convergence_pod_stalled_series_dropped_total 1
`
	// The first scrape counts the dropped pod; a second one does not again.
	for range 2 {
		if n := testutil.CollectAndCount(scrape{c}, "kube_convergence_pod_stalled_seconds"); n != 1 {
			t.Errorf("stalled series = %d, want the cap of 1", n)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kube_convergence_pod_stalled_series_dropped_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(scrape{c}, "kube_convergence_pods_not_ready"); n != 9 {
		t.Errorf("pods_not_ready series = %d, want every reason of namespace ns", n)
	}
	if got, err := testutil.GatherAndCount(reg, "kube_convergence_pods_not_ready"); err != nil || got != 9 {
		t.Errorf("gathered pods_not_ready = %d, %v", got, err)
	}
}

// sampleCount is the observation count of the startup histogram of a stage.
func sampleCount(t *testing.T, reg prometheus.Gatherer, stage string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kube_convergence_pod_startup_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == stage {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func pod(name string, created time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func create(t *testing.T, cs *fake.Clientset, p *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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

// A deleted namespace's series go; a namespace folded into
// "other" by the allowlist keeps them (other namespaces share them).
func TestNamespaceDeletedDropsItsSeries(t *testing.T) {
	cfg := config.Default()
	cfg.NamespaceLabel.Mode = config.NamespaceAllowlist
	cfg.NamespaceLabel.Allow = []string{"team-a"}
	clk := &clock{t: time.Now()}
	c := New(cfg, time.Minute, slog.New(slog.DiscardHandler), clk.now)
	for _, ns := range []string{"team-a", "scratch"} {
		p := pod("web-1", clk.now())
		p.Namespace, p.UID = ns, types.UID("uid-"+ns)
		c.observePod(informers.CompactPod(p), tracker.LiveAt(clk.now()))
	}
	series := func(ns string) int {
		n := 0
		for _, v := range []*prometheus.CounterVec{c.m.exceeded, c.m.recovered} {
			ch := make(chan prometheus.Metric, 1000)
			v.Collect(ch)
			close(ch)
			for m := range ch {
				var d dto.Metric
				if err := m.Write(&d); err != nil {
					t.Fatal(err)
				}
				for _, l := range d.GetLabel() {
					if l.GetName() == "namespace" && l.GetValue() == ns {
						n++
					}
				}
			}
		}
		return n
	}
	if series("team-a") != 136 || series("other") != 136 {
		t.Fatalf("series before: team-a %d, other %d, want 135 crossings + 1 recovered each", series("team-a"), series("other"))
	}
	c.onNamespaceDeleted("team-a")
	c.onNamespaceDeleted("scratch")
	if got := series("team-a"); got != 0 {
		t.Errorf("team-a series after its deletion = %d, want 0", got)
	}
	if got := series("other"); got != 136 {
		t.Errorf("other series after scratch's deletion = %d, want 136 (shared)", got)
	}
	if c.seenNS["team-a"] || !c.seenNS["other"] {
		t.Errorf("seen namespaces = %v", c.seenNS)
	}
}

// Bad input: 50 pods, each owned by a different invented kind,
// and one with 300 scheduling gates. No series per object: one owner_kind
// value (other) for the 50, nothing opened for the gated one.
func TestInventedOwnerKindsAndManyGatesAddNoSeries(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := New(config.Default(), time.Minute, slog.New(slog.DiscardHandler), clk.now)
	yes := true
	for i := range 50 {
		p := pod(fmt.Sprintf("web-%d", i), clk.now())
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "evil.example.com/v1", Kind: fmt.Sprintf("Kind%d", i), Name: "x", UID: types.UID(fmt.Sprint(i)), Controller: &yes}}
		c.observePod(informers.CompactPod(p), tracker.LiveAt(clk.now()))
	}
	gated := pod("gated", clk.now())
	for i := range 300 {
		gated.Spec.SchedulingGates = append(gated.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: fmt.Sprintf("example.com/q%d", i)})
	}
	c.observePod(informers.CompactPod(gated), tracker.LiveAt(clk.now()))
	kinds := map[string]bool{}
	ch := make(chan prometheus.Metric, 10000)
	c.m.exceeded.Collect(ch)
	close(ch)
	n := 0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		n++
		for _, l := range d.GetLabel() {
			if l.GetName() == "owner_kind" {
				kinds[l.GetValue()] = true
			}
		}
	}
	if len(kinds) != 1 || !kinds["other"] || n != 5*27 {
		t.Errorf("owner_kind values %v over %d crossing series, want only other over 135", kinds, n)
	}
	if got := c.tr.NotReady()["ns"][tracker.PodSchedulingGated]; got != 1 {
		t.Errorf("scheduling_gated = %d, want 1", got)
	}
}

// A pod deleted and recreated under its name while the watch was down (a
// StatefulSet's) reaches the update handler at the relist with another uid:
// the old pod is no longer tracked, nor counted not ready, nor stalled.
func TestPodRecreatedDuringAWatchGap(t *testing.T) {
	clk := &clock{t: time.Now()}
	c := New(config.Default(), time.Minute, slog.New(slog.DiscardHandler), clk.now)
	old := pod("web-0", clk.now())
	informers.Handle(c.podHandlers()).OnAdd(informers.CompactPod(old), false)
	clk.add(2 * time.Minute) // the old pod stalled, then went inside the gap
	cur := pod("web-0", clk.now())
	cur.UID = "uid-web-0-recreated"
	informers.Stamp(cur, clk.now(), true) // delivered by the relist
	informers.Handle(c.podHandlers()).OnUpdate(informers.CompactPod(old), informers.CompactPod(cur))
	c.mu.Lock()
	tracked, stalled := c.tr.Tracked(), c.tr.Stalled(clk.now())
	c.mu.Unlock()
	if tracked != 1 {
		t.Errorf("pods tracked after the relist: %d, want 1 (the new pod)", tracked)
	}
	for _, s := range stalled {
		if s.Pod.UID == string(old.UID) {
			t.Errorf("the old pod is still stalled after the relist: %+v", s)
		}
	}
	notReady := 0.0
	ch := make(chan prometheus.Metric, 100)
	scrape{c}.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.Desc().String(), `"kube_convergence_pods_not_ready"`) {
			notReady += d.GetGauge().GetValue()
		}
	}
	if notReady != 1 {
		t.Errorf("pods not ready = %v, want 1 (the new pod only)", notReady)
	}
}
