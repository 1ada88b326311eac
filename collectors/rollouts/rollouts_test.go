package rollouts

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newCollector(t *testing.T, cfg *config.Config) (*Collector, *prometheus.Registry) {
	t.Helper()
	c := New(cfg, time.Minute, slog.New(slog.DiscardHandler), func() time.Time { return t0 })
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func episode(ns string, recovered bool) tracker.Episode {
	return tracker.Episode{Kind: tracker.Deployment, UID: "u-" + ns, Namespace: ns, Name: "web", Generation: 2, Target: 2,
		Change: tracker.ChangeTemplate, Start: t0, Recovered: recovered}
}

// Live stage observations feed the SLI histogram; recovered ones (timed on
// the API server's 1 s clock) only their own family, and never pre-create
// the crossing series.
func TestRecoveredEpisodesStayOutOfTheLiveHistogram(t *testing.T) {
	c, _ := newCollector(t, config.Default())
	live, rec := episode("a", false), episode("b", true)
	c.observe([]tracker.Event{
		{Type: tracker.EpisodeOpened, Episode: live},
		{Type: tracker.EpisodeOpened, Episode: rec},
		{Type: tracker.EpisodeRecovered, Episode: rec},
		{Type: tracker.StageReached, Episode: live, Stage: tracker.StageObserved, Duration: 40 * time.Millisecond},
		{Type: tracker.StageReached, Episode: rec, Stage: tracker.StageAvailable, Duration: 12 * time.Second},
	})
	count := func(h *prometheus.HistogramVec, ns, stage string) uint64 {
		var n uint64
		ch := make(chan prometheus.Metric, 100)
		h.Collect(ch)
		close(ch)
		for m := range ch {
			var pb = new(dtoMetric)
			if err := m.Write(pb); err != nil {
				t.Fatal(err)
			}
			if label(pb, "namespace") == ns && label(pb, "stage") == stage {
				n += pb.GetHistogram().GetSampleCount()
			}
		}
		return n
	}
	if got := count(c.m.duration, "a", "observed"); got != 1 {
		t.Errorf("live observed count = %d, want 1", got)
	}
	if got := count(c.m.duration, "b", "available"); got != 0 {
		t.Errorf("recovered episode in the live histogram: %d", got)
	}
	if got := count(c.m.recoveredDuration, "b", "available"); got != 1 {
		t.Errorf("recovered histogram count = %d, want 1", got)
	}
	if got := testutil.ToFloat64(c.m.recovered.WithLabelValues("Deployment")); got != 1 {
		t.Errorf("rollouts_recovered_total = %v, want 1", got)
	}
	exceeded := func(ns string) int {
		n := 0
		ch := make(chan prometheus.Metric, 1000)
		c.m.exceeded.Collect(ch)
		close(ch)
		for m := range ch {
			pb := new(dtoMetric)
			_ = m.Write(pb)
			if label(pb, "namespace") == ns {
				n++
			}
		}
		return n
	}
	if exceeded("a") == 0 || exceeded("b") != 0 {
		t.Errorf("pre-created crossing series: live %d (want > 0), recovered %d (want 0)", exceeded("a"), exceeded("b"))
	}
}

// A deleted namespace takes its series with it; a namespace folded into
// "other" shares them with live namespaces, which keep them.
func TestDeletedNamespaceSeriesGo(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       func(*config.Config)
		wantAfter int
	}{
		{"kept namespace label", func(*config.Config) {}, 0},
		{"folded into other", func(c *config.Config) {
			c.NamespaceLabel = config.NamespaceLabel{Mode: config.NamespaceAllowlist, Allow: []string{"prod"}}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.cfg(cfg)
			c, reg := newCollector(t, cfg)
			ep := episode("gone", false)
			c.observe([]tracker.Event{
				{Type: tracker.EpisodeOpened, Episode: ep},
				{Type: tracker.StageReached, Episode: ep, Stage: tracker.StageObserved, Duration: time.Second},
				{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeDeleted},
			})
			before, err := testutil.GatherAndCount(reg, "kube_convergence_rollouts_total")
			if err != nil || before == 0 {
				t.Fatalf("rollouts_total series before: %d, %v", before, err)
			}
			c.forgetNamespace("gone")
			for _, name := range []string{"kube_convergence_rollouts_total", "kube_convergence_rollout_duration_seconds", "kube_convergence_rollout_threshold_exceeded_total"} {
				n, err := testutil.GatherAndCount(reg, name)
				if err != nil {
					t.Fatal(err)
				}
				if (tc.wantAfter == 0) != (n == 0) {
					t.Errorf("%s: %d series after the namespace was deleted", name, n)
				}
			}
		})
	}
}

