package replay

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// benchHarness plays testdata/name.jsonl (with name.yaml's configuration
// when there is one) into a new harness: every collector, the timeline
// store and the informers' compact transforms, as the exporter runs them.
func benchHarness(b *testing.B, name string) (*Harness, *Recording) {
	b.Helper()
	cfg := config.Default()
	if raw, err := os.ReadFile(filepath.Join("testdata", name+".yaml")); err == nil {
		if cfg, err = config.Parse(raw); err != nil {
			b.Fatalf("%s.yaml: %v", name, err)
		}
	}
	h := New(Options{Config: cfg})
	b.Cleanup(h.Close)
	rec, err := ReadFile(filepath.Join("testdata", name+".jsonl"), h.Resources())
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Play(rec); err != nil {
		b.Fatal(err)
	}
	return h, rec
}

// lastTwoStates returns the last two states of the object of resource r
// that the recording updates last, live: a real transition (a pod's
// condition, a status's replica counts, a series count) to deliver in turn.
func lastTwoStates(b *testing.B, rec *Recording, r informers.Resource, keep func(runtime.Object) bool) [2]runtime.Object {
	b.Helper()
	var key string
	var states []runtime.Object
	for i := len(rec.Lines) - 1; i >= 0 && len(states) < 2; i-- {
		l := rec.Lines[i]
		if unversioned(l.Resource) != unversioned(r) || (l.Type != typeModified && l.Type != typeAdded) || l.Object == nil || (keep != nil && !keep(l.Object)) {
			continue
		}
		k := keyOf(l.Object)
		if key == "" {
			key = k
		}
		if k == key {
			states = append(states, l.Object)
		}
	}
	if len(states) < 2 {
		b.Fatalf("%s: fewer than two states of one %s", rec.Name, r)
	}
	return [2]runtime.Object{states[1], states[0]}
}

// BenchmarkHandlerPath is the whole per-event path the exporter runs for
// one watch notification of each kind, from the decoded object: the
// informers' compact transform, the store, the typed seam, every
// collector's handlers and the timeline store. Each iteration delivers
// the next state of one object, alternating between the last two states
// the recording shows, with a new resourceVersion; the harness deep-copies
// the object for each informer of its resource first (the stand-in for
// the decoding, which is not measured here: see docs/performance.md). The
// clock stands still, so the collectors' once-a-second Tick is not in it.
func BenchmarkHandlerPath(b *testing.B) {
	for _, tc := range []struct {
		name, recording string
		resource        informers.Resource
		keep            func(runtime.Object) bool
	}{
		{"pod-update", "rollout", informers.Pods, nil},
		{"replicaset-status", "rollout", informers.ReplicaSets, nil},
		{"deployment-status", "rollout", informers.Deployments, nil},
		{"endpointslice-update", "rollout", informers.EndpointSlices, nil},
		{"warning-event", "warning-event-series", informers.WarningEvents, nil},
		{"custom-resource-update", "custom-resource", informers.Resource{}, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, rec := benchHarness(b, tc.recording)
			r := tc.resource
			if r == (informers.Resource{}) {
				r = h.Resources()["widgets.example.com"]
			}
			states := lastTwoStates(b, rec, r, tc.keep)
			objs := [2]metaObject{access(b, states[0]), access(b, states[1])}
			at := h.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				o := objs[i%2]
				o.m.SetResourceVersion(strconv.Itoa(1_000_000 + i))
				if err := h.line(Line{Type: typeModified, Resource: r, At: at, Live: true, Object: o.obj}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type metaObject struct {
	obj runtime.Object
	m   metav1.Object
}

func access(b *testing.B, obj runtime.Object) metaObject {
	b.Helper()
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		b.Fatal(err)
	}
	return metaObject{obj, m}
}
