package informers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// WarningEvents are events.k8s.io/v1 Events of type Warning: the retries
// collector counts their occurrences; the informer is shared so that the
// coming per-object timelines can read it without a second watch. The
// informer lists and watches with the field selector type=Warning (the API
// server filters: Normal events, most of the traffic, never reach the
// exporter). core/v1 Events are the same stored objects under another API:
// the exporter never watches both.
var WarningEvents = Resource{"events.k8s.io", "v1", "events"}

// WarningSelector is the field selector of the WarningEvents informer.
const WarningSelector = "type=Warning"

func warningEvents(c kubernetes.Interface, ns string) knownResource {
	return knownResource{&eventsv1.Event{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = WarningSelector
			return c.EventsV1().Events(ns).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = WarningSelector
			return c.EventsV1().Events(ns).Watch(ctx, o)
		}}
}

// compactEvent keeps what the retries collector and the timelines read:
// reason, action, regarding, reporting controller, counts and times, a
// note; every string cut to its cap (caps.go). The type is Warning: the
// informer's field selector admits no other.
func compactEvent(e *eventsv1.Event) {
	compactMeta(&e.ObjectMeta)
	e.Reason, e.Action = CutUTF8(e.Reason, MaxReason), CutUTF8(e.Action, MaxReason)
	e.ReportingController = CutUTF8(e.ReportingController, MaxQualifiedName)
	e.DeprecatedSource = corev1.EventSource{Component: CutUTF8(e.DeprecatedSource.Component, MaxQualifiedName)}
	e.Note = CutUTF8(e.Note, MaxMessage)
	e.Regarding = reference(&e.Regarding)
	e.Related = nil
	e.ReportingInstance = ""
}
