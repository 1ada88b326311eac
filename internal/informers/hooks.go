package informers

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Hook reads an object as the API server sent it, before the informer's
// transform compacts it: managedFields are still there. It runs in the
// reflector's goroutine, once per object received (list items, watch events,
// deletions alike), in the order received; it must be quick and must not
// keep the object. It may set annotations that Compact keeps
// (AnnotationWriter).
type Hook func(obj metav1.Object)

// hooks are the hooks per resource. Read on every object received, written
// a few times at start: a read-write lock keeps the readers apart.
type hooks struct {
	mu sync.RWMutex
	by map[Resource][]Hook
}

// BeforeCompact adds h to the objects of r received from now on (an object
// received before is not seen again: callers treat the first object of a
// UID they see as a baseline). The churn collector reads field managers
// this way without keeping managedFields in the cache.
//
// Hooks are per group and resource, whatever the version: a custom
// resource's informer (Dynamic) is created for the version its CRD prefers,
// which the caller of BeforeCompact may not know.
func (f *Factory) BeforeCompact(r Resource, h Hook) {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	if f.hooks.by == nil {
		f.hooks.by = map[Resource][]Hook{}
	}
	f.hooks.by[unversioned(r)] = append(f.hooks.by[unversioned(r)], h)
}

func unversioned(r Resource) Resource { return Resource{Group: r.Group, Resource: r.Resource} }

// hooked returns transform preceded by r's hooks. An object already
// compacted (the second pass of a WatchList stream's objects, see Compact)
// is not shown to the hooks again.
func (f *Factory) hooked(r Resource, transform cache.TransformFunc) cache.TransformFunc {
	r = unversioned(r)
	return func(obj any) (any, error) {
		f.hooks.mu.RLock()
		hs := f.hooks.by[r]
		f.hooks.mu.RUnlock()
		if len(hs) > 0 {
			if m, ok := obj.(metav1.Object); ok && m.GetAnnotations()[AnnotationCompacted] == "" {
				for _, h := range hs {
					h(m)
				}
			}
		}
		return transform(obj)
	}
}

// AnnotationWriter names the field manager of an object's last write, as
// a hook read it from managedFields (cached copies only). Set by the churn
// collector's hook, kept by Compact.
const AnnotationWriter = "kube-convergence.io/writer"

// NewestManager returns the manager of the managedFields entry with the
// newest time: the writer of the last write that changed the object (the
// API server stamps the time of the entry of the manager whose write
// changed something). Entries without a time (a write through the /scale
// subresource leaves none, seen on v1.37) are never chosen; ties go to the
// first entry. "" without managedFields.
func NewestManager(m metav1.Object) string {
	var (
		best   string
		newest metav1.Time
	)
	for _, e := range m.GetManagedFields() {
		if e.Time != nil && (best == "" || e.Time.After(newest.Time)) {
			best, newest = e.Manager, *e.Time
		}
	}
	return best
}
