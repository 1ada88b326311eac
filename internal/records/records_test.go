package records

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

func TestPodRecord(t *testing.T) {
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "u1", CreationTimestamp: metav1.NewTime(created),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", Controller: &yes}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(created.Add(time.Second))},
			{Type: "example.com/gate", Status: corev1.ConditionTrue}, // a readiness gate: not a stage
		}},
	}
	r := Pod(informers.CompactPod(p), nil)
	if r.OwnerKind != "ReplicaSet" || r.UID != "u1" || !r.Created.Equal(created) {
		t.Errorf("identity = %+v", r.PodRef)
	}
	want := []tracker.PodCondition{
		{Stage: tracker.PodStageScheduled, True: true, LastTransition: created},
		{Stage: tracker.PodStageReadyToStartContainers, LastTransition: created.Add(time.Second)},
	}
	if !reflect.DeepEqual(r.Conditions, want) {
		t.Errorf("conditions = %+v, want %+v", r.Conditions, want)
	}
	p.OwnerReferences[0].Controller = nil // an owner, not a controller
	if got := Pod(informers.CompactPod(p), nil).OwnerKind; got != OwnerKindNone {
		t.Errorf("owner kind without a controller = %q", got)
	}
}

func TestSliceRecord(t *testing.T) {
	yes, no := true, false
	ep := func(uid string, ready, serving, terminating *bool, kind string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: kind, UID: types.UID("u" + uid)},
			Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-x1", UID: "s1",
			Labels:      map[string]string{discoveryv1.LabelServiceName: "web"},
			Annotations: map[string]string{AnnotationTriggerTime: "2026-11-30T10:00:03Z"}},
		Endpoints: []discoveryv1.Endpoint{
			ep("1", &yes, &yes, &no, "Pod"),
			ep("2", nil, nil, nil, "Pod"),    // nil ready reads as true
			ep("3", &no, &yes, &yes, "Pod"),  // terminating, still serving: not a ready endpoint
			ep("4", &yes, &yes, &yes, "Pod"), // publishNotReadyAddresses keeps terminating pods ready: not ready here
			ep("5", &no, &no, &no, "Pod"),    // not ready
			ep("6", &yes, &yes, &no, "Node"), // not a pod
		},
	}
	r := Slice(s)
	if r.Service != "web" || r.Name != "web-x1" || r.UID != "s1" {
		t.Errorf("identity = %+v", r)
	}
	if want := []string{"u1", "u2"}; !reflect.DeepEqual(r.Ready, want) {
		t.Errorf("ready = %v, want %v", r.Ready, want)
	}
	if want := time.Date(2026, 11, 30, 10, 0, 3, 0, time.UTC); !r.TriggerTime.Equal(want) {
		t.Errorf("trigger time = %v, want %v", r.TriggerTime, want)
	}
}

func TestPublishesByReadiness(t *testing.T) {
	for _, tc := range []struct {
		spec corev1.ServiceSpec
		want bool
	}{
		{corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}, true},
		{corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, PublishNotReadyAddresses: true}, false},
		{corev1.ServiceSpec{}, false}, // endpoints managed by hand
		// A DNS alias, skipped by the EndpointSlice controller even with a selector.
		{corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", Selector: map[string]string{"app": "web"}}, false},
		{corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}}, true},
	} {
		if got := PublishesByReadiness(&corev1.Service{Spec: tc.spec}); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestPublishesSelectedPods(t *testing.T) {
	sel := map[string]string{"app": "web"}
	for _, tc := range []struct {
		spec corev1.ServiceSpec
		want bool
	}{
		{corev1.ServiceSpec{Selector: sel}, true},
		{corev1.ServiceSpec{Selector: sel, PublishNotReadyAddresses: true}, true}, // published, whether Ready or not
		{corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeExternalName}, false},
		{corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}, false},
	} {
		if got := PublishesSelectedPods(&corev1.Service{Spec: tc.spec}); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestReadyEndpoint(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name               string
		ready, terminating *bool
		want               bool
	}{
		{"ready", &yes, &no, true},
		{"nil ready reads as true", nil, nil, true},
		{"not ready", &no, nil, false},
		// publishNotReadyAddresses: the controller keeps terminating pods ready=true.
		{"terminating, ready", &yes, &yes, false},
		{"terminating, nil ready", nil, &yes, false},
	} {
		e := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: tc.ready, Terminating: tc.terminating}}
		if got := ReadyEndpoint(&e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// owner_kind is one of eight values, whatever a tenant
// writes into an ownerReference.
func TestOwnerKindClamped(t *testing.T) {
	yes := true
	for _, tc := range []struct{ apiVersion, kind, want string }{
		{"apps/v1", "ReplicaSet", "ReplicaSet"},
		{"apps/v1", "StatefulSet", "StatefulSet"},
		{"apps/v1", "DaemonSet", "DaemonSet"},
		{"batch/v1", "Job", "Job"},
		{"v1", "ReplicationController", "ReplicationController"},
		{"v1", "Node", "Node"},
		{"argoproj.io/v1alpha1", "Rollout", "other"},
		{"example.com/v1", "ReplicaSet", "other"}, // a CRD borrowing a built-in name
		{"v1", "Totally-Invented-Kind-4f2a", "other"},
		{"not/a/version", "Job", "other"},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "x", Controller: &yes}}}}
		if got := OwnerKind(p); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
	if got := OwnerKind(&corev1.Pod{}); got != "none" {
		t.Errorf("no owner: %q", got)
	}
}

