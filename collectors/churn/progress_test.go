package churn

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// A Deployment as kube-controller-manager v1.37.2 leaves it mid-rollout
// (the shape of internal/replay/testdata/rollout-100-replicas.jsonl).
func rollingDeployment() *appsv1.Deployment {
	t0 := metav1.NewTime(time.Date(2026, 12, 2, 2, 13, 0, 0, time.UTC))
	d := demo.Deployment("ns", "web", 100, nil)
	d.Generation = 2
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 2, Replicas: 125, UpdatedReplicas: 50, ReadyReplicas: 90, AvailableReplicas: 90,
		UnavailableReplicas: 35, TerminatingReplicas: ptr.To[int32](0),
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				Message: "Deployment has minimum availability.", LastUpdateTime: t0, LastTransitionTime: t0},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
				Message: `ReplicaSet "web-6465b67746" is progressing.`, LastUpdateTime: t0, LastTransitionTime: t0},
		},
	}
	return d
}

// cached is obj as the informers' cache holds it (Compact).
func cached[T any](t *testing.T, obj *T) *T {
	t.Helper()
	out, err := informers.Compact(obj)
	if err != nil {
		t.Fatal(err)
	}
	if out != any(obj) {
		t.Fatalf("Compact turned the %T into a %T: compact it with its own helper", obj, out)
	}
	return obj
}

func TestProgressOfDeployment(t *testing.T) {
	base, _ := progressOf(cached(t, rollingDeployment()))
	cases := []struct {
		name         string
		mutate       func(*appsv1.Deployment)
		spec, status bool // which part moves
	}{
		{name: "a condition's lastUpdateTime restamped", mutate: func(d *appsv1.Deployment) {
			d.Status.Conditions[1].LastUpdateTime = metav1.NewTime(d.Status.Conditions[1].LastUpdateTime.Add(time.Second))
		}},
		{name: "a condition's message", mutate: func(d *appsv1.Deployment) { d.Status.Conditions[1].Message = "other" }},
		{name: "collisionCount bumped", mutate: func(d *appsv1.Deployment) { d.Status.CollisionCount = ptr.To[int32](3) }},
		{name: "an annotation restamped (generation bumped)", mutate: func(d *appsv1.Deployment) {
			d.Annotations["ci.example/deployed-at"] = "2026-12-02T02:14:00Z"
			d.Generation++
		}},
		{name: "a label", mutate: func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "a"} }},
		{name: "observedGeneration", mutate: func(d *appsv1.Deployment) { d.Status.ObservedGeneration++ }, status: true},
		{name: "readyReplicas", mutate: func(d *appsv1.Deployment) { d.Status.ReadyReplicas++ }, status: true},
		{name: "terminatingReplicas", mutate: func(d *appsv1.Deployment) { d.Status.TerminatingReplicas = ptr.To[int32](2) }, status: true},
		{name: "a condition's reason", mutate: func(d *appsv1.Deployment) { d.Status.Conditions[1].Reason = "NewReplicaSetAvailable" }, status: true},
		{name: "a condition's status", mutate: func(d *appsv1.Deployment) { d.Status.Conditions[0].Status = corev1.ConditionFalse }, status: true},
		{name: "the revision", mutate: func(d *appsv1.Deployment) { d.Annotations["deployment.kubernetes.io/revision"] = "3" }, status: true},
		{name: "spec.replicas (a scale)", mutate: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](120) }, spec: true},
		{name: "a new image", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "v3" }, spec: true},
		{name: "paused", mutate: func(d *appsv1.Deployment) { d.Spec.Paused = true }, spec: true},
		{name: "deleted", mutate: func(d *appsv1.Deployment) { d.DeletionTimestamp = ptr.To(metav1.Now()) }, spec: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := rollingDeployment()
			c.mutate(d)
			got, judged := progressOf(cached(t, d))
			if !judged {
				t.Fatal("not judged")
			}
			if (got.Spec != base.Spec) != c.spec || (got.Status != base.Status) != c.status {
				t.Errorf("spec moved %v (want %v), status moved %v (want %v)", got.Spec != base.Spec, c.spec, got.Status != base.Status, c.status)
			}
		})
	}
}

// A ReplicaSet controlled by a Deployment is not judged (its writes
// follow the Deployment's); one of its own is, like a Deployment.
func TestProgressOfReplicaSet(t *testing.T) {
	rs := func(owned bool) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-6465b67746"},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](50)},
			Status: appsv1.ReplicaSetStatus{ObservedGeneration: 7, Replicas: 50, ReadyReplicas: 40}}
		if owned {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "u1", Controller: ptr.To(true)}}
		}
		return r
	}
	if _, judged := progressOf(cached(t, rs(true))); judged {
		t.Error("a Deployment's ReplicaSet is judged")
	}
	a, judged := progressOf(cached(t, rs(false)))
	moved := rs(false)
	moved.Status.ReadyReplicas++
	b, _ := progressOf(cached(t, moved))
	if !judged || a.Status == b.Status || a.Spec != b.Spec {
		t.Errorf("a ReplicaSet of its own: judged %v, %v → %v", judged, a, b)
	}
}

// Maps and lists in any order are the same state; the parts Compact drops
// (a Service's status, an endpoint's addresses, a condition's probe time)
// are no progress.
func TestProgressOfOtherKinds(t *testing.T) {
	same := func(name string, a, b metav1.Object, want bool) {
		t.Helper()
		pa, _ := progressOf(a)
		pb, _ := progressOf(b)
		if (pa == pb) != want {
			t.Errorf("%s: same %v, want %v", name, pa == pb, want)
		}
	}
	svc := func(ip string, sel map[string]string) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}}}
		return cached(t, s)
	}
	same("a Service's load balancer ingress (not kept)", svc("192.0.2.1", map[string]string{"app": "a"}), svc("192.0.2.2", map[string]string{"app": "a"}), true)
	same("a Service's selector", svc("192.0.2.1", map[string]string{"app": "a"}), svc("192.0.2.1", map[string]string{"app": "b"}), false)
	slice := func(ready ...bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{}
		for i, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0." + string(rune('1'+i))},
				TargetRef:  &corev1.ObjectReference{UID: types.UID("pod-" + string(rune('a'+i)))},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
		}
		return cached(t, s)
	}
	reordered := slice(true, false)
	reordered.Endpoints[0], reordered.Endpoints[1] = reordered.Endpoints[1], reordered.Endpoints[0]
	same("endpoints reordered", slice(true, false), reordered, true)
	same("an endpoint turned ready", slice(true, false), slice(true, true), false)
	pod := func(restarts int32, probe time.Time) *informers.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "app", Image: "v1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastProbeTime: metav1.NewTime(probe)}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
		return informers.CompactPod(p)
	}
	t0 := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	same("a pod condition's probe time", pod(0, t0), pod(0, t0.Add(time.Second)), true)
	same("a container restart", pod(0, t0), pod(1, t0), false)
}
