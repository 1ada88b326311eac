package churn

import (
	"hash/fnv"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

func hashOf(path string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(path))
	return h.Sum64()
}

// managedFields as the API server writes them for a Deployment created by
// kubectl, scaled by an applier with force, and its status written by the
// deployment controller.
func deployment() *appsv1.Deployment {
	t1 := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Second))
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t1,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)},
		{Manager: "apply-b", Operation: metav1.ManagedFieldsOperationApply, Time: &t2,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &t1,
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)},
		{Manager: "broken", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":`)},
	}}}
}

func TestManagedEntries(t *testing.T) {
	entries, bad := managedEntries(deployment())
	if bad != 1 || len(entries) != 3 {
		t.Fatalf("%d entries, %d bad; want 3 and 1", len(entries), bad)
	}
	want := map[string][]string{
		"kubectl-create":          {".spec.selector", ".spec.template.metadata.labels.app", `.spec.template.spec.containers[name="app"].image`, `.spec.template.spec.containers[name="app"].name`},
		"apply-b":                 {".spec.replicas"},
		"kube-controller-manager": {".status.replicas"},
	}
	for _, e := range entries {
		leaves := map[uint64]bool{}
		for _, l := range e.Leaves {
			leaves[l] = true
		}
		if len(leaves) != len(want[e.Manager]) {
			t.Errorf("%s: %d leaves, want %v", e.Manager, len(leaves), want[e.Manager])
		}
		for _, p := range want[e.Manager] {
			if !leaves[hashOf(p)] {
				t.Errorf("%s: no leaf %s", e.Manager, p)
			}
		}
	}
}

func TestHookStampsTheWriter(t *testing.T) {
	c := New(configDefault(), []informers.Resource{informers.Deployments, informers.Nodes}, discard(), time.Now)
	if rs := c.Resources(); len(rs) != 1 || rs[0] != informers.Deployments {
		t.Errorf("resources %v: nodes are excluded by default", rs)
	}
	d := deployment()
	c.hook("Deployment")(d)
	if w := d.Annotations[informers.AnnotationWriter]; w != "apply-b" {
		t.Errorf("writer %q, want apply-b (the newest timed entry)", w)
	}
	// Compact keeps the writer and drops managedFields.
	if _, err := informers.Compact(d); err != nil {
		t.Fatal(err)
	}
	if d.ManagedFields != nil || d.Annotations[informers.AnnotationWriter] != "apply-b" {
		t.Errorf("after Compact: managedFields %v, annotations %v", d.ManagedFields, d.Annotations)
	}
	if objs, paths := c.tr.OwnershipTracked(); objs != 1 || paths != 6 {
		t.Errorf("ownership: %d objects, %d paths; want 1 and 6", objs, paths)
	}
}

// Listed objects (an initial list, a relist) are not decoded: on a cluster
// of 10 000 Deployments the initial list would cost 1.4 s of CPU for a
// baseline that judges nothing. Ownership starts at the first live write; a
// relist that finds the fields moved forgets the object (no move judged
// across the gap), one that finds them unchanged keeps it.
func TestOwnershipSkipsListedObjects(t *testing.T) {
	c := New(configDefault(), []informers.Resource{informers.Deployments}, discard(), time.Now)
	hook := c.hook("Deployment")
	stamp := func(listed bool) *appsv1.Deployment {
		d := deployment()
		d.Annotations = map[string]string{informers.AnnotationReceived: "1"}
		if listed {
			d.Annotations[informers.AnnotationListed] = "true"
		}
		return d
	}
	tracked := func() int { n, _ := c.tr.OwnershipTracked(); return n }
	hook(stamp(true))
	if n := tracked(); n != 0 {
		t.Fatalf("after the initial list: %d objects, want 0 (not decoded)", n)
	}
	hook(stamp(false))
	if n := tracked(); n != 1 {
		t.Fatalf("after a live write: %d objects, want 1", n)
	}
	hook(stamp(true)) // relist, fields unchanged
	if n := tracked(); n != 1 {
		t.Errorf("after a relist with the same fields: %d objects, want 1", n)
	}
	moved := stamp(true)
	moved.ManagedFields[1].Manager = "apply-c"
	hook(moved)
	if n := tracked(); n != 0 {
		t.Errorf("after a relist with moved fields: %d objects, want 0 (forgotten)", n)
	}
}

func configDefault() *config.Config { return config.Default() }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The update handler: live updates count (generation_changed from the
// generation), a relist's (listed stamp) and a same-resourceVersion update
// do not; hot objects above hotWrites show their writer; a deleted
// namespace takes its series.
func TestUpdatesAndHotObjects(t *testing.T) {
	cfg := config.Default()
	cfg.Churn.HotWrites = 2
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	start := now
	c := New(cfg, []informers.Resource{informers.Deployments, informers.Namespaces}, discard(), func() time.Time { return now })
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	dep := func(rv string, gen int64, listed bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv, Generation: gen,
			Annotations: map[string]string{informers.AnnotationWriter: "my-operator"}}}
		informers.Stamp(d, now, listed)
		return d
	}
	deployments := informers.Handle(writeHandlers[appsv1.Deployment](c, "Deployment"))
	deployments.OnUpdate(dep("1", 1, false), dep("2", 1, false))
	deployments.OnUpdate(dep("2", 1, false), dep("3", 2, false))
	deployments.OnUpdate(dep("3", 2, false), dep("4", 2, false))
	deployments.OnUpdate(dep("4", 2, false), dep("9", 3, true))  // a relist after a gap
	deployments.OnUpdate(dep("9", 3, false), dep("9", 3, false)) // nothing new
	// Three live writes by my-operator, above hotWrites 2.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kube_convergence_hot_object_writes `+helpOf(t, reg, "kube_convergence_hot_object_writes")+`
