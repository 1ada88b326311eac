package informers

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The write of a timeline: the managers of the newest entries, status
// writes excepted, with their time; ties in the same second name both.
func TestWriteOf(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: created.Add(time.Duration(s) * time.Second)} }
	e := func(manager, sub string, t *metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: sub, Time: t}
	}
	for _, tc := range []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		want   []string
		wantAt time.Time
	}{
		{"none", nil, nil, time.Time{}},
		{"newest wins", []metav1.ManagedFieldsEntry{e("kubectl-create", "", at(0)), e("e2e-writer", "", at(5))}, []string{"e2e-writer"}, created.Add(5 * time.Second)},
		{"status writes are not the write", []metav1.ManagedFieldsEntry{e("e2e-writer", "", at(5)), e("kube-controller-manager", "status", at(9))}, []string{"e2e-writer"}, created.Add(5 * time.Second)},
		{"same second, both", []metav1.ManagedFieldsEntry{e("helm", "", at(5)), e("hpa", "scale", at(5)), e("helm", "", at(5))}, []string{"helm", "hpa"}, created.Add(5 * time.Second)},
		{"untimed entries skipped", []metav1.ManagedFieldsEntry{e("kubectl", "scale", nil), e("argocd", "", at(1))}, []string{"argocd"}, created.Add(time.Second)},
	} {
		got, gotAt := WriteOf(tc.fields)
		if !reflect.DeepEqual(got, tc.want) || !gotAt.Equal(tc.wantAt) {
			t.Errorf("%s: WriteOf = %v at %v, want %v at %v", tc.name, got, gotAt, tc.want, tc.wantAt)
		}
	}
}

func TestStatusWriteOf(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: created.Add(time.Duration(s) * time.Second)} }
	status := metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)
	fields := []metav1.ManagedFieldsEntry{
		{Manager: "e2e-writer", Time: at(9)},                                     // a spec write: not status
		{Manager: "kube-controller-manager", Subresource: "status", Time: at(4)}, // the status subresource
		{Manager: "old-client", Time: at(6), FieldsV1: status},                   // status through the main resource
		{Manager: "untimed", Subresource: "status"},
	}
	if got := StatusWriteOf(fields); !got.Equal(created.Add(6 * time.Second)) {
		t.Errorf("StatusWriteOf = %v, want created+6s", got)
	}
	if got := StatusWriteOf(fields[:1]); !got.IsZero() {
		t.Errorf("StatusWriteOf without status entries = %v, want zero", got)
	}
}

// Compact keeps the write of a workload in annotations, and the scheduler's
// message of an unschedulable pod (cut), dropping every other message.
func TestCompactKeepsTheWriteAndWhyUnschedulable(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: apiMeta("deploy")}
	_, _ = Compact(d)
	if got := d.Annotations[AnnotationWriteManagers]; got != "kubectl" {
		t.Errorf("write managers = %q, want kubectl", got)
	}
	if got := d.Annotations[AnnotationWriteTime]; got != specWritten.Format(time.RFC3339) {
		t.Errorf("write time = %q, want %s (the status write a minute later is not it)", got, specWritten.Format(time.RFC3339))
	}
	long := strings.Repeat("0/3 nodes are available: 3 Insufficient cpu. ", 10)
	p := &corev1.Pod{ObjectMeta: apiMeta("pod"), Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: long},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
	}}}
	cp := CompactPod(p)
	if got := cp.Status.Conditions[0].Message; got != long[:MaxMessage] {
		t.Errorf("unschedulable message = %q (%d bytes), want the first %d bytes", got, len(got), MaxMessage)
	}
	if got := cp.Status.Conditions[1].Message; got != "" {
		t.Errorf("Ready message kept: %q", got)
	}
}
