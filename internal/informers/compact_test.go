package informers

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
)

var (
	created     = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	specWritten = created.Add(time.Hour)
)

// apiMeta is metadata as the API server sends it: a create, a later spec
// write and a status write (newer, but not a spec write), and an
// annotation the collectors do not read.
func apiMeta(name string) metav1.ObjectMeta {
	entry := func(at time.Time, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
			Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	return metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "10",
		CreationTimestamp: metav1.Time{Time: created},
		Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": "{}",
			"deployment.kubernetes.io/revision":                "2",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{
			entry(created, `{"f:metadata":{},"f:spec":{"f:replicas":{}}}`),
			entry(specWritten, `{"f:spec":{"f:template":{}}}`),
			entry(specWritten.Add(time.Minute), `{"f:status":{"f:replicas":{}}}`),
		},
	}
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v2"}}},
	}
}

func apiObjects() []runtime.Object {
	replicas := int32(3)
	return []runtime.Object{
		&appsv1.Deployment{ObjectMeta: apiMeta("deploy"), Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: template()}},
		&appsv1.StatefulSet{ObjectMeta: apiMeta("sts"), Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Template: template(),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}},
		&appsv1.DaemonSet{ObjectMeta: apiMeta("ds"), Spec: appsv1.DaemonSetSpec{Template: template()}},
		&appsv1.ReplicaSet{ObjectMeta: apiMeta("rs"), Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Template: template()}},
		&corev1.Pod{ObjectMeta: apiMeta("pod"), Spec: template().Spec, Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "ready"}},
		}},
		&corev1.Node{ObjectMeta: apiMeta("node"), Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		}}},
		&corev1.Service{ObjectMeta: apiMeta("svc"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10"}},
		&discoveryv1.EndpointSlice{ObjectMeta: apiMeta("slice"), Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
	}
}

// TestCompactIsIdempotent: a second pass changes nothing, for every kind.
func TestCompactIsIdempotent(t *testing.T) {
	for _, obj := range apiObjects() {
		name := reflect.TypeOf(obj).Elem().Name()
		once, err := Compact(obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		onceCopy := once.(runtime.Object).DeepCopyObject()
		twice, err := Compact(once)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(onceCopy, twice) {
			t.Errorf("%s: second Compact changed the object:\n once: %+v\ntwice: %+v", name, onceCopy, twice)
		}
		m := twice.(metav1.Object)
		if _, ok := twice.(*Pod); ok {
			// A pod's record has no annotations (nothing reads a pod's
			// spec write time).
			if a := m.GetAnnotations(); a != nil {
				t.Errorf("Pod: annotations %v kept", a)
			}
		} else if got := m.GetAnnotations()[AnnotationSpecWriteTime]; got != specWritten.Format(time.RFC3339) {
			t.Errorf("%s: spec write time %q after two passes, want %s", name, got, specWritten.Format(time.RFC3339))
		}
		if len(m.GetManagedFields()) != 0 {
			t.Errorf("%s: managedFields kept", name)
		}
	}
}

// TestCompactWorkloadHashes checks what the hashes must tell apart, from
// literal objects: a replicas-only or metadata-only change leaves both
// hashes equal; a template change moves only the template hash; a strategy
// change only the other hash; an emptied template is not the real one.
func TestCompactWorkloadHashes(t *testing.T) {
	replicas := func(n int32) *int32 { return &n }
	deploy := func(mutate func(*appsv1.Deployment)) (tmpl, other string) {
		d := &appsv1.Deployment{ObjectMeta: apiMeta("deploy"), Spec: appsv1.DeploymentSpec{Replicas: replicas(3), Template: template()}}
		mutate(d)
		out, err := Compact(d)
		if err != nil {
			t.Fatal(err)
		}
		a := out.(*appsv1.Deployment).Annotations
		if a[AnnotationTemplateHash] == "" || a[AnnotationOtherHash] == "" {
			t.Fatalf("hashes missing: %v", a)
		}
		return a[AnnotationTemplateHash], a[AnnotationOtherHash]
	}
	baseT, baseO := deploy(func(*appsv1.Deployment) {})
	for _, tc := range []struct {
		name                   string
		mutate                 func(*appsv1.Deployment)
		sameTemplate, sameRest bool
	}{
		{"replicas 3 -> 5", func(d *appsv1.Deployment) { d.Spec.Replicas = replicas(5) }, true, true},
		{"an annotation and a label", func(d *appsv1.Deployment) {
			d.Annotations["ci.example.com/deployed-at"] = "2026-12-01T10:00:00Z"
			d.Labels = map[string]string{"team": "a"}
		}, true, true},
		{"image v2 -> v3", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:v3" }, false, true},
		{"pod template annotation (rollout restart)", func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z"}
		}, false, true},
		{"minReadySeconds 0 -> 10", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 10 }, true, false},
		{"paused", func(d *appsv1.Deployment) { d.Spec.Paused = true }, true, false},
		{"empty template", func(d *appsv1.Deployment) { d.Spec.Template = corev1.PodTemplateSpec{} }, false, true},
	} {
		gotT, gotO := deploy(tc.mutate)
		if (gotT == baseT) != tc.sameTemplate || (gotO == baseO) != tc.sameRest {
			t.Errorf("%s: template hash equal %v (want %v), other hash equal %v (want %v)",
				tc.name, gotT == baseT, tc.sameTemplate, gotO == baseO, tc.sameRest)
		}
	}
	out, err := Compact(apiObjects()[0].(*appsv1.Deployment).DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*appsv1.Deployment)
	if _, ok := c.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("an annotation no collector reads was kept")
	}
	if c.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Error("the revision annotation (read by the rollouts collector) was dropped")
	}
}

