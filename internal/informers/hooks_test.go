package informers

import (
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// A pod's writer, recorded by a hook as an annotation, reaches its record
// as a field through the transform the pod informer runs; the record's
// second pass (WatchList) shows the hook nothing, and the same API object
// compacted twice gives equal records.
func TestPodHooksReachTheRecord(t *testing.T) {
	f := New(fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
	hooked := 0
	f.BeforeCompact(Pods, func(m metav1.Object) {
		hooked++
		a := m.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationWriter] = NewestManager(m)
		m.SetAnnotations(a)
	})
	transform := f.hooked(Pods, Compact)
	t1 := metav1.NewTime(time.Unix(100, 0))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kwok", Time: &t1}}}}
	Stamp(p, time.Unix(0, 42), false)
	out, err := transform(p)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := out.(*Pod)
	if !ok {
		t.Fatalf("the pod transform made a %T", out)
	}
	if w := RecordedWriter(rec); w != "kwok" || rec.Annotations != nil {
		t.Errorf("record: writer %q, annotations %v; want kwok, none", w, rec.Annotations)
	}
	if again, err := transform(rec); err != nil || again != any(rec) || hooked != 1 {
		t.Errorf("second pass: %v, same record %v, hook ran %d times", err, again == any(rec), hooked)
	}
	twice, err := Compact(p)
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := twice.(*Pod); !ok || tr.Name != rec.Name || RecordedWriter(tr) != "kwok" {
		t.Errorf("the API object compacted again gave %#v, want a record equal to the first", twice)
	}
}
