package informers_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// retainedCaps is the cap of every string a transform may keep, by its path
// in the kept object (fields joined with ".", [] a slice's elements, {} a
// map's values, {key} its keys). A non-empty string at a path not listed
// fails the tests: a new field kept is classified here, in caps.go and in
// docs/performance.md ("Strings from the cluster"). Those the API server
// bounds (names, namespaces, uids, labels, finalizers, enums; the Event
// type, by the informer's field selector) are listed with the API's bound
// and left as recorded in the inputs (apiBounded).
var retainedCaps = map[string]int{
	// Metadata of every kind.
	"TypeMeta.Kind":                           informers.MaxLabel,
	"TypeMeta.APIVersion":                     informers.MaxQualifiedName,
	"ObjectMeta.Name":                         informers.MaxName,
	"ObjectMeta.Namespace":                    informers.MaxLabel,
	"ObjectMeta.UID":                          informers.MaxLabel,
	"ObjectMeta.ResourceVersion":              informers.MaxLabel,
	"ObjectMeta.Labels{key}":                  informers.MaxQualifiedName,
	"ObjectMeta.Labels{}":                     informers.MaxLabel,
	"ObjectMeta.Annotations{key}":             informers.MaxQualifiedName,
	"ObjectMeta.Annotations{}":                informers.MaxKeptAnnotation,
	"ObjectMeta.Finalizers[]":                 informers.MaxQualifiedName,
	"ObjectMeta.OwnerReferences[].APIVersion": informers.MaxQualifiedName,
	"ObjectMeta.OwnerReferences[].Kind":       informers.MaxLabel,
	"ObjectMeta.OwnerReferences[].Name":       informers.MaxName,
	"ObjectMeta.OwnerReferences[].UID":        informers.MaxLabel,
	// Conditions of every kind that keeps them (pod records included).
	"Status.Conditions[].Type":    informers.MaxQualifiedName,
	"Status.Conditions[].Status":  informers.MaxReason,
	"Status.Conditions[].Reason":  informers.MaxReason,
	"Status.Conditions[].Message": informers.MaxMessage,
	// Workloads, namespaces, Services, EndpointSlices.
	"Spec.UpdateStrategy.Type":                    informers.MaxReason,
	"Status.CurrentRevision":                      informers.MaxName,
	"Status.UpdateRevision":                       informers.MaxName,
	"Status.Phase":                                informers.MaxReason,
	"Spec.Type":                                   informers.MaxReason,
	"Spec.ClusterIP":                              len("None"), // only None (headless) is kept
	"Spec.Selector{key}":                          informers.MaxQualifiedName,
	"Spec.Selector{}":                             informers.MaxLabel,
	"AddressType":                                 informers.MaxReason,
	"Endpoints[].NodeName":                        informers.MaxName,
	"Endpoints[].TargetRef.APIVersion":            informers.MaxQualifiedName,
	"Endpoints[].TargetRef.Kind":                  informers.MaxLabel,
	"Endpoints[].TargetRef.Namespace":             informers.MaxLabel,
	"Endpoints[].TargetRef.Name":                  informers.MaxName,
	"Endpoints[].TargetRef.UID":                   informers.MaxLabel,
	"Spec.NodeName":                               informers.MaxName,
	"Spec.ReadinessGates[].ConditionType":         informers.MaxQualifiedName,
	"Spec.Images[]":                               informers.MaxImage,
	"Status.InitContainerStatuses[].Name":         informers.MaxLabel,
	"Status.ContainerStatuses[].Name":             informers.MaxLabel,
	"Status.InitContainerStatuses[].State.Reason": informers.MaxReason,
	"Status.ContainerStatuses[].State.Reason":     informers.MaxReason,
	"writer": informers.MaxKeptAnnotation, // a pod record's AnnotationWriter
	// Events.
	"Type":                       informers.MaxReason,
	"Reason":                     informers.MaxReason,
	"Action":                     informers.MaxReason,
	"ReportingController":        informers.MaxQualifiedName,
	"DeprecatedSource.Component": informers.MaxQualifiedName,
	"Note":                       informers.MaxMessage,
	"Regarding.APIVersion":       informers.MaxQualifiedName,
	"Regarding.Kind":             informers.MaxLabel,
	"Regarding.Namespace":        informers.MaxLabel,
	"Regarding.Name":             informers.MaxName,
	"Regarding.UID":              informers.MaxLabel,
	// Custom resources (records.CustomObject).
	"Namespace":            informers.MaxLabel,
	"Name":                 informers.MaxName,
	"UID":                  informers.MaxLabel,
	"ResourceVersion":      informers.MaxLabel,
	"WriteManagers":        informers.MaxKeptAnnotation,
	"DecodeError":          informers.MaxMessage,
	"Conditions[].Type":    informers.MaxQualifiedName,
	"Conditions[].Status":  informers.MaxReason,
	"Conditions[].Reason":  informers.MaxReason,
	"Conditions[].Message": informers.MaxMessage,
}

