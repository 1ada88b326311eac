package informers

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Warning Event keeps what the retries collector and the timelines read;
// managedFields and the related object go, the note is cut on a rune
// boundary.
func TestCompactEvent(t *testing.T) {
	ts := metav1.NewTime(time.Unix(100, 0))
	note := strings.Repeat("é", 200) // 400 bytes
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e", UID: "u", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Time: &ts}},
			Annotations: map[string]string{"x": "y"}},
		Type: "Warning", Reason: "FailedCreate", Note: note, ReportingController: "replicaset-controller", ReportingInstance: "kcm-host",
		Regarding: corev1.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Name: "web", UID: "rs"},
		Related:   &corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Series:    &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(ts.Time)}, DeprecatedCount: 0,
		DeprecatedSource: corev1.EventSource{Component: "replicaset-controller", Host: "kcm-host"},
	}
	if _, err := Compact(e); err != nil {
		t.Fatal(err)
	}
	if e.ManagedFields != nil || e.Related != nil || e.ReportingInstance != "" || e.DeprecatedSource.Host != "" || e.Annotations["x"] != "" {
		t.Errorf("not compacted: %+v", e)
	}
	if len(e.Note) > MaxMessage || !utf8.ValidString(e.Note) || !strings.HasPrefix(note, e.Note) || len(e.Note) < MaxMessage-1 {
		t.Errorf("note cut to %d bytes, valid %v", len(e.Note), utf8.ValidString(e.Note))
	}
	if e.Reason != "FailedCreate" || e.Series.Count != 3 || e.Regarding.UID != "rs" || e.ReportingController != "replicaset-controller" || e.DeprecatedSource.Component != "replicaset-controller" {
		t.Errorf("lost a field the collectors read: %+v", e)
	}
}
