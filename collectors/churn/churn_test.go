package churn

import (
	"hash/fnv"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
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
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)}},
		{Manager: "apply-b", Operation: metav1.ManagedFieldsOperationApply, Time: &t2,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &t1,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}},
		{Manager: "broken", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":`)}},
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

func configDefault() *config.Config { return config.Default() }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