// apiBounded are the input paths the API server bounds itself (a type's
// name and a colon first: that type's only), left as recorded: the object's
// identity (its name is the cache's key and is kept whole), labels and
// finalizers, the type meta and selfLink the server sets, enums, node
// names, readiness gates (qualified names), and the Event type the
// informer's field selector fixes to Warning.
var apiBounded = map[string]bool{
	"TypeMeta.Kind": true, "TypeMeta.APIVersion": true,
	"ObjectMeta.Name": true, "ObjectMeta.Namespace": true, "ObjectMeta.UID": true, "ObjectMeta.ResourceVersion": true,
	"ObjectMeta.SelfLink": true, "ObjectMeta.Labels{}": true, "ObjectMeta.Finalizers[]": true,
	"Spec.UpdateStrategy.Type": true, "Spec.Type": true, "Spec.Selector{}": true, "AddressType": true,
	"Endpoints[].NodeName": true, "Spec.NodeName": true, "Spec.ReadinessGates[].ConditionType": true,
	"Type": true, "Namespace:Status.Phase": true,
	"Object.metadata.name": true, "Object.metadata.namespace": true, "Object.metadata.uid": true,
	"Object.metadata.resourceVersion": true,
	// Times the API server writes (RFC 3339) in a custom resource's
	// metadata, which it decodes as every object's.
	"Object.metadata.creationTimestamp": true, "Object.metadata.deletionTimestamp": true,
	"Object.metadata.managedFields[].time": true,
}

// leaf is one string an object holds, and how to replace it (nil when it
// cannot be: a map key, an unexported field).
type leaf struct {
	path string
	s    string
	set  func(string)
}

var skipped = []reflect.Type{reflect.TypeFor[time.Time](), reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]()}

// leaves returns every string v holds, in a fixed order: struct fields,
// slice elements, map keys and values, through pointers and interfaces
// (unstructured content, whose map keys name fields: "Object.status.phase").
func leaves(v any) []leaf {
	var out []leaf
	walk(reflect.ValueOf(v), "", &out)
	return out
}

