package churn

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
