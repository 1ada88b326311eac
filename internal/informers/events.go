package informers

import (
	"context"
	"unicode/utf8"

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

// maxNoteBytes: the note (an Event's human message) is kept for the coming
// timelines,
// cut to this many bytes; the API server accepts up to 1 KB from recorders
// and libraries must expect 64 KB. It never becomes a label.
const maxNoteBytes = 256

// compactEvent keeps what the retries collector reads, and what the coming
// timelines will:
// reason, regarding, reporting controller, counts and times, a cut note.
func compactEvent(e *eventsv1.Event) {
	compactMeta(&e.ObjectMeta)
	e.Note = CutUTF8(e.Note, maxNoteBytes)
	e.Related = nil
	e.ReportingInstance = ""
	e.DeprecatedSource.Host = ""
}

// CutUTF8 cuts s to at most n bytes on a rune boundary.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