func walk(v reflect.Value, path string, out *[]leaf) {
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walk(v.Elem(), path, out)
		}
	case reflect.Interface:
		switch {
		case v.IsNil():
		case v.Elem().Kind() == reflect.String:
			l := leaf{path: path, s: v.Elem().String()}
			if v.CanSet() {
				l.set = func(s string) { v.Set(reflect.ValueOf(s)) }
			}
			*out = append(*out, l)
		default:
			walk(v.Elem(), path, out)
		}
	case reflect.Struct:
		if slices.Contains(skipped, v.Type()) {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name := f.Name
			if f.Anonymous {
				name = f.Type.Name()
			}
			walk(v.Field(i), join(name), out)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes: FieldsV1, a CA bundle
		}
		for i := range v.Len() {
			walk(v.Index(i), path+"[]", out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		unstructuredMap := v.Type().Elem().Kind() == reflect.Interface
		for _, k := range keys {
			*out = append(*out, leaf{path: path + "{key}", s: k.String()})
			p := path + "{}"
			if unstructuredMap {
				p = join(k.String())
			}
			e := v.MapIndex(k)
			if e.Kind() == reflect.String || (e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.String) {
				s := e.String()
				if e.Kind() == reflect.Interface {
					s = e.Elem().String()
				}
				*out = append(*out, leaf{path: p, s: s, set: func(s string) {
					nv := reflect.ValueOf(s)
					if !unstructuredMap {
						nv = nv.Convert(v.Type().Elem())
					}
					v.SetMapIndex(k, nv)
				}})
				continue
			}
			walk(e, p, out)
		}
	case reflect.String:
		l := leaf{path: path, s: v.String()}
		if v.CanSet() {
			l.set = v.SetString
		}
		*out = append(*out, l)
	}
}

// mutable are the leaves of an input that a test may replace: not the
// ones the API server bounds, not map keys.
func mutable(obj any) []leaf {
	var out []leaf
	typ := reflect.TypeOf(obj).Elem().Name()
	for _, l := range leaves(obj) {
		if l.set != nil && !apiBounded[l.path] && !apiBounded[typ+":"+l.path] {
			out = append(out, l)
		}
	}
	return out
}

// checkRetained fails t for every string of out over its cap (or at a path
// without one), and for invalid UTF-8 when the input was valid.
func checkRetained(t testing.TB, what string, out any, validInput bool) {
	t.Helper()
	for _, l := range leaves(out) {
		if l.s == "" {
			continue
		}
		limit, ok := retainedCaps[l.path]
		switch {
		case !ok:
			t.Errorf("%s: keeps %d bytes at %s, which has no cap (classify it in retainedCaps, caps.go and the docs)", what, len(l.s), l.path)
		case len(l.s) > limit:
			t.Errorf("%s: keeps %d bytes at %s, over its cap of %d", what, len(l.s), l.path, limit)
		case validInput && !utf8.ValidString(l.s):
			t.Errorf("%s: %s is not valid UTF-8 (cut inside a rune?): %q", what, l.path, l.s[max(0, len(l.s)-8):])
		}
	}
}

// identity is what a transform must keep whole.
func identity(obj any) [3]string {
	switch o := obj.(type) {
	case *records.CustomObject:
		return [3]string{o.Namespace, o.Name, string(o.UID)}
	case metav1.Object:
		return [3]string{o.GetNamespace(), o.GetName(), string(o.GetUID())}
	}
	return [3]string{}
}

// A transform and the inputs it is tried on.
type transform struct {
	name   string
	inputs []runtime.Object
	apply  func(i int, obj runtime.Object) any // i: the input's index
}

var customResource = informers.Resource{Group: "example.com", Version: "v1", Resource: "widgets"}

