package rollouts

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

func entryStrings(es []timeline.Entry) []string {
	out := []string{}
	for _, e := range es {
		s := fmt.Sprintf("%s %s node=%s msg=%q", e.Type, e.Reason, e.Node, e.Message)
		if e.APITime != nil {
			s += " api=" + e.APITime.Sub(t0).String()
		}
		out = append(out, s)
	}
	return out
}

func podWith(node string, conds ...corev1.PodCondition) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", CreationTimestamp: metav1.NewTime(t0)}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "app"}}
	p.Status.Phase = corev1.PodPending
	if node != "" {
		p.Status.Phase = corev1.PodRunning
	}
	p.Status.Conditions = conds
	return p
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string, at time.Duration) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0.Add(at))}
}

// A pod's life as timeline entries: changes only, with the API-side times.
func TestPodEntries(t *testing.T) {
	const msg = "0/1 nodes are available: 1 Insufficient cpu."
	unsched := cond(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable, msg, time.Second)
	scheduled := cond(corev1.PodScheduled, corev1.ConditionTrue, "", "", 3*time.Second)
	ready := cond(corev1.PodReady, corev1.ConditionTrue, "", "", 5*time.Second)
	notReady := cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "", 6*time.Second)
	crash := podWith("node-a", scheduled, notReady)
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     []string
	}{
		{"created", nil, podWith(""), []string{"object created node= msg=\"\" api=0s"}},
		{"unschedulable", podWith(""), podWith("", unsched), []string{`scheduled Unschedulable node= msg="` + msg + `" api=1s`}},
		{"still unschedulable, same message", podWith("", unsched), podWith("", unsched), []string{}},
		{"scheduled", podWith("", unsched), podWith("node-a", scheduled), []string{"scheduled  node=node-a msg=\"\" api=3s"}},
		{"status write, nothing new", podWith("node-a", scheduled), podWith("node-a", scheduled), []string{}},
		{"ready", podWith("node-a", scheduled), podWith("node-a", scheduled, ready), []string{"ready ready node= msg=\"\" api=5s"}},
		{"not ready again", podWith("node-a", scheduled, ready), crash, []string{`ready crash_loop node= msg="ContainersNotReady" api=6s`}},
		{"a reason worth naming while not ready", podWith("node-a", scheduled, notReady), crash, []string{`ready crash_loop node= msg=""`}},
		{"starting is not news", podWith("node-a"), podWith("node-a", scheduled, notReady), []string{}},
	} {
		var old *informers.Pod
		if tc.old != nil {
			old = informers.CompactPod(tc.old)
		}
		got := entryStrings(podEntries(old, informers.CompactPod(tc.cur), func(string) bool { return true }))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func slice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{Endpoints: eps}
}

func endpoint(uid string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "pod-" + uid, UID: types.UID("u" + uid)},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
}

