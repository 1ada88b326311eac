package replay

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// podsPerDeployment is the shape of the synthetic clusters below: one
// Deployment and its ReplicaSet per 10 pods, as in the scale tests
// (docs/scale.md: 2,000 pods in 200 Deployments).
const podsPerDeployment = 10

// templates are a converged Deployment, its ReplicaSet and one of its pods
// as the sandbox recorded them (testdata/rollout.jsonl's last states).
type templates struct {
	deploy *appsv1.Deployment
	rs     *appsv1.ReplicaSet
	pod    *corev1.Pod
}

func loadTemplates(b *testing.B) templates {
	b.Helper()
	rec, err := ReadFile("testdata/rollout.jsonl", NewResources())
	if err != nil {
		b.Fatal(err)
	}
	var t templates
	for _, l := range rec.Lines {
		switch o := l.Object.(type) {
		case *appsv1.Deployment:
			t.deploy = o
		case *appsv1.ReplicaSet:
			if o.Status.Replicas > 0 {
				t.rs = o
			}
		case *corev1.Pod:
			if l.Type != typeDeleted {
				t.pod = o
			}
		}
	}
	if t.deploy == nil || t.rs == nil || t.pod == nil {
		b.Fatal("rollout.jsonl lacks a Deployment, a ReplicaSet with replicas or a pod")
	}
	return t
}

// cluster is the initial list of a synthetic cluster of pods pods in
// namespaces namespaces (a Deployment and a ReplicaSet per
// podsPerDeployment pods, each with names, uids and owner references of
// its own, and a label bench/deployment=<its Deployment> on its pods),
// every other resource listed empty, at at.
func (t templates) cluster(pods, namespaces int, at time.Time) *Recording {
	rec := &Recording{Name: fmt.Sprintf("synthetic-%d-pods-%d-namespaces", pods, namespaces)}
	list := map[informers.Resource][]Line{}
	owner := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes, BlockOwnerDeletion: &yes}}
	}
	for i := 0; i < pods/podsPerDeployment; i++ {
		ns := fmt.Sprintf("bench-%d", i%namespaces)
		name := fmt.Sprintf("web-%d", i)
		d := t.deploy.DeepCopy()
		d.Namespace, d.Name, d.UID = ns, name, types.UID(fmt.Sprintf("d-%d", i))
		rs := t.rs.DeepCopy()
		rs.Namespace, rs.Name, rs.UID = ns, name+"-5d4f8", types.UID(fmt.Sprintf("rs-%d", i))
		rs.OwnerReferences = owner("Deployment", d.Name, d.UID)
		list[informers.Deployments] = append(list[informers.Deployments], Line{Type: typeList, Resource: informers.Deployments, At: at, Object: d})
		list[informers.ReplicaSets] = append(list[informers.ReplicaSets], Line{Type: typeList, Resource: informers.ReplicaSets, At: at, Object: rs})
		for j := range podsPerDeployment {
			p := t.pod.DeepCopy()
			p.Namespace, p.Name, p.UID = ns, fmt.Sprintf("%s-%d", rs.Name, j), types.UID(fmt.Sprintf("p-%d-%d", i, j))
			p.OwnerReferences = owner("ReplicaSet", rs.Name, rs.UID)
			p.Labels = maps.Clone(p.Labels)
			p.Labels["bench/deployment"] = name // what its Service selects (BenchmarkChurnEvent)
			list[informers.Pods] = append(list[informers.Pods], Line{Type: typeList, Resource: informers.Pods, At: at, Object: p})
		}
	}
	for _, r := range builtin {
		rec.Lines = append(rec.Lines, list[r]...)
		rec.Lines = append(rec.Lines, Line{Type: typeListEnd, Resource: r, At: at})
	}
	for i := range rec.Lines {
		rec.Lines[i].N = i + 1
	}
	return rec
}

// BenchmarkScrape renders /metrics (client_golang's text format through
// promhttp, as the exporter serves it) of every collector after the
// initial sync of a synthetic cluster, against pod and namespace counts:
// ns/op is one scrape's render time, bytes/scrape its size.
func BenchmarkScrape(b *testing.B) {
	t := loadTemplates(b)
	for _, pods := range []int{1000, 5000} {
		for _, namespaces := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("pods=%d/namespaces=%d", pods, namespaces), func(b *testing.B) {
				h := New(Options{})
				b.Cleanup(h.Close)
				if err := h.Play(t.cluster(pods, namespaces, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))); err != nil {
					b.Fatal(err)
				}
				handler := promhttp.HandlerFor(h.Registry(), promhttp.HandlerOpts{})
				var size int
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					rr := httptest.NewRecorder()
					handler.ServeHTTP(rr, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil))
					if rr.Code != http.StatusOK {
						b.Fatalf("GET /metrics = %d", rr.Code)
					}
					size = rr.Body.Len()
				}
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
	}
}

// heapObjects is the heap's bytes in objects, live or not yet swept: what
// the process holds between two GCs (runtime/metrics, no stop-the-world).
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func liveHeap() uint64 {
	runtime.GC()
	return heapObjects()
}

// BenchmarkInitialSync is the initial list of a cluster of N pods (and a
// Deployment and a ReplicaSet per 10) through every collector, from the
// decoded list to synced: peak-heap-bytes is the most the heap held during
// it (sampled every 100 µs, the decoded list included, as the reflector
// holds it), steady-heap-bytes what stays after a GC once the list is
// dropped, both above the heap before the list was decoded. peak/steady is
// the ratio kube-state-metrics users see as a spike at the initial LIST
// (about 20x, kube-state-metrics#2302).
func BenchmarkInitialSync(b *testing.B) {
	t := loadTemplates(b)
	for _, pods := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			var peak, steady uint64
			for range b.N {
				b.StopTimer()
				h := New(Options{})
				before := liveHeap()
				rec := t.cluster(pods, 10, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
				top := heapObjects()
				done := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() {
					tick := time.NewTicker(100 * time.Microsecond)
					defer tick.Stop()
					for {
						if v := heapObjects(); v > top {
							top = v
						}
						select {
						case <-done:
							return
						case <-tick.C:
						}
					}
				})
				b.StartTimer()
				if err := h.Play(rec); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				close(done)
				wg.Wait()
				// The list is the reflector's, dropped once synced; the
				// harness's copy of the API server's state is its own.
				rec = nil
				h.mu.Lock()
				clear(h.server)
				h.mu.Unlock()
				after := liveHeap()
				peak += top - before
				steady += after - before
				runtime.KeepAlive(rec)
				h.Close()
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(peak)/n, "peak-heap-bytes")
			b.ReportMetric(float64(steady)/n, "steady-heap-bytes")
			b.ReportMetric(float64(peak)/float64(steady), "peak/steady")
		})
	}
}