// recorded returns the objects of the sandbox recordings, by their Go type
// (*unstructured.Unstructured: the widgets, not the CRDs), read once. Of each type it
// keeps an object only when it, or what Compact keeps of it, holds a
// string at a path the ones kept before do not: the few that cover every
// field the recordings fill.
var recorded = sync.OnceValues(func() (map[reflect.Type][]runtime.Object, error) {
	files, err := filepath.Glob(filepath.Join("..", "replay", "testdata", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	out, seen := map[reflect.Type][]runtime.Object{}, map[reflect.Type]map[string]bool{}
	for _, f := range files {
		rec, err := replay.ReadFile(f, replay.NewResources(customResource))
		if err != nil {
			return nil, err
		}
		for _, l := range rec.Lines {
			if l.Object == nil || l.Resource.Group == "apiextensions.k8s.io" {
				continue
			}
			typ := reflect.TypeOf(l.Object)
			if seen[typ] == nil {
				seen[typ] = map[string]bool{}
			}
			fresh, kept := false, leaves(l.Object)
			if compacted, err := informers.Compact(l.Object.DeepCopyObject()); err == nil {
				for _, lf := range leaves(compacted) {
					lf.path = "kept " + lf.path
					kept = append(kept, lf)
				}
			}
			for _, lf := range kept {
				if lf.s != "" && !seen[typ][lf.path] {
					seen[typ][lf.path], fresh = true, true
				}
			}
			if fresh {
				out[typ] = append(out[typ], l.Object)
			}
		}
	}
	return out, nil
})

// recordedOf returns the recorded objects of the examples' types. The
// recordings hold no DaemonSet, no unschedulable pod and no container
// that exited: they are made of a recorded Deployment and pod.
func recordedOf(t testing.TB, examples ...runtime.Object) []runtime.Object {
	t.Helper()
	byType, err := recorded()
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, e := range examples {
		objs := byType[reflect.TypeOf(e)]
		if _, ok := e.(*appsv1.DaemonSet); ok && len(objs) == 0 {
			d := byType[reflect.TypeFor[*appsv1.Deployment]()][0].(*appsv1.Deployment)
			surge := intstr.FromString("10%")
			objs = []runtime.Object{&appsv1.DaemonSet{ObjectMeta: *d.ObjectMeta.DeepCopy(), Spec: appsv1.DaemonSetSpec{
				Selector: d.Spec.Selector.DeepCopy(), Template: *d.Spec.Template.DeepCopy(),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &surge}},
			}, Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, Conditions: []appsv1.DaemonSetCondition{
				{Type: "Healthy", Status: corev1.ConditionFalse, Reason: "Unavailable", Message: "1 of 3 pods unavailable"},
			}}}}
		}
		if _, ok := e.(*corev1.Pod); ok && len(objs) > 0 {
			p := objs[0].(*corev1.Pod).DeepCopy()
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."}}}
			exited := objs[0].(*corev1.Pod).DeepCopy()
			exited.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
			exited.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
			objs = append(slices.Clip(objs), p, exited)
		}
		if len(objs) == 0 {
			t.Fatalf("the recordings hold no %T", e)
		}
		out = append(out, objs...)
	}
	return out
}

func compactTransform(t testing.TB, name string, examples ...runtime.Object) transform {
	return transform{name: name, inputs: recordedOf(t, examples...), apply: func(_ int, obj runtime.Object) any {
		out, err := informers.Compact(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}}
}

// conventions are the custom resources' conventions tried: one reads a
// Ready condition and the observed generation from status fields, the
// other from a configured path, with a readiness expression. Both read
// status.phase, a string, as a generation: its value is quoted in
// DecodeError.
var conventions = sync.OnceValue(func() []*records.Convention {
	var out []*records.Convention
	for _, r := range []config.Resource{
		{Conditions: []string{"Ready"}, ObservedFields: []string{"observedGeneration", "phase"}},
		{Conditions: []string{"Ready"}, ObservedGeneration: "{.status.phase}", ReadyExprs: []config.ReadyExpr{{Path: "{.status.phase}", Value: "Running"}}},
	} {
		c, err := records.NewConvention(r)
		if err != nil {
			panic(err)
		}
		out = append(out, c)
	}
	return out
})

func customTransform(t testing.TB) transform {
	return transform{name: "Convention.Transform", inputs: recordedOf(t, &unstructured.Unstructured{}), apply: func(i int, obj runtime.Object) any {
		out, err := conventions()[i%2].Transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}}
}

func transforms(t testing.TB) []transform {
	return []transform{
		compactTransform(t, "Event", &eventsv1.Event{}),
		compactTransform(t, "Pod", &corev1.Pod{}),
		compactTransform(t, "Workload", &appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}),
		compactTransform(t, "Node", &corev1.Node{}),
		compactTransform(t, "Namespace", &corev1.Namespace{}),
		compactTransform(t, "Service", &corev1.Service{}),
		compactTransform(t, "EndpointSlice", &discoveryv1.EndpointSlice{}),
		customTransform(t),
	}
}

