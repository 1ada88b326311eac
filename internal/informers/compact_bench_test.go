package informers_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// objectsPerMeasure is how many objects one memory measure holds: enough
// that the heap's noise (a few KB between two GCs) is below 1% of the
// smallest total (1,000 compact Events of about 1 KB).
const objectsPerMeasure = 1000

// lastObject returns the last state of an object of resource r that the
// sandbox recording testdata/name.jsonl of internal/replay holds: what a
// real API server sent (kwok pods, kube-controller-manager's writes).
func lastObject(b *testing.B, name string, r informers.Resource) kruntime.Object {
	b.Helper()
	rec, err := replay.ReadFile(filepath.Join("..", "replay", "testdata", name+".jsonl"), replay.NewResources())
	if err != nil {
		b.Fatal(err)
	}
	var last kruntime.Object
	for _, l := range rec.Lines {
		if l.Resource.Group == r.Group && l.Resource.Resource == r.Resource && l.Object != nil {
			last = l.Object
		}
	}
	if last == nil {
		b.Fatalf("%s holds no %s", name, r)
	}
	return last
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCompactMemoryPerObject measures what one object of each kind
// costs the informer cache: N objects decoded from the recorded JSON (each
// with strings of its own, as a watch decode gives them), then passed
// through Compact, the informers' transform, and kept; the heap after a GC
// over N. bytes/object is the compact record the cache keeps, raw-bytes/object
// the object as decoded (what a cache without the transform would keep).
func BenchmarkCompactMemoryPerObject(b *testing.B) {
	for _, tc := range []struct {
		kind, recording string
		resource        informers.Resource
	}{
		{"Pod", "rollout", informers.Pods},
		{"ReplicaSet", "rollout", informers.ReplicaSets},
		{"Deployment", "rollout", informers.Deployments},
		{"EndpointSlice", "rollout", informers.EndpointSlices},
		{"Service", "rollout", informers.Services},
		{"Node", "rollout", informers.Nodes},
		{"Event", "warning-event-series", informers.WarningEvents},
	} {
		b.Run(tc.kind, func(b *testing.B) {
			tmpl := lastObject(b, tc.recording, tc.resource)
			raw, err := json.Marshal(tmpl)
			if err != nil {
				b.Fatal(err)
			}
			typ := reflect.TypeOf(tmpl).Elem()
			objs := make([]any, objectsPerMeasure)
			var rawTotal, compactTotal uint64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				clear(objs)
				before := heapInUse()
				for i := range objs {
					o := reflect.New(typ).Interface()
					if err := json.Unmarshal(raw, o); err != nil {
						b.Fatal(err)
					}
					m := o.(metav1.Object)
					m.SetUID(types.UID(string(m.GetUID()) + "-" + string(rune('a'+i%26))))
					objs[i] = o
				}
				decoded := heapInUse()
				for i, o := range objs {
					if objs[i], err = informers.Compact(o); err != nil {
						b.Fatal(err)
					}
				}
				compacted := heapInUse()
				rawTotal += decoded - before
				compactTotal += compacted - before
			}
			runtime.KeepAlive(objs)
			n := float64(b.N * objectsPerMeasure)
			b.ReportMetric(float64(compactTotal)/n, "bytes/object")
			b.ReportMetric(float64(rawTotal)/n, "raw-bytes/object")
		})
	}
}
