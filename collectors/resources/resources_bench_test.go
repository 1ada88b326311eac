package resources

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// certificate is a cert-manager Certificate as the API serves it (JSON,
// decoded): kubectl's last-applied annotation, three managedFields entries,
// spec, and a status with three conditions. About 3.9 KB of JSON.
func certificate(i int, gen int64, ready bool) *unstructured.Unstructured {
	name := fmt.Sprintf("tls-%05d", i)
	status := "False"
	if ready {
		status = "True"
	}
	mf := func(manager, op string, fields map[string]any) map[string]any {
		return map[string]any{"manager": manager, "operation": op, "apiVersion": "cert-manager.io/v1",
			"time": "2026-12-01T10:00:05Z", "fieldsType": "FieldsV1", "fieldsV1": fields}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{
			"name": name, "namespace": "team-" + fmt.Sprint(i%50), "uid": fmt.Sprintf("0b6f3c0e-5d1a-4c5e-9a51-%012d", i),
			"generation": gen, "resourceVersion": fmt.Sprint(1000 + i), "creationTimestamp": "2026-12-01T10:00:00Z",
			"labels":      map[string]any{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop"},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 600)},
			"managedFields": []any{
				mf("kubectl-client-side-apply", "Update", map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{}}, "f:spec": map[string]any{"f:dnsNames": map[string]any{}, "f:issuerRef": map[string]any{}, "f:secretName": map[string]any{}}}),
				mf("cert-manager-certificates-issuing", "Update", map[string]any{"f:status": map[string]any{"f:conditions": map[string]any{}, "f:notAfter": map[string]any{}, "f:revision": map[string]any{}}}),
				mf("cert-manager-certificates-readiness", "Update", map[string]any{"f:status": map[string]any{"f:conditions": map[string]any{}}}),
			},
		},
		"spec": map[string]any{"secretName": name, "dnsNames": []any{name + ".shop.example.com", name + ".internal.example.com"},
			"issuerRef":  map[string]any{"name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io"},
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"}},
		"status": map[string]any{
			"notAfter": "2027-03-01T10:00:00Z", "notBefore": "2026-12-01T10:00:00Z", "renewalTime": "2027-01-30T10:00:00Z", "revision": int64(3),
			"conditions": []any{
				map[string]any{"type": "Ready", "status": status, "reason": "Ready", "message": "Certificate is up to date and has not expired",
					"lastTransitionTime": "2026-12-01T10:00:07Z", "observedGeneration": gen},
				map[string]any{"type": "Issuing", "status": "False", "reason": "Issued", "message": "The certificate has been successfully issued",
					"lastTransitionTime": "2026-12-01T10:00:07Z", "observedGeneration": gen},
			},
		},
	}}
}

func newBenchTracker() *tracker.RolloutTracker {
	return tracker.NewRolloutTracker(tracker.RolloutConfig{Thresholds: latency.RolloutBuckets,
		StallAfter: func(tracker.Kind) time.Duration { return 5 * time.Minute }})
}

// BenchmarkTrackedMemory reports the heap each tracked custom resource
// costs after the transform: its CustomObject in an informer store (with
// the informer's key, no index) plus the tracker's record of it.
//
//	go test -run '^$' -bench BenchmarkTrackedMemory ./collectors/resources/
func BenchmarkTrackedMemory(b *testing.B) {
	const n = 10000
	conv, err := records.NewConvention(config.Resource{Group: "cert-manager.io", Resource: "certificates", Conditions: []string{"Ready"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{}) // as informers.Factory.Dynamic
		tr := newBenchTracker()
		now := time.Now()
		for i := range n {
			// The decoded object is garbage once transformed.
			o := conv.Compact(certificate(i, 1, true))
			if err := store.Add(o); err != nil {
				b.Fatal(err)
			}
			tr.Observe(records.Custom(o, "Certificate.cert-manager.io", conv), tracker.ListedAt(now))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/object")
		runtime.KeepAlive(store)
		runtime.KeepAlive(tr)
	}
}

// BenchmarkUpdate is the cost of one status update of a tracked custom
// resource: the transform of the decoded object, the record, the tracker.
//
//	go test -run '^$' -bench BenchmarkUpdate -benchmem ./collectors/resources/
func BenchmarkUpdate(b *testing.B) {
	conv, err := records.NewConvention(config.Resource{Group: "cert-manager.io", Resource: "certificates", Conditions: []string{"Ready"}})
	if err != nil {
		b.Fatal(err)
	}
	tr := newBenchTracker()
	objs := []*unstructured.Unstructured{certificate(1, 2, false), certificate(1, 2, true)}
	now := time.Now()
	tr.Observe(records.Custom(conv.Compact(certificate(1, 1, true)), "Certificate.cert-manager.io", conv), tracker.ListedAt(now))
	i := 0
	for b.Loop() {
		i++
		now = now.Add(time.Millisecond)
		o := conv.Compact(objs[i%2])
		tr.Observe(records.Custom(o, "Certificate.cert-manager.io", conv), tracker.LiveAt(now))
	}
}
