package churn

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// realistic is the managedFields of a Deployment created by kubectl apply
// (client-side), with status by kube-controller-manager and replicas by an
// HPA-like applier: 31 leaf paths, as the API server writes them on v1.37.
func realistic() []metav1.ManagedFieldsEntry {
	t := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	return []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t, FieldsV1: metav1.NewFieldsV1(
			`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},` +
				`"f:spec":{"f:progressDeadlineSeconds":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},` +
				`"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},` +
				`"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},` +
				`"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}`)},
		{Manager: "hpa-applier", Operation: metav1.ManagedFieldsOperationApply, Time: &t, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &t, FieldsV1: metav1.NewFieldsV1(
			`{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}},"f:status":{"f:availableReplicas":{},"f:conditions":{".":{},` +
				`"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:lastUpdateTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},` +
				`"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:updatedReplicas":{}}}`)},
	}
}

// BenchmarkOwnershipUpdate: one live update of a Deployment through the
// hook whose ownership moved: decoding managedFields with
// structured-merge-diff and the ownership comparison.
func BenchmarkOwnershipUpdate(b *testing.B) {
	c := New(configDefault(), nil, discard(), time.Now)
	h := c.hook("Deployment")
	mf := realistic()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		mf[1].Manager = fmt.Sprint("applier-", i%2) // the fingerprint changes
		m := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ManagedFields: mf}
		h(m)
		i++
	}
}

// BenchmarkOwnershipStatusWrite: the common update, a status write that
// moves only a managedFields time: fingerprinted, not decoded.
func BenchmarkOwnershipStatusWrite(b *testing.B) {
	c := New(configDefault(), nil, discard(), time.Now)
	h := c.hook("Deployment")
	mf := realistic()
	h(&metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ManagedFields: mf})
	b.ReportAllocs()
	for b.Loop() {
		m := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ManagedFields: mf}
		h(m)
	}
}

// BenchmarkOwnershipMemory: heap kept per Deployment whose ownership is
// tracked (the realistic managedFields above).
func BenchmarkOwnershipMemory(b *testing.B) {
	const n = 2000
	entries, _ := managedEntries(&metav1.ObjectMeta{ManagedFields: realistic()})
	paths := 0
	for _, e := range entries {
		paths += len(e.Leaves)
	}
	uids := make([]string, n)
	for i := range uids {
		uids[i] = fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
	}
	var per float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := tracker.NewChurnTracker(tracker.ChurnConfig{Window: 5 * time.Minute, HotWrites: 60, FlapWindow: 10 * time.Minute, MaxPairs: 50})
		for _, uid := range uids {
			tr.Ownership(uid, "Deployment", 1, entries, tracker.LiveAt(time.Now()))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(per, "B/object")
	b.ReportMetric(float64(paths), "paths/object")
}

// BenchmarkHotWrite: one live write counted for the hot-object window.
func BenchmarkHotWrite(b *testing.B) {
	tr := tracker.NewChurnTracker(tracker.ChurnConfig{Window: 5 * time.Minute, HotWrites: 60, FlapWindow: 10 * time.Minute, MaxPairs: 50})
	keys := make([]tracker.HotKey, 10000)
	for i := range keys {
		keys[i] = tracker.HotKey{Kind: "Pod", Namespace: "ns", Name: fmt.Sprint("pod-", i), Manager: "kubelet"}
	}
	at := time.Now()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Millisecond)
		tr.Write(keys[i%len(keys)], at, tracker.Progress{}, tracker.Progress{})
		i++
	}
}

// rolloutWrites are n cached versions of a Deployment whose status moves
// at each write (observedGeneration fixed, readyReplicas counting up), as
// kube-controller-manager writes them during a rollout, with the writer
// stamped.
func rolloutWrites(n int, name string) []*appsv1.Deployment {
	out := make([]*appsv1.Deployment, n)
	for i := range out {
		d := demo.Deployment("ns", name, 100, nil)
		d.UID = types.UID("uid-" + name)
		d.ResourceVersion = fmt.Sprint(i + 1)
		d.Annotations = map[string]string{informers.AnnotationWriter: "kube-controller-manager"}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 100, UpdatedReplicas: 100, ReadyReplicas: int32(i % 100), AvailableReplicas: int32(i % 100),
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
		if _, err := informers.Compact(d); err != nil {
			panic(err)
		}
		out[i] = d
	}
	return out
}

// BenchmarkChurnUpdate: one live update of a Deployment through the
// update handler (a status write that makes progress): counted in
// object_updates_total and judged for the hot window.
func BenchmarkChurnUpdate(b *testing.B) {
	c := New(configDefault(), nil, discard(), time.Now)
	ds := rolloutWrites(100, "web")
	seen := informers.Seen{At: time.Now(), Live: true}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		seen.At = seen.At.Add(time.Millisecond)
		c.onUpdate("Deployment", ds[i%len(ds)], ds[(i+1)%len(ds)], seen)
		i++
	}
}

// BenchmarkChurnMemory: heap the hot window keeps per object written in
// it (one update each, by one manager).
func BenchmarkChurnMemory(b *testing.B) {
	const n = 5000
	pairs := make([][2]*appsv1.Deployment, n)
	for i := range pairs {
		ds := rolloutWrites(2, fmt.Sprint("web-", i))
		pairs[i] = [2]*appsv1.Deployment{ds[0], ds[1]}
	}
	seen := informers.Seen{At: time.Now(), Live: true}
	var per float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := New(configDefault(), nil, discard(), time.Now)
		for _, p := range pairs {
			c.onUpdate("Deployment", p[0], p[1], seen)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(c)
	}
	b.ReportMetric(per, "B/object")
}