// TestCompactSurvivesWatchListStream runs a real v0.37.2 informer with
// WatchList over a scripted stream: client-go applies the transform twice to
// each streamed object, and the cached copy must still carry the spec write
// time and the template hash.
func TestCompactSurvivesWatchListStream(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	d := apiObjects()[0].(*appsv1.Deployment)
	var streams atomic.Int32
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			t.Error("LIST called: the informer did not use WatchList")
			return &appsv1.DeploymentList{}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if o.SendInitialEvents != nil && *o.SendInitialEvents && streams.Add(1) == 1 {
				w.Add(d.DeepCopy())
				w.Action(watch.Bookmark, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
					ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"},
				}})
			}
			return w, nil
		},
	}
	var passes atomic.Int32
	inf := cache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, cache.Indexers{})
	if err := inf.SetTransform(func(obj any) (any, error) {
		if _, ok := obj.(*appsv1.Deployment); ok {
			passes.Add(1)
		}
		return Compact(obj)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	sync, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if !cache.WaitForCacheSync(sync.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	obj, ok, err := inf.GetStore().GetByKey("ns/deploy")
	if err != nil || !ok {
		t.Fatalf("cached deployment: ok=%v err=%v", ok, err)
	}
	got := obj.(*appsv1.Deployment).Annotations
	// Two passes must leave what one pass gives, and not the hash of the
	// empty template the second pass would find.
	one, err := Compact(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	empty, err := Compact(&appsv1.Deployment{ObjectMeta: apiMeta("empty")})
	if err != nil {
		t.Fatal(err)
	}
	onePass, emptyHash := one.(*appsv1.Deployment).Annotations[AnnotationTemplateHash], empty.(*appsv1.Deployment).Annotations[AnnotationTemplateHash]
	if got[AnnotationSpecWriteTime] != specWritten.Format(time.RFC3339) || got[AnnotationTemplateHash] != onePass || got[AnnotationTemplateHash] == emptyHash {
		t.Errorf("cached annotations %v, want the spec write time %s and the real template's hash", got, specWritten.Format(time.RFC3339))
	}
	// The reason idempotence matters; if client-go stops transforming twice
	// this test no longer exercises it and says so.
	if n := passes.Load(); n < 2 {
		t.Errorf("the transform ran %d time(s) on the streamed object, want 2 (client-go v0.37.2 behaviour this test exists for)", n)
	}
}

// A node keeps its Ready and pressure conditions without heartbeat times
// (a heartbeat then changes nothing kept); other conditions go.
func TestCompactNodeConditions(t *testing.T) {
	beat := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 10, 0, time.UTC))
	n := &corev1.Node{ObjectMeta: apiMeta("node"), Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: beat},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure", LastHeartbeatTime: beat},
			{Type: "KernelDeadlock", Status: corev1.ConditionFalse, LastHeartbeatTime: beat},
		},
		Images: []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}}},
	}}
	out, err := Compact(n)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range out.(*corev1.Node).Status.Conditions {
		got = append(got, fmt.Sprintf("%s=%s %s heartbeat=%v", c.Type, c.Status, c.Reason, !c.LastHeartbeatTime.IsZero()))
	}
	want := []string{"Ready=True KubeletReady heartbeat=false", "DiskPressure=True KubeletHasDiskPressure heartbeat=false"}
	if !reflect.DeepEqual(got, want) || len(out.(*corev1.Node).Status.Images) != 0 {
		t.Errorf("conditions %q, want %q (and no images)", got, want)
	}
}
