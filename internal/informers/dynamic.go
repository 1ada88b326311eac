package informers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CustomResourceDefinitions are read (through the dynamic client, as JSON)
// by CustomResources to track custom resources as their CRDs come and go.
var CustomResourceDefinitions = Resource{"apiextensions.k8s.io", "v1", "customresourcedefinitions"}

// SetDynamic gives the factory a dynamic client, which custom resources and
// CustomResourceDefinitions are read with. Call it before any Informer or
// Dynamic call.
func (f *Factory) SetDynamic(d dynamic.Interface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dynamic = d
}

// Dynamic returns a new informer of r read through the dynamic client
// (custom resources are served as JSON only), instrumented by the factory's
// wrapper like every other informer, with transform as its transform. It is
// neither shared nor started: the caller runs it and stops it (a custom
// resource's informer must stop when its CRD goes, or its reflector would
// relist a missing resource forever). onErr, when set, is told every error
// of its LIST and WATCH calls: a WatchList stream that the API server
// refuses (429 while its watch cache cannot initialize, as when a
// conversion webhook is down) is retried inside the reflector, which tells
// its watch error handler nothing.
func (f *Factory) Dynamic(r Resource, transform cache.TransformFunc, onErr func(error)) (cache.SharedIndexInformer, error) {
	f.mu.Lock()
	d, scope := f.dynamic, f.scope
	f.mu.Unlock()
	if d == nil {
		return nil, fmt.Errorf("informers: no dynamic client for %s", r)
	}
	// No index: CustomResources reads its store only to hand the objects
	// of a deleted CRD to Gone (a namespace index costs about 70 bytes per
	// object, BenchmarkTrackedMemory).
	return f.dynamicInformer(d, scope, r, f.hooked(r, transform), nil, onErr)
}

// dynamicListerWatcher lists and watches r; onErr (nil: none) is told the
// calls' errors.
func dynamicListerWatcher(d dynamic.Interface, r Resource, onErr func(error)) cache.ListerWatcher {
	ri := d.Resource(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
	report := func(call string, err error) {
		if err != nil && onErr != nil {
			onErr(fmt.Errorf("failed to %s %s: %w", call, r, err)) // as the reflector words a list error
		}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := ri.List(ctx, o)
			report("list", err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, o)
			report("watch", err)
			return w, err
		},
	}, d)
}

func (f *Factory) dynamicInformer(d dynamic.Interface, scope Scope, r Resource, transform cache.TransformFunc, indexers cache.Indexers, onErr func(error)) (cache.SharedIndexInformer, error) {
	lw := scoped(scope, r, dynamicListerWatcher(d, r, onErr))
	var inf cache.SharedIndexInformer
	if f.newInformer != nil {
		inf = f.newInformer(r, &unstructured.Unstructured{}, indexers)
	} else {
		inf = cache.NewSharedIndexInformerWithOptions(f.wrap(r.String(), lw), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
			ObjectDescription: r.String(),
			Indexers:          indexers,
		})
	}
	if err := inf.SetTransform(transform); err != nil {
		return nil, fmt.Errorf("informers: set transform for %s: %w", r, err)
	}
	return inf, nil
}

// compactCRD keeps what CustomResources reads of a CRD (ReadCRD): its group,
// names, scope, versions (served, storage, whether the status subresource
// is on) and the Established condition. A CRD's OpenAPI schema alone is
// often hundreds of kilobytes (cert-manager's Certificate: about 40 KB).
func compactCRD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || markedCompacted(u.GetAnnotations()) {
		return obj, nil
	}
	meta := metav1.ObjectMeta{Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Generation: u.GetGeneration(), Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}
	compactMeta(&meta)
	spec, _ := u.Object["spec"].(map[string]any)
	names, _ := spec["names"].(map[string]any)
	var versions []any
	vs, _ := spec["versions"].([]any)
	for _, v := range vs {
		m, _ := v.(map[string]any)
		if m == nil {
			continue
		}
		sub, _ := m["subresources"].(map[string]any)
		_, status := sub["status"]
		versions = append(versions, map[string]any{"name": m["name"], "served": m["served"], "storage": m["storage"], "statusSubresource": status})
	}
	var conds []any
	st, _ := u.Object["status"].(map[string]any)
	cs, _ := st["conditions"].([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m != nil && m["type"] == "Established" {
			conds = append(conds, map[string]any{"type": m["type"], "status": m["status"]})
		}
	}
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"spec": map[string]any{
			"group": spec["group"], "scope": spec["scope"], "versions": versions,
			"names": map[string]any{"kind": names["kind"], "plural": names["plural"]},
		},
		"status": map[string]any{"conditions": conds},
	}}
	out.SetName(meta.Name)
	out.SetUID(meta.UID)
	out.SetResourceVersion(meta.ResourceVersion)
	out.SetGeneration(meta.Generation)
	out.SetAnnotations(meta.Annotations)
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	return out, nil
}

// Clients returns the factory's typed client and its dynamic client (nil
// unless SetDynamic was called), for the one collector that sends requests
// of its own: admission_probes.
func (f *Factory) Clients() (kubernetes.Interface, dynamic.Interface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.client, f.dynamic
}
