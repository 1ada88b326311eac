package records

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRegardingKind(t *testing.T) {
	for _, c := range []struct{ apiVersion, kind, want string }{
		{"apps/v1", "ReplicaSet", "ReplicaSet"},
		{"v1", "Pod", "Pod"},
		{"batch/v1", "Job", "Job"},
		{"networking.k8s.io/v1", "Ingress", "Ingress"},
		{"cert-manager.io/v1", "Certificate", "Certificate.cert-manager.io"},
		{"", "", "none"},
		{"a/b/c", "Weird", "other"},
		// CRDs under k8s.io are labelled as the resources collector labels
		// them (Kind.group), kube-apiserver's own k8s.io groups bare.
		{"gateway.networking.k8s.io/v1", "HTTPRoute", "HTTPRoute.gateway.networking.k8s.io"},
		{"snapshot.storage.k8s.io/v1", "VolumeSnapshot", "VolumeSnapshot.snapshot.storage.k8s.io"},
		{"metrics.k8s.io/v1beta1", "PodMetrics", "PodMetrics.metrics.k8s.io"},
		{"storage.k8s.io/v1", "StorageClass", "StorageClass"},
		{"rbac.authorization.k8s.io/v1", "Role", "Role"},
		{"policy/v1", "PodDisruptionBudget", "PodDisruptionBudget"},
	} {
		if got := RegardingKind(c.apiVersion, c.kind); got != c.want {
			t.Errorf("RegardingKind(%q, %q) = %q, want %q", c.apiVersion, c.kind, got, c.want)
		}
	}
}

func TestWarningFields(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	legacy := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e1"}, Type: "Warning", Reason: "FailedCreate",
		DeprecatedSource: corev1.EventSource{Component: "replicaset-controller"}, DeprecatedCount: 7, DeprecatedLastTimestamp: at,
		Regarding: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "ns", Name: "web-1", UID: "rs-uid"}}
	w := Warning(legacy)
	if w.Controller != "replicaset-controller" || w.Count != 7 || !w.Legacy || w.Kind != "ReplicaSet" || w.Object != "rs-uid" || !w.LastSeen.Equal(at.Time) {
		t.Errorf("legacy: %+v", w)
	}
	// A legacy Event re-created after expiry: created an hour after its
	// firstTimestamp (eventTime is zero on legacy Events).
	legacy.CreationTimestamp = metav1.NewTime(at.Add(time.Hour))
	legacy.DeprecatedFirstTimestamp = at
	if w := Warning(legacy); !w.Created.Equal(at.Add(time.Hour)) || !w.Started.Equal(at.Time) {
		t.Errorf("legacy times: created %v started %v", w.Created, w.Started)
	}
	series := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e2"}, Type: "Warning", Reason: "FailedScheduling", ReportingController: "default-scheduler",
		EventTime: metav1.NewMicroTime(at.Time), Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at.Add(time.Second))},
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p"}}
	w = Warning(series)
	if w.Controller != "default-scheduler" || w.Count != 2 || w.Legacy || w.Kind != "Pod" || w.Object != "ns/p" || !w.LastSeen.Equal(at.Add(time.Second)) {
		t.Errorf("series: %+v", w)
	}
	if !w.Started.Equal(at.Time) {
		t.Errorf("series start %v, want eventTime %v", w.Started, at.Time)
	}
	bare := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e3"}, Type: "Warning", Reason: "X", EventTime: metav1.NewMicroTime(at.Time)}
	w = Warning(bare)
	if w.Count != 1 || w.Kind != "none" || w.Object != "" || w.Controller != "" || !w.LastSeen.Equal(at.Time) {
		t.Errorf("bare: %+v", w)
	}
}
