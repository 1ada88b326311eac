package records

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

func TestPodRecord(t *testing.T) {
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "u1", CreationTimestamp: metav1.NewTime(created),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc", Controller: &yes}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(created.Add(time.Second))},
			{Type: "example.com/gate", Status: corev1.ConditionTrue}, // a readiness gate: not a stage
		}},
	}
	r := Pod(p, nil)
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
	if got := Pod(p, nil).OwnerKind; got != OwnerKindNone {
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
	} {
		if got := PublishesByReadiness(&corev1.Service{Spec: tc.spec}); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.spec, got, tc.want)
		}
	}
}
