package informers

import (
	"reflect"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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

// Receipt is implemented by a cached object that a collector's transform
// compacted into a type of its own, keeping the receive stamps as fields
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

// NotLive returns ReceivedOr(obj, now) and whether obj is not live: delivered
// by the informer's initial replay (initial, from an add handler) or by a
// list cycle. Nothing that happened before a not-live object arrived can be
// timed from its receipt.
func NotLive(obj any, initial bool, now func() time.Time) (time.Time, bool) {
	at, listed := ReceivedOr(obj, now)
	return at, initial || listed
}

// DeletedAt returns when the exporter learned that obj, the object of a
// delete notification, was deleted: its receipt, or now for a tombstone.
// A tombstone (cache.DeletedFinalStateUnknown) comes from a relist that
// found the object gone, and carries the last version the cache held,
// received before the deletion, maybe hours before: its receipt would date
// the deletion before everything that happened while the watch was down.
func DeletedAt(obj any, now func() time.Time) time.Time {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return now()
	}
	at, _ := ReceivedOr(obj, now)
	return at
}

// Recreated says whether an update notification's old and new objects have
// different uids: the object was deleted and recreated under its name while
// the watch was down. The relist that finds the new object under the cached
// key delivers an update, never the old object's deletion (client-go v0.37.2
// tools/cache/controller.go, processDeltas and processReplacedAllInfo: a
// listed object whose key the cache holds goes to OnUpdate(cached, listed)). A handler that tracks objects by uid then deletes
// the old one, dated by the relist (DeletedAt(newObj, now)), and adds the new
// one; otherwise the old uid's state stays forever. False when either object
// has no object metadata.
func Recreated(oldObj, newObj any) bool {
	o, err := meta.Accessor(oldObj)
	if err != nil {
		return false
	}
	n, err := meta.Accessor(newObj)
	return err == nil && o.GetUID() != n.GetUID()
}