// Endpoint presence changes of one slice, in the slice's order, removed last.
func TestEndpointChanges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, cur *discoveryv1.EndpointSlice
		want     []endpointChange
	}{
		{"created", nil, slice(endpoint("1", false), endpoint("2", true)),
			[]endpointChange{{"u1", "pod-1", "not_ready"}, {"u2", "pod-2", "ready"}}},
		{"one turned ready", slice(endpoint("1", false), endpoint("2", true)), slice(endpoint("1", true), endpoint("2", true)),
			[]endpointChange{{"u1", "pod-1", "ready"}}},
		{"one removed, one added", slice(endpoint("1", true), endpoint("2", true)), slice(endpoint("2", true), endpoint("3", false)),
			[]endpointChange{{"u3", "pod-3", "not_ready"}, {"u1", "pod-1", "removed"}}},
		{"deleted", slice(endpoint("1", true)), nil, []endpointChange{{"u1", "pod-1", "removed"}}},
		{"unchanged", slice(endpoint("1", true)), slice(endpoint("1", true)), nil},
	} {
		if got := endpointChanges(tc.old, tc.cur); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// deployment is a Deployment of generation gen with replicas and image as
// the informers cache it (compacted), with the managedFields entries given.
func deployment(t *testing.T, gen int64, replicas int32, image string, fields ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-web", Generation: gen, ManagedFields: fields}}
	d.Spec.Replicas = ptr.To(replicas)
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: image}}
	if _, err := informers.Compact(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// A write through /scale (an HPA's) moves the generation and stamps no
// managedFields time (v1.37): its entry must not name the manager of the
// previous stamp (helm), who did not ask for this rollout. A template
// change with the stamp unmoved is helm's second write within its second:
// named.
func TestScaleWriteNamesNoPreviousManager(t *testing.T) {
	helmAt := metav1.NewTime(t0.Add(-time.Hour))
	helm := metav1.ManagedFieldsEntry{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, Time: &helmAt,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{},"f:template":{}}}`)}
	hpa := metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}
	for _, tc := range []struct {
		name          string
		before, after *appsv1.Deployment
		wantManagers  []string
		wantMessage   string
	}{
		{"scaled through /scale", deployment(t, 4, 2, "app:v1", helm), deployment(t, 5, 5, "app:v1", helm, hpa), nil, timeline.WriterUnknown},
		{"a new image in helm's second", deployment(t, 4, 2, "app:v1", helm), deployment(t, 5, 2, "app:v2", helm), []string{"helm"}, ""},
	} {
		c, _ := newCollector(t, config.Default())
		store := timeline.NewStore(timeline.Config{})
		c.SetTimelines(store)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: "u-web", Namespace: "ns", Name: "web", Generation: 5, Target: 5, Start: t0}
		store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
		c.mu.Lock()
		c.timelineWorkload(tc.before, tc.after, &tracker.Workload{Kind: tracker.Deployment, UID: "u-web", Generation: 5}, nil, t0)
		c.mu.Unlock()
		eps := store.List(timeline.Query{UID: "u-web"}, t0)
		if len(eps) != 1 || len(eps[0].Entries) == 0 {
			t.Fatalf("%s: episodes %+v", tc.name, eps)
		}
		w := eps[0].Entries[0]
		if w.Type != timeline.EntryWrite || w.Generation != 5 || !reflect.DeepEqual(w.Managers, tc.wantManagers) || (w.APITime == nil) != (tc.wantManagers == nil) || w.Message != tc.wantMessage {
			t.Errorf("%s: write entry = %+v, want generation 5 by %v (API time only with managers), message %q", tc.name, w, tc.wantManagers, tc.wantMessage)
		}
	}
}

// A pod deleted with the default 30 s grace period carries a
// deletionTimestamp 30 s after the delete request: its "deleted" entry is
// dated by the request, not half a minute in its own future.
func TestDeletedPodDatedByTheRequest(t *testing.T) {
	c, _ := newCollector(t, config.Default())
	store := timeline.NewStore(timeline.Config{})
	c.SetTimelines(store)
	ep := tracker.Episode{Kind: tracker.Deployment, UID: "u-web", Namespace: "ns", Name: "web", Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: t0}
	store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
	requested := t0.Add(2 * time.Second)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "u-pod",
		DeletionTimestamp: ptr.To(metav1.NewTime(requested.Add(30 * time.Second))), DeletionGracePeriodSeconds: ptr.To[int64](30)}}
	c.onDerivedGone("Pod", "u-web", t0, &p.ObjectMeta)
	eps := store.List(timeline.Query{UID: "u-web"}, t0)
	if len(eps) != 1 || len(eps[0].Entries) != 1 {
		t.Fatalf("episodes %+v", eps)
	}
	if e := eps[0].Entries[0]; e.Reason != "deleted" || e.APITime == nil || !e.APITime.Equal(requested) {
		t.Errorf("deleted entry %+v (api time %v), want the request's time %v", e, e.APITime, requested)
	}
}

// A StatefulSet's pod deleted and recreated under its name while the watch
// was down reaches the handlers as an update at the relist: it is the old
// pod's deletion and a new pod's creation, and the new pod is related to
// the episode. A pod whose deletion the relist found (a tombstone) is
// dated by the relist, not by the receipt of its last cached version.
func TestPodRecreatedDuringAWatchGap(t *testing.T) {
	c, _ := newCollector(t, config.Default())
	c.now = func() time.Time { return t0.Add(2 * time.Minute) }
	c.view = newView(t)
	store := timeline.NewStore(timeline.Config{})
	c.SetTimelines(store)
	ep := tracker.Episode{Kind: tracker.StatefulSet, UID: "sts", Namespace: "ns", Name: "db", Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: t0}
	store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
	pod := func(uid string, received time.Time) *informers.Pod {
		return informers.CompactPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0),
			Annotations:     map[string]string{informers.AnnotationReceived: fmt.Sprint(received.UnixNano())},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: ptr.To(true)}}}})
	}
	relisted := t0.Add(time.Minute)
	store.Relate("old", "sts")
	h := informers.Handle(factHandlers[informers.Pod](c, c.view.pods))
	h.OnUpdate(pod("old", t0.Add(-time.Hour)), pod("new", relisted))
	if !store.AddRelated("new", timeline.Entry{Time: relisted, Type: timeline.EntryEvent, Reason: "BackOff"}) {
		t.Error("the recreated pod is not related to the episode")
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/db-0", Obj: pod("new", relisted)})

	var got []string
	for _, e := range store.List(timeline.Query{UID: "sts"}, t0)[0].Entries {
		if e.Object != nil {
			got = append(got, fmt.Sprintf("%s %s %s +%v", e.Type, e.Reason, e.Object.UID, e.Time.Sub(t0)))
		}
	}
	// The old pod's cached version was received an hour before: the
	// deletions are dated by the relist (+1m) and by the clock (+2m).
	want := []string{"object deleted old +1m0s", "object created new +1m0s", "object deleted new +2m0s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%q\nwant\n%q", got, want)
	}
}

// A node's condition changes, not its heartbeats, are entries: Ready and
// the pressure conditions, dated by their transitions.
func TestNodeEntries(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	nc := func(typ corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string, at, beat time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: s, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(t0.Add(at)), LastHeartbeatTime: metav1.NewTime(t0.Add(beat))}
	}
	ready := nc(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", 0, 10*time.Second)
	noPressure := nc(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "", 0, 10*time.Second)
	beat := node(nc(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", 0, 20*time.Second), noPressure)
	if got := nodeEntries(node(ready, noPressure), beat, t0); len(got) != 0 {
		t.Errorf("a heartbeat made entries %q", entryStrings(got))
	}
	pressure := nc(corev1.NodeMemoryPressure, corev1.ConditionTrue, "KubeletHasInsufficientMemory", "", 30*time.Second, 30*time.Second)
	lost := nc(corev1.NodeReady, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", 40*time.Second, 20*time.Second)
	other := nc("KernelDeadlock", corev1.ConditionTrue, "Deadlock", "", 40*time.Second, 40*time.Second)
	got := entryStrings(nodeEntries(node(ready, noPressure), node(lost, pressure, other), t0.Add(41*time.Second)))
	want := []string{
		`node Ready=Unknown node=n1 msg="NodeStatusUnknown: Kubelet stopped posting node status." api=40s`,
		`node MemoryPressure=True node=n1 msg="KubeletHasInsufficientMemory" api=30s`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%q\nwant\n%q", got, want)
	}
}