// big is 1 MiB of one- and three-byte runes: a cut at any byte count can
// fall inside a rune.
var big = strings.Repeat("ab€", 1<<20/5)

// Every transform keeps every string of a recorded object within its cap,
// whichever field holds 1 MiB (each in turn, then all at once), on a rune
// boundary, and keeps the object's namespace, name and uid whole.
func TestTransformsCapEveryString(t *testing.T) {
	for _, tr := range transforms(t) {
		t.Run(tr.name, func(t *testing.T) {
			for i, in := range tr.inputs {
				want := identity(in)
				n := len(mutable(in))
				for field := range n + 1 {
					obj := in.DeepCopyObject()
					what := ""
					for j, l := range mutable(obj) {
						if field == n || j == field {
							l.set(big)
							what = l.path
						}
					}
					if field == n {
						what = "every field"
					}
					what = reflect.TypeOf(in).Elem().Name() + " " + identity(in)[1] + ", 1 MiB in " + what
					out := tr.apply(i, obj)
					checkRetained(t, what, out, true)
					if got := identity(out); got != want {
						t.Errorf("%s: identity %q, want %q", what, got, want)
					}
				}
			}
		})
	}
}

// fuzzTransform fuzzes tr: s, repeated, replaces the input's strings that
// mask selects (bit i%64 for the i-th), in one of the recorded objects.
// No kept string may exceed its cap or be cut inside a rune, the identity
// stays whole, and a second pass changes nothing (client-go transforms the
// objects of a WatchList stream twice: see Compact).
func fuzzTransform(f *testing.F, tr func(testing.TB) transform) {
	seeds := tr(f)
	for i := range seeds.inputs {
		f.Add(uint8(i), ^uint64(0), "é€x", uint16(400))
		f.Add(uint8(i), uint64(0x5555555555555555), "ProgressDeadlineExceeded", uint16(8))
	}
	f.Fuzz(func(t *testing.T, pick uint8, mask uint64, s string, repeat uint16) {
		tr := tr(t)
		i := int(pick) % len(tr.inputs)
		in := tr.inputs[i]
		value := strings.Repeat(s, min(1+int(repeat), (1<<20)/max(1, len(s))))
		obj := in.DeepCopyObject()
		for j, l := range mutable(obj) {
			if mask>>(j%64)&1 == 1 {
				l.set(value)
			}
		}
		once := tr.apply(i, obj)
		what := reflect.TypeOf(in).Elem().Name() + " " + identity(in)[1]
		checkRetained(t, what, once, utf8.ValidString(s))
		if got, want := identity(once), identity(in); got != want {
			t.Errorf("%s: identity %q, want %q", what, got, want)
		}
		snapshot := once.(runtime.Object).DeepCopyObject()
		if twice := tr.apply(i, once.(runtime.Object)); !reflect.DeepEqual(snapshot, twice) {
			t.Errorf("%s: a second pass changed the object:\n once: %+v\ntwice: %+v", what, snapshot, twice)
		}
	})
}

func FuzzCompactEvent(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform { return compactTransform(t, "Event", &eventsv1.Event{}) })
}

func FuzzCompactPod(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform { return compactTransform(t, "Pod", &corev1.Pod{}) })
}

func FuzzCompactWorkload(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform {
		return compactTransform(t, "Workload", &appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{})
	})
}

func FuzzCompactNode(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform { return compactTransform(t, "Node", &corev1.Node{}) })
}

func FuzzCompactNamespace(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform { return compactTransform(t, "Namespace", &corev1.Namespace{}) })
}

func FuzzCompactService(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform { return compactTransform(t, "Service", &corev1.Service{}) })
}

func FuzzCompactEndpointSlice(f *testing.F) {
	fuzzTransform(f, func(t testing.TB) transform {
		return compactTransform(t, "EndpointSlice", &discoveryv1.EndpointSlice{})
	})
}

func FuzzCustomTransform(f *testing.F) { fuzzTransform(f, customTransform) }