// Gates in the record. Hundreds of scheduling gates are one
// fact; a readiness gate not True with containers ready is readiness_gate.
func TestGateFacts(t *testing.T) {
	gates := make([]corev1.PodSchedulingGate, 300)
	for i := range gates {
		gates[i].Name = fmt.Sprintf("example.com/queue-%d", i)
	}
	gated := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: gates},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}}
	if f := PodFacts(informers.CompactPod(gated), nil); !f.SchedulingGated || tracker.NotReadyReason(f) != tracker.PodSchedulingGated {
		t.Errorf("gated: %+v, reason %q", f, tracker.NotReadyReason(f))
	}
	lb := &corev1.Pod{
		Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "target-health.elbv2.k8s.aws/web"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
			}}}
	if f := PodFacts(informers.CompactPod(lb), nil); tracker.NotReadyReason(f) != tracker.PodReadinessGate {
		t.Errorf("gate condition absent: %+v, reason %q", f, tracker.NotReadyReason(f))
	}
	lb.Status.Conditions = append(lb.Status.Conditions, corev1.PodCondition{Type: "target-health.elbv2.k8s.aws/web", Status: corev1.ConditionFalse})
	if f := PodFacts(informers.CompactPod(lb), nil); tracker.NotReadyReason(f) != tracker.PodReadinessGate {
		t.Errorf("gate condition False: reason %q", tracker.NotReadyReason(f))
	}
	lb.Status.Conditions[1].Status = corev1.ConditionFalse
	lb.Status.Conditions[0].Status = corev1.ConditionFalse // containers not ready: the probe, not the gate
	if f := PodFacts(informers.CompactPod(lb), nil); tracker.NotReadyReason(f) != tracker.PodReadinessFailing {
		t.Errorf("containers not ready: reason %q", tracker.NotReadyReason(f))
	}
}

// Selects agrees with apimachinery's selector built from the Service's
// map, on the selectors a Service publishes by (non-empty), and selects
// nothing for an empty selector (a Service without one publishes no
// pods; labels.Everything would select them all).
func TestSelectsIsTheServiceSelector(t *testing.T) {
	pod := map[string]string{"app": "web", "tier": "front", "pod-template-hash": "5d4f8", "empty": ""}
	for _, sel := range []map[string]string{
		{"app": "web"},
		{"app": "web", "tier": "front"},
		{"app": "web", "tier": "back"},
		{"app": "db"},
		{"missing": "x"},
		{"empty": ""},
		{"missing": ""},
		{"app": "web", "tier": "front", "pod-template-hash": "5d4f8", "empty": ""},
		{"app": "web", "tier": "front", "pod-template-hash": "5d4f8", "empty": "", "one": "more"},
	} {
		want := labels.SelectorFromSet(sel).Matches(labels.Set(pod))
		if got := Selects(sel, pod); got != want {
			t.Errorf("Selects(%v) = %v, labels.SelectorFromSet's Matches = %v", sel, got, want)
		}
		if Selects(sel, nil) != labels.SelectorFromSet(sel).Matches(labels.Set(nil)) {
			t.Errorf("Selects(%v, no labels) disagrees with labels.SelectorFromSet", sel)
		}
	}
	if Selects(nil, pod) || Selects(map[string]string{}, pod) {
		t.Error("an empty selector selects a pod")
	}
}