// The view judges a partitioned StatefulSet's endpoints on its updated pods:
// the old-revision pods below the partition stay published on purpose.
// ExternalName Services publish nothing and are not waited for; a
// terminating endpoint is not a ready one.
func TestViewEndpoints(t *testing.T) {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "sts", Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 1,
			CurrentRevision: "r1", UpdateRevision: "r2"},
	}
	pod := func(name, rev string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: rev},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	svc := func(name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Type: typ, ExternalName: "db.example.com"}}
	}
	endpoint := func(uid string, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", UID: types.UID(uid)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(!terminating), Serving: ptr.To(true), Terminating: ptr.To(terminating)}}
	}
	slice := func(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	for _, tc := range []struct {
		name    string
		objects []any
		want    tracker.Endpoints
	}{
		{"old pods below the partition still published", []any{svc("db", corev1.ServiceTypeClusterIP),
			slice(endpoint("db-0", false), endpoint("db-1", false), endpoint("db-2", false))}, tracker.EndpointsReady},
		{"updated pod not published yet", []any{svc("db", corev1.ServiceTypeClusterIP),
			slice(endpoint("db-0", false), endpoint("db-1", false))}, tracker.EndpointsPending},
		{"updated pod's endpoint terminating", []any{svc("db", corev1.ServiceTypeClusterIP),
			slice(endpoint("db-0", false), endpoint("db-1", false), endpoint("db-2", true))}, tracker.EndpointsPending},
		{"only an ExternalName Service selects them", []any{svc("db", corev1.ServiceTypeExternalName)}, tracker.EndpointsNoService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []any{pod("db-0", "r1"), pod("db-1", "r1"), pod("db-2", "r2")}
			v := newView(t, append(objs, tc.objects...)...)
			w, _, ok := v.record(sts)
			if !ok {
				t.Fatal("no record")
			}
			if w.Endpoints != tc.want {
				t.Errorf("endpoints = %v, want %v", w.Endpoints, tc.want)
			}
		})
	}
}

// newView returns a view over informers of a fake API holding objs.
func newView(t *testing.T, objs ...any) *view {
	t.Helper()
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = cs.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = cs.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = cs.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := informers.New(cs, nil, slog.New(slog.DiscardHandler))
	get := func(r informers.Resource) cache.SharedIndexInformer {
		inf, err := f.Informer(r)
		if err != nil {
			t.Fatal(err)
		}
		return inf
	}
	v := &view{pods: get(informers.Pods), replicaSets: get(informers.ReplicaSets), nodes: get(informers.Nodes),
		services: get(informers.Services), slices: get(informers.EndpointSlices),
		deployments: get(informers.Deployments), statefulSets: get(informers.StatefulSets), daemonSets: get(informers.DaemonSets)}
	f.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), v.pods.HasSynced, v.services.HasSynced, v.slices.HasSynced, v.nodes.HasSynced, v.replicaSets.HasSynced) {
		t.Fatal("informers did not sync")
	}
	return v
}

type dtoMetric = dto.Metric

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A Deployment deleted and recreated under its name while the watch was
// down reaches the handlers as an update with another uid: the old one's
// episode ends as deleted instead of staying open, and stalled, forever.
func TestWorkloadRecreatedDuringAWatchGap(t *testing.T) {
	c, _ := newCollector(t, config.Default())
	c.view = newView(t)
	dep := func(uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID(uid), Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	}
	open := func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var uids []string
		for _, ep := range c.tr.Open() {
			uids = append(uids, ep.UID)
		}
		return uids
	}
	h := informers.Handle(workloadHandlers[appsv1.Deployment](c))
	h.OnAdd(dep("a"), false)
	if got := open(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("open episodes after the create: %v, want [a]", got)
	}
	h.OnUpdate(dep("a"), dep("b"))
	if got := open(); len(got) != 1 || got[0] != "b" {
		t.Errorf("open episodes after the relist: %v, want only the new object's [b]", got)
	}
}

// blockingSink holds every delivery until release is closed, after closing
// entered at the first.
type blockingSink struct {
	entered, release chan struct{}
	first            func()
}

func (s blockingSink) ObserveEpisodes([]tracker.Event) {
	s.first()
	<-s.release
}

// A sink that does not return holds up the handler that fed it, not the
// collector's scrape (collectors.Outbox): Episodes answers meanwhile, with
// the episode that handler opened.
func TestSlowSinkDoesNotHoldUpEpisodes(t *testing.T) {
	c, _ := newCollector(t, config.Default())
	c.view = newView(t)
	entered, release := make(chan struct{}), make(chan struct{})
	c.m.AddSink(blockingSink{entered: entered, release: release, first: sync.OnceFunc(func() { close(entered) })})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		informers.Handle(workloadHandlers[appsv1.Deployment](c)).OnAdd(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "a", Generation: 1},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}, false)
	}()
	deadline := time.After(10 * time.Second)
	select {
	case <-entered:
	case <-deadline:
		t.Fatal("the sink was never called")
	}
	scraped := make(chan []tracker.Episode)
	go func() {
		open, _ := c.Episodes(t0)
		scraped <- open
	}()
	select {
	case open := <-scraped:
		if len(open) != 1 || open[0].UID != "a" {
			t.Errorf("open episodes %+v, want a's", open)
		}
	case <-deadline:
		t.Fatal("Episodes waited for the sink")
	}
	unblock()
	select {
	case <-handled:
	case <-deadline:
		t.Fatal("the handler did not return once the sink did")
	}
}
