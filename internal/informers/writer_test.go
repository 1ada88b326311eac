package informers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A fight within one second: the API server sorts Apply entries first and
// stamps the writer's entry with a one-second time, so two managers that
// write in the same second tie, and NewestManager names the first (the
// applier) for both writes. Writer compares with the previous version.
func TestWriterWithTies(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	entry := func(manager string, op metav1.ManagedFieldsOperationType, at metav1.Time, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &at, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	obj := func(es ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: es}}
	}
	replicas, image := `{"f:spec":{"f:replicas":{}}}`, `{"f:spec":{"f:template":{}}}`
	// v1: the applier wrote at t0, the updater at t0 (tie).
	v1 := obj(entry("applier", metav1.ManagedFieldsOperationApply, t0, replicas), entry("updater", metav1.ManagedFieldsOperationUpdate, t0, image))
	// v2: the applier writes at t1: its time moves.
	v2 := obj(entry("applier", metav1.ManagedFieldsOperationApply, t1, replicas), entry("updater", metav1.ManagedFieldsOperationUpdate, t0, image))
	// v3: the updater writes in the same second t1: a tie that
	// NewestManager gives to the applier (first entry); its time moved.
	v3 := obj(entry("applier", metav1.ManagedFieldsOperationApply, t1, replicas), entry("updater", metav1.ManagedFieldsOperationUpdate, t1, image))
	// v4: the updater takes replicas in the same second (no time moves,
	// both field sets changed): ambiguous.
	v4 := obj(entry("applier", metav1.ManagedFieldsOperationApply, t1, `{"f:spec":{}}`), entry("updater", metav1.ManagedFieldsOperationUpdate, t1, `{"f:spec":{"f:replicas":{},"f:template":{}}}`))
	// Then a write in the same second that moved no entry: newest time,
	// the first of the tie.
	for _, c := range []struct {
		name         string
		prev, cur    *appsv1.Deployment
		want, newest string
	}{
		{"no previous version: newest time, first of a tie", nil, v1, "applier", "applier"},
		{"the applier's time moved", v1, v2, "applier", "applier"},
		{"the updater's time moved to the applier's second", v2, v3, "updater", "applier"},
		{"two field sets changed in the same second", v3, v4, WriterAmbiguous, "applier"},
		{"nothing moved: newest time", v4, v4, "applier", "applier"},
	} {
		var prev ManagerEntries
		if c.prev != nil {
			prev = Entries(c.prev)
		}
		if got := Writer(prev, Entries(c.cur), c.cur); got != c.want {
			t.Errorf("%s: writer %q, want %q", c.name, got, c.want)
		}
		if got := NewestManager(c.cur); got != c.newest {
			t.Errorf("%s: NewestManager %q, want %q", c.name, got, c.newest)
		}
	}
}
