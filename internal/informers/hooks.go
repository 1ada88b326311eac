package informers

import (
	"hash/fnv"
	"slices"
	"strings"
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
			if m, ok := obj.(metav1.Object); ok && !compacted(obj) {
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
// collector's hook, kept by Compact (a field of a pod's record:
// RecordedWriter reads both).
const AnnotationWriter = "kube-convergence.io/writer"

// RecordedWriter returns the writer a hook recorded on a cached object
// (AnnotationWriter, a field of a Pod record), "" without one.
func RecordedWriter(m metav1.Object) string {
	if p, ok := m.(*Pod); ok {
		return p.writer
	}
	return m.GetAnnotations()[AnnotationWriter]
}

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

// WriterAmbiguous is the writer of a write that changed the managedFields
// entries of several managers at once (ManagerEntries.Writer).
const WriterAmbiguous = "ambiguous"

// ManagerEntries is what a writer attribution keeps of one version's
// managedFields: per entry (manager, operation, subresource), its time and a
// hash of its field set.
type ManagerEntries map[string]EntryState

// EntryState is one managedFields entry's time (Unix s, 0 without) and
// field-set hash.
type EntryState struct {
	Time   int64
	Fields uint64
}

// Entries reads m's managedFields for Writer.
func Entries(m metav1.Object) ManagerEntries {
	out := make(ManagerEntries, len(m.GetManagedFields()))
	for _, e := range m.GetManagedFields() {
		var st EntryState
		if e.Time != nil {
			st.Time = e.Time.Unix()
		}
		if e.FieldsV1 != nil {
			h := fnv.New64a()
			_, _ = h.Write(e.FieldsV1.GetRawBytes())
			st.Fields = h.Sum64()
		}
		out[e.Manager+"\x00"+string(e.Operation)+"\x00"+e.Subresource] = st
	}
	return out
}

// Writer attributes the write that produced m, given the entries of the
// previous version: the manager whose entry's time moved (the API server
// stamps the writer's entry), else the one whose field set changed;
// WriterAmbiguous when several did; NewestManager when none did or prev is
// nil. NewestManager alone mis-attributes writes in the same second as
// another manager's: times have one-second precision, and a tie goes to the
// first entry (the API server sorts Apply entries first), so a fight within
// one second reads as one manager's writes.
func Writer(prev, cur ManagerEntries, m metav1.Object) string {
	if prev == nil {
		return NewestManager(m)
	}
	var timed, changed []string
	for k, st := range cur {
		old, ok := prev[k]
		manager, _, _ := strings.Cut(k, "\x00")
		if st.Time != 0 && (!ok || st.Time != old.Time) {
			timed = append(timed, manager)
		}
		if !ok || st.Fields != old.Fields {
			changed = append(changed, manager)
		}
	}
	for _, c := range [][]string{timed, changed} {
		switch distinct(c) {
		case 0:
			continue
		case 1:
			return c[0]
		default:
			return WriterAmbiguous
		}
	}
	return NewestManager(m)
}

func distinct(names []string) int {
	n := 0
	for i, a := range names {
		if !slices.Contains(names[:i], a) {
			n++
		}
	}
	return n
}