# TYPE kube_convergence_hot_object_writes gauge
kube_convergence_hot_object_writes{kind="Deployment",manager="my-operator",name="web",namespace="ns"} 3
`), "kube_convergence_hot_object_writes"); err != nil {
		t.Error(err)
	}
	updates := func() map[string]float64 {
		out := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "kube_convergence_object_updates_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				key := ""
				for _, l := range m.GetLabel() {
					key += l.GetValue() + "/"
				}
				out[key] = m.GetCounter().GetValue()
				// Created timestamps, as client_golang's own counters carry
				// (collectors.CreatedTimes): born before the first scrape,
				// created at the collector's start.
				if ct := m.GetCounter().GetCreatedTimestamp(); ct == nil || !ct.AsTime().Equal(start) {
					t.Errorf("updates %s: created %v, want the start %v", key, ct, start)
				}
			}
		}
		return out
	}
	if got := updates(); got["false/Deployment/ns/"] != 2 || got["true/Deployment/ns/"] != 1 || len(got) != 2 {
		t.Errorf("updates %v, want 2 without and 1 with a generation change", got)
	}
	informers.Handle(writeHandlers[corev1.Namespace](c, "Namespace")).OnDelete(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	if got := updates(); len(got) != 0 {
		t.Errorf("after the namespace deletion: %v", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

func helpOf(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("%s not gathered", name)
	return ""
}

// On a busy object the writer is the entry that changed since the previous
// version: the updater's write in the same second as the applier's is the
// updater's (the newest time alone gives the tie to the applier, sorted
// first). An object that is not busy keeps the newest time.
func TestWriterOfBusyObjectsWithTies(t *testing.T) {
	cfg := config.Default()
	cfg.Churn.HotWrites = 4 // busy above 2 writes in the window
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := New(cfg, []informers.Resource{informers.Deployments}, discard(), func() time.Time { return now })
	hook := c.hook("Deployment")
	t0 := metav1.NewTime(now)
	t1 := metav1.NewTime(now.Add(time.Second))
	version := func(applier, updater metav1.Time) *appsv1.Deployment {
		a, u := applier, updater
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "applier", Operation: metav1.ManagedFieldsOperationApply, Time: &a, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
			{Manager: "updater", Operation: metav1.ManagedFieldsOperationUpdate, Time: &u, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:paused":{}}}`)},
		}}}
	}
	writerOf := func(d *appsv1.Deployment) string { hook(d); return d.Annotations[informers.AnnotationWriter] }
	// Not busy: the tie goes to the first entry.
	if w := writerOf(version(t1, t1)); w != "applier" {
		t.Fatalf("not busy: writer %q, want applier (newest time, first of the tie)", w)
	}
	for range 3 {
		c.tr.Write(tracker.HotKey{Kind: "Deployment", Namespace: "ns", Name: "web", Manager: "applier"}, now, tracker.Progress{}, tracker.Progress{})
	}
	writerOf(version(t1, t0)) // busy: the applier's write at t1 is remembered
	if w := writerOf(version(t1, t1)); w != "updater" {
		t.Errorf("busy, the updater's write in the applier's second: writer %q, want updater", w)
	}
	if len(c.writers) != 1 {
		t.Errorf("writers held %d, want 1", len(c.writers))
	}
}

// A Deployment deleted and recreated under its name while the watch was
// down reaches the update handler at the relist with another uid: the old
// uid's ownership goes as on a deletion, not two flap windows later.
func TestObjectRecreatedDuringAWatchGap(t *testing.T) {
	c := New(configDefault(), []informers.Resource{informers.Deployments}, discard(), time.Now)
	old := deployment()
	old.ResourceVersion = "1"
	c.hook("Deployment")(old)
	if n, _ := c.tr.OwnershipTracked(); n != 1 {
		t.Fatalf("ownership after a live write: %d objects, want 1", n)
	}
	cur := deployment()
	cur.UID, cur.ResourceVersion = "u2", "7"
	informers.Stamp(cur, time.Now(), true) // delivered by the relist
	c.hook("Deployment")(cur)
	informers.Handle(writeHandlers[appsv1.Deployment](c, "Deployment")).OnUpdate(old, cur)
	if n, _ := c.tr.OwnershipTracked(); n != 0 {
		t.Errorf("ownership after the relist: %d objects, want 0 (the old uid gone, the new one listed)", n)
	}
}
