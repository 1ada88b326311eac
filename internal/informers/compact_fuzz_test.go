package informers_test

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// decodedKinds are the kinds Compact makes records of, in the order
// FuzzCompactDecoded's kind byte picks them.
var decodedKinds = []func() runtime.Object{
	func() runtime.Object { return &corev1.Pod{} },
	func() runtime.Object { return &appsv1.Deployment{} },
	func() runtime.Object { return &appsv1.ReplicaSet{} },
	func() runtime.Object { return &appsv1.StatefulSet{} },
	func() runtime.Object { return &appsv1.DaemonSet{} },
	func() runtime.Object { return &corev1.Node{} },
	func() runtime.Object { return &corev1.Namespace{} },
	func() runtime.Object { return &corev1.Service{} },
	func() runtime.Object { return &discoveryv1.EndpointSlice{} },
	func() runtime.Object { return &eventsv1.Event{} },
}

// FuzzCompactDecoded is the structural complement of the FuzzCompact*
// targets of caps_test.go, which replace the strings of recorded objects
// and keep their shape: here the whole object is the input, JSON decoded
// as the client decodes an answer (k8s.io/apimachinery util/json), into
// the kind the first byte picks (decodedKinds). Lists of any length,
// absent or repeated fields, nil pointers, any map keys. Seeds
// (testdata/fuzz/FuzzCompactDecoded): an object of each kind from the
// sandbox recordings (internal/replay/testdata), managedFields included.
//
// Given an object the API server could send (apiServed: the strings it
// bounds within their bounds, no selfLink), Compact must not fail, must
// keep every string within its cap at a classified path (checkRetained),
// keep the identity whole, and be idempotent (a second pass changes
// nothing: a WatchList stream's objects are transformed twice).
func FuzzCompactDecoded(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, doc []byte) {
		if len(doc) > 64<<10 {
			return
		}
		obj := decodedKinds[int(kind)%len(decodedKinds)]()
		if err := json.Unmarshal(doc, obj); err != nil || !apiServed(obj) {
			return
		}
		what := reflect.TypeOf(obj).Elem().Name() + " " + identity(obj)[1]
		want := identity(obj)
		once, err := informers.Compact(obj)
		if err != nil {
			t.Fatalf("%s: Compact: %v", what, err)
		}
		checkRetained(t, what, once, true)
		if got := identity(once); got != want {
			t.Errorf("%s: identity %q, want %q", what, got, want)
		}
		snapshot := once.(runtime.Object).DeepCopyObject()
		twice, err := informers.Compact(once)
		if err != nil || !reflect.DeepEqual(snapshot, twice) {
			t.Errorf("%s: a second pass changed the object (%v):\n once: %+v\ntwice: %+v", what, err, snapshot, twice)
		}
	})
}

// apiServed reports whether obj is one the API server could send: the
// strings it bounds itself (apiBounded, and label and selector keys,
// which it validates as qualified names) within those bounds, and no
// selfLink (the server has not set it since v1.24, and drops a client's).
func apiServed(obj runtime.Object) bool {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetSelfLink() != "" {
		return false
	}
	typ := reflect.TypeOf(obj).Elem().Name()
	for _, l := range leaves(obj) {
		bounded := apiBounded[l.path] || apiBounded[typ+":"+l.path] ||
			l.path == "ObjectMeta.Labels{key}" || l.path == "Spec.Selector{key}"
		if limit, capped := retainedCaps[l.path]; bounded && capped && len(l.s) > limit {
			return false
		}
	}
	return true
}
