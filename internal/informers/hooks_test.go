package informers

import (
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Hooks see the object with its managedFields before Compact drops them,
// once: a compacted object (a WatchList stream's second pass) is not shown
// again. They are found by group and resource, whatever the version.
func TestHooksRunBeforeCompact(t *testing.T) {
	f := New(fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
	var seen []string
	f.BeforeCompact(Resource{Group: "apps", Version: "v9", Resource: "deployments"}, func(m metav1.Object) {
		seen = append(seen, NewestManager(m))
		a := m.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationWriter] = NewestManager(m)
		m.SetAnnotations(a)
	})
	transform := f.hooked(Deployments, Compact)
	t1, t2 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Time: &t1}, {Manager: "hpa", Time: &t2}, {Manager: "scale-without-time"},
	}}}
	out, err := transform(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transform(out); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "hpa" {
		t.Errorf("hook saw %v, want [hpa] once", seen)
	}
	got := out.(*appsv1.Deployment)
	if got.ManagedFields != nil || got.Annotations[AnnotationWriter] != "hpa" {
		t.Errorf("after the transform: managedFields %v, writer %q", got.ManagedFields, got.Annotations[AnnotationWriter])
	}
	// Another resource's transform runs no hook.
	if _, err := f.hooked(StatefulSets, Compact)(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: d.ManagedFields}}); err != nil || len(seen) != 1 {
		t.Errorf("statefulsets ran the deployments hook: %v %v", seen, err)
	}
	if NewestManager(&metav1.ObjectMeta{}) != "" {
		t.Error("NewestManager without managedFields")
	}
}
