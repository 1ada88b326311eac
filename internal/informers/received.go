package informers

import (
	"reflect"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations that package listwatch writes into every object it hands to a
// reflector (cached copies only, never written to the API server), and that
// Compact keeps. They carry, with the object, when and how the exporter
// received it, so that every tracker is timed at the moment the watch decoder
// delivered the event rather than when a handler got round to it (handlers
// run behind a per-collector lock that Tick, Collect and other informers'
// handlers also take: tens of milliseconds at 20,000 pods).
const (
	// AnnotationReceived is the receive time in Unix nanoseconds (the
	// exporter's clock).
	AnnotationReceived = "kube-convergence.io/received"
	// AnnotationListed is "true" on objects delivered by a list cycle: a
	// LIST (initial or relist) or the initial events of a WatchList stream.
	// Such an object shows the state after a span the exporter did not
	// watch (its start, or a watch gap), so nothing that happened inside it
	// can be timed from its receipt.
	AnnotationListed = "kube-convergence.io/listed"
)

// Stamp records on obj that it was received at `at`, by a list cycle when
// listed.
func Stamp(obj metav1.Object, at time.Time, listed bool) {
	if p, ok := obj.(*Pod); ok {
		p.received, p.listed = at.UnixNano(), listed
		return
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = make(map[string]string, 2)
	}
	a[AnnotationReceived] = strconv.FormatInt(at.UnixNano(), 10)
	if listed {
		a[AnnotationListed] = "true"
	} else {
		delete(a, AnnotationListed)
	}
	obj.SetAnnotations(a)
}

// Receipt is implemented by a cached object compacted into a type of its
// own (Compact's Pod, a custom resource collector's records), keeping the receive stamps as fields
// instead of annotations (a map costs about 300 bytes per object).
type Receipt interface {
	Receipt() (at time.Time, listed bool)
}

// Received returns when the exporter received obj (a cached object, or the
// object of a delete notification or its tombstone) and whether a list cycle
// delivered it. The time is zero for an object nobody stamped (an informer
// without package listwatch under it, as in some tests): callers then use
// their own clock.
func Received(obj any) (at time.Time, listed bool) {
	obj = Unwrap(obj)
	if v := reflect.ValueOf(obj); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
		return time.Time{}, false // no object: a typed nil must not panic the handler
	}
	if r, ok := obj.(Receipt); ok {
		return r.Receipt()
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return time.Time{}, false
	}
	a := m.GetAnnotations()
	if ns, err := strconv.ParseInt(a[AnnotationReceived], 10, 64); err == nil {
		at = time.Unix(0, ns)
	}
	return at, a[AnnotationListed] == "true"
}

// ReceivedOr returns Received(obj), with now for an unstamped object.
func ReceivedOr(obj any, now func() time.Time) (time.Time, bool) {
	at, listed := Received(obj)
	if at.IsZero() {
		at = now()
	}
	return at, listed
}
