package records

import (
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// RegardingKindNone is the kind label of an Event without a regarding object.
const RegardingKindNone = "none"

// Warning reads what the tracker needs from an Event.
func Warning(e *eventsv1.Event) tracker.Warning {
	controller := e.ReportingController
	if controller == "" {
		controller = e.DeprecatedSource.Component
	}
	count := max(e.DeprecatedCount, 1)
	last := e.DeprecatedLastTimestamp.Time
	if e.Series != nil {
		count = max(count, e.Series.Count)
		last = e.Series.LastObservedTime.Time
	}
	if last.IsZero() {
		last = e.EventTime.Time
	}
	object := string(e.Regarding.UID)
	if object == "" && e.Regarding.Name != "" {
		object = e.Regarding.Namespace + "/" + e.Regarding.Name
	}
	started := e.EventTime.Time
	if e.DeprecatedFirstTimestamp.After(started) {
		started = e.DeprecatedFirstTimestamp.Time
	}
	return tracker.Warning{
		UID:        string(e.UID),
		Created:    e.CreationTimestamp.Time,
		Started:    started,
		Controller: controller,
		Reason:     e.Reason,
		Kind:       RegardingKind(e.Regarding.APIVersion, e.Regarding.Kind),
		Object:     object,
		Count:      count,
		// The events.k8s.io recorder never sets deprecatedCount; the legacy
		// recorder starts it at 1 (client-go tools/record makeEvent).
		Legacy:   e.DeprecatedCount > 0,
		LastSeen: last,
	}
}

// RegardingKind is the kind label of a regarding object: KindLabel (its
// Kind for the groups kube-apiserver serves, Kind.group for others, as the
// resources collector labels custom resources), none without a kind, and
// other for an apiVersion that does not parse.
func RegardingKind(apiVersion, kind string) string {
	if kind == "" {
		return RegardingKindNone
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return tracker.LabelOther
	}
	return KindLabel(gv.Group, kind)
}
