package records

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// The kstatus conditions read on every custom resource, whatever its
// readiness conditions (sigs.k8s.io/cli-utils pkg/kstatus: Reconciling and
// Stalled are "abnormal-true" conditions).
const (
	ConditionStalled     = "Stalled"
	ConditionReconciling = "Reconciling"
)

// Convention is how a configured custom resource is judged: its readiness
// conditions, or readiness expressions, and where its observed generation
// is. It is safe for concurrent use.
type Convention struct {
	Conditions   []string
	mu           sync.Mutex        // a JSONPath keeps state while it evaluates
	namesMu      sync.Mutex        // guards names
	names        map[string]string // interned field manager names
	observed     *jsonpath.JSONPath
	observedText string
	// observedFields are the status fields read when no path is
	// configured (config.Resource.ObservedFields).
	observedFields []string
	ready          []readyPath
}

type readyPath struct {
	path  *jsonpath.JSONPath
	value string
}

// NewConvention compiles a configured resource's convention.
func NewConvention(r config.Resource) (*Convention, error) {
	c := &Convention{Conditions: r.Conditions, observedFields: r.ObservedFields}
	if r.ObservedGeneration == "" && len(c.observedFields) == 0 {
		c.observedFields = []string{"observedGeneration"}
	}
	if r.ObservedGeneration != "" {
		j, err := config.ParseJSONPath(r.ObservedGeneration)
		if err != nil {
			return nil, err
		}
		c.observed, c.observedText = j, r.ObservedGeneration
	}
	for _, e := range r.ReadyExprs {
		j, err := config.ParseJSONPath(e.Path)
		if err != nil {
			return nil, err
		}
		c.ready = append(c.ready, readyPath{j, e.Value})
	}
	return c, nil
}

// CustomObject is the compact cached form of a custom resource: what the
// convention reads, extracted by the informer's transform from the decoded
// JSON, which is then dropped. It holds its metadata as plain fields rather
// than a metav1.ObjectMeta (232 bytes with its maps and slices, most of it
// empty here) and hands one out on demand (metav1.ObjectMetaAccessor) for the
// informer's key function and resource version check: 144 bytes less per
// cached object (BenchmarkTrackedMemory).
type CustomObject struct {
	Namespace, Name string
	UID             types.UID
	// ResourceVersion must be kept: the shared informer delivers an update
	// whose resourceVersion did not change as a resync only
	// (client-go v0.37.2 shared_informer.go OnUpdate).
	ResourceVersion string
	Generation      int64
	Created         time.Time

	// Received is when the exporter received the object (Unix ns), Listed
	// whether a list cycle delivered it (see informers.Stamp).
	Received int64
	Listed   bool
	// HasStatus: the object has a status. HasObserved: ObservedGeneration
	// was read. Terminating: it has a deletionTimestamp. ReadyAbsent: a
	// readiness expression's path is absent from its status. (The bools
	// sit together: apart, each took 8 bytes.)
	HasStatus   bool
	HasObserved bool
	Terminating bool
	ReadyAbsent bool
	// SpecWrite is the newest managedFields time touching spec (API side,
	// one-second precision); zero when unknown.
	SpecWrite time.Time
	// WriteManagers are the field managers of the last write
	// (newline-separated, interned) and WriteUnix its API-side time in Unix
	// seconds (informers.WriteOf; one-second precision), for the
	// timelines: 24 bytes per object, where a time.Time and a string of
	// its own cost 40 plus the name (BenchmarkTrackedMemory went from 993
	// to 1,041 B/object before).
	WriteManagers string
	WriteUnix     int64
	// StatusUnix is the time of the last status write in Unix seconds
	// (informers.StatusWriteOf), 0 when unknown.
	StatusUnix int64

	// ObservedGeneration is the newest of the status fields that hold one
	// (status.observedGeneration, or a preset's, or the configured path)
	// when HasObserved.
	ObservedGeneration int64
	// ConditionsObserved is the newest observedGeneration of the kept
	// conditions (readiness, Stalled, Reconciling), found by type; 0: none.
	ConditionsObserved int64
	// DecodeError says why the configured observedGeneration path gave no
	// integer for this object; "" when it did or none is configured.
	DecodeError string
	// Conditions are the readiness conditions and the kstatus ones, as found.
	Conditions []CustomCondition
	// Ready holds each readiness expression's result.
	Ready []bool
}

var (
	_ runtime.Object            = (*CustomObject)(nil)
	_ metav1.ObjectMetaAccessor = (*CustomObject)(nil)
	_ informers.Receipt         = (*CustomObject)(nil)
)

// GetObjectMeta implements metav1.ObjectMetaAccessor.
func (o *CustomObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
		Generation: o.Generation, CreationTimestamp: metav1.NewTime(o.Created)}
}

// GetUID and GetResourceVersion are what the informers' watch seam reads of
// every object (resync no-ops, recreation during a watch gap), without the
// ObjectMeta that GetObjectMeta builds.
func (o *CustomObject) GetUID() types.UID { return o.UID }

// GetResourceVersion: see GetUID.
func (o *CustomObject) GetResourceVersion() string { return o.ResourceVersion }

// GetObjectKind implements runtime.Object: the informer knows the resource.
func (o *CustomObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// Receipt implements informers.Receipt.
func (o *CustomObject) Receipt() (time.Time, bool) {
	if o.Received == 0 {
		return time.Time{}, o.Listed
	}
	return time.Unix(0, o.Received), o.Listed
}

// DeepCopyObject implements runtime.Object.
func (o *CustomObject) DeepCopyObject() runtime.Object {
	c := *o
	c.Conditions = append([]CustomCondition(nil), o.Conditions...)
	c.Ready = append([]bool(nil), o.Ready...)
	return &c
}

// CustomCondition is one kept condition.
type CustomCondition struct {
	Type, Status, Reason, Message string
	ObservedGeneration            int64
	LastTransition                time.Time
}

// Transform returns the informer transform of resources judged by conv:
// unstructured objects become CustomObjects, every string from the cluster
// in them cut to its cap (informers' caps.go; a custom status is bounded
// by nothing but its CRD's schema); a CustomObject passes
// unchanged (a transform must be idempotent: a WatchList stream's objects
// are transformed twice, see informers.Compact).
func (c *Convention) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return c.Compact(o), nil
	case *CustomObject:
		return o, nil
	}
	return obj, nil
}

// Compact extracts what the convention reads from u.
func (c *Convention) Compact(u *unstructured.Unstructured) *CustomObject {
	o := &CustomObject{
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Generation: u.GetGeneration(), Created: u.GetCreationTimestamp().Time,
		Terminating: deleting(u),
	}
	meta := metav1.ObjectMeta{Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}
	if managers, written := informers.WriteOf(meta.ManagedFields); len(managers) > 0 {
		o.WriteManagers, o.WriteUnix = c.internManagers(strings.Join(managers, "\n")), written.Unix()
	}
	if st := informers.StatusWriteOf(meta.ManagedFields); !st.IsZero() {
		o.StatusUnix = st.Unix()
	}
	informers.CompactMeta(&meta)
	o.SpecWrite = SpecWritten(&meta)
	if at, listed := informers.Received(&meta); !at.IsZero() {
		o.Received, o.Listed = at.UnixNano(), listed
	} else {
		o.Listed = listed
	}
	status, _ := u.Object["status"].(map[string]any)
	o.HasStatus = len(status) > 0
	for _, f := range c.observedFields {
		v, ok := status[f]
		if !ok {
			continue
		}
		n, isInt := integer(v)
		switch {
		case !isInt:
			o.DecodeError = fmt.Sprintf("status.%s is not an integer: %v", f, v)
		case !o.HasObserved || n > o.ObservedGeneration:
			o.ObservedGeneration, o.HasObserved = n, true
		}
	}
	c.compactConditions(o, status)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.observed != nil {
		o.ObservedGeneration, o.HasObserved, o.DecodeError = 0, false, ""
		v, err := find(c.observed, u.Object)
		switch {
		case err != nil:
			o.DecodeError = fmt.Sprintf("%s: %v", c.observedText, err)
		default:
			if o.ObservedGeneration, o.HasObserved = integer(v); !o.HasObserved {
				o.DecodeError = fmt.Sprintf("%s is not an integer: %v", c.observedText, v)
			}
		}
	}
	for _, r := range c.ready {
		v, err := find(r.path, u.Object)
		o.Ready = append(o.Ready, err == nil && fmt.Sprint(v) == r.value)
		o.ReadyAbsent = o.ReadyAbsent || (err != nil && o.HasStatus)
	}
	// It quotes the value found, which may be a whole subtree.
	o.DecodeError = informers.CutUTF8(o.DecodeError, informers.MaxMessage)
	return o
}

// compactConditions keeps the first condition of each type the convention
// reads (readiness, Stalled, Reconciling), found by type whatever the
// order, and the newest observedGeneration among them. A list of any
// length keeps at most one per type: a controller writing hundreds of
// conditions, or one type many times, costs no memory per entry.
func (c *Convention) compactConditions(o *CustomObject, status map[string]any) {
	conds, _ := status["conditions"].([]any)
	for _, raw := range conds {
		m, _ := raw.(map[string]any)
		if m == nil {
			continue
		}
		typ, _ := m["type"].(string)
		if typ != ConditionStalled && typ != ConditionReconciling && !contains(c.Conditions, typ) {
			continue
		}
		if slices.ContainsFunc(o.Conditions, func(k CustomCondition) bool { return k.Type == typ }) {
			continue // a duplicate type: the first one stands, as kstatus reads it
		}
		og, _ := integer(m["observedGeneration"])
		o.ConditionsObserved = max(o.ConditionsObserved, og)
		cc := CustomCondition{Type: c.intern(typ), ObservedGeneration: og}
		cc.Status, _ = m["status"].(string)
		cc.Status = c.intern(informers.CutUTF8(cc.Status, informers.MaxReason))
		cc.Reason, _ = m["reason"].(string)
		cc.Reason = informers.CutUTF8(cc.Reason, informers.MaxReason)
		cc.Message, _ = m["message"].(string)
		cc.Message = informers.CutUTF8(cc.Message, informers.MaxMessage)
		if s, ok := m["lastTransitionTime"].(string); ok {
			cc.LastTransition, _ = time.Parse(time.RFC3339, s)
		}
		o.Conditions = append(o.Conditions, cc)
	}
}

// deleting reports whether u has a deletionTimestamp, without parsing it
// (GetDeletionTimestamp allocates on every update).
func deleting(u *unstructured.Unstructured) bool {
	m, _ := u.Object["metadata"].(map[string]any)
	ts, _ := m["deletionTimestamp"].(string)
	return ts != ""
}

// find returns the single value at path in data.
func find(j *jsonpath.JSONPath, data map[string]any) (any, error) {
	res, err := j.FindResults(data)
	if err != nil {
		return nil, err
	}
	if len(res) == 0 || len(res[0]) == 0 {
		return nil, fmt.Errorf("path absent")
	}
	v := res[0][0]
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() || !v.CanInterface() {
		return nil, fmt.Errorf("path absent")
	}
	return v.Interface(), nil
}

// integer reads an observedGeneration: a JSON integer, or a decimal string
// (some operators write it so).
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	case string:
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return i, true
		}
	}
	return 0, false
}

// intern returns the convention's own copy of a condition type or status,
// so that cached objects do not each keep the decoder's copy.
func (c *Convention) intern(s string) string {
	switch s {
	case "True":
		return "True"
	case "False":
		return "False"
	case "Unknown":
		return "Unknown"
	case ConditionStalled:
		return ConditionStalled
	case ConditionReconciling:
		return ConditionReconciling
	}
	for _, t := range c.Conditions {
		if t == s {
			return t
		}
	}
	return s
}

// maxInterned bounds the manager names interned per convention: a few
// managers write most objects; a writer inventing names gets them kept
// per object instead of growing the table.
const maxInterned = 256

func (c *Convention) internManagers(s string) string {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if v, ok := c.names[s]; ok {
		return v
	}
	if len(c.names) < maxInterned {
		if c.names == nil {
			c.names = map[string]string{}
		}
		c.names[s] = s
	}
	return s
}

// WriteTime is the API-side time of the last write; zero when unknown.
func (o *CustomObject) WriteTime() time.Time {
	if o.WriteUnix == 0 {
		return time.Time{}
	}
	return time.Unix(o.WriteUnix, 0)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Custom returns the tracker record of a custom resource of kind (its
// <Kind>.<group> label), judged by conv (docs/resources.md, "The
// convention"):
//
//   - observed: the newest of the status fields that hold an observed
//     generation and of the kept conditions' own observedGeneration. Flux
//     writes status.observedGeneration only on success while every
//     condition carries the new generation, so a failing change is
//     observed, and not ready.
//   - ready: every readiness condition True (for this generation, when it
//     says which), or every readiness expression holding; and, as kstatus
//     reads them, neither Reconciling=True (in progress) nor Stalled=True
//     (failed), whatever Ready says.
//   - the reason it is not ready, most specific first: stalled, a
//     readiness condition False, reconciling, Unknown, missing.
func Custom(o *CustomObject, kind tracker.Kind, conv *Convention) tracker.Workload {
	w := tracker.Workload{
		Kind: kind, UID: string(o.UID), Namespace: o.Namespace, Name: o.Name,
		Generation: o.Generation, Created: o.Created, SpecWritten: o.SpecWrite,
		Custom: &tracker.Custom{Terminating: o.Terminating},
	}
	if o.StatusUnix != 0 {
		w.StatusWritten = time.Unix(o.StatusUnix, 0).UTC()
	}
	f := w.Custom
	switch {
	case !o.HasStatus:
		// An empty status: nothing observed yet.
	case o.HasObserved || o.ConditionsObserved > 0:
		w.ObservedGeneration = max(o.ObservedGeneration, o.ConditionsObserved)
	default:
		f.ObservedUnknown = true
	}
	var isFalse, unknown, missing bool
	if len(o.Ready) > 0 {
		f.Ready = !slices.Contains(o.Ready, false)
		missing = o.ReadyAbsent
	} else {
		f.Ready = len(conv.Conditions) > 0
		for _, t := range conv.Conditions {
			c := o.condition(t)
			// True for an older generation says nothing of this one.
			stale := c != nil && c.ObservedGeneration > 0 && c.ObservedGeneration < o.Generation
			switch {
			case c == nil:
				missing = true
			case c.Status == "False":
				isFalse = true
			case c.Status != "True" || stale:
				unknown = true
			}
			if c == nil || c.Status != "True" || stale {
				f.Ready = false
			} else if c.LastTransition.After(f.ReadySince) {
				f.ReadySince = c.LastTransition
			}
		}
	}
	stalled, reconciling := o.isTrue(ConditionStalled), o.isTrue(ConditionReconciling)
	if stalled || reconciling {
		f.Ready = false
	}
	// Ready=False outranks Reconciling=True: Flux keeps Reconciling=True
	// (reason ProgressingWithRetry) while it retries a failed change
	// (kustomize-controller finalizeStatus, source-controller
	// ComputeReconcileResult), and the failure is the news.
	switch {
	case stalled:
		f.Reason = tracker.ReasonStalled
	case isFalse:
		f.Reason = tracker.ReasonConditionFalse
	case reconciling:
		f.Reason = tracker.ReasonReconciling
	case unknown:
		f.Reason = tracker.ReasonConditionUnknown
	case missing:
		f.Reason = tracker.ReasonConditionMissing
	}
	return w
}

// condition returns o's kept condition of type t, nil if absent.
func (o *CustomObject) condition(t string) *CustomCondition {
	for i := range o.Conditions {
		if o.Conditions[i].Type == t {
			return &o.Conditions[i]
		}
	}
	return nil
}

func (o *CustomObject) isTrue(t string) bool {
	c := o.condition(t)
	return c != nil && c.Status == "True"
}

// NotReadyCondition returns the condition that explains why o is not
// ready, in the order of the stall reasons (Stalled=True, a readiness
// condition False, Reconciling=True, a readiness condition not True), for
// logs and timelines, never labels.
func NotReadyCondition(o *CustomObject) (CustomCondition, bool) {
	for _, pick := range []func(c *CustomCondition) bool{
		func(c *CustomCondition) bool { return c.Type == ConditionStalled && c.Status == "True" },
		func(c *CustomCondition) bool { return !kstatusCondition(c.Type) && c.Status == "False" },
		func(c *CustomCondition) bool { return c.Type == ConditionReconciling && c.Status == "True" },
		func(c *CustomCondition) bool { return !kstatusCondition(c.Type) && c.Status != "True" },
	} {
		for i := range o.Conditions {
			if pick(&o.Conditions[i]) {
				return o.Conditions[i], true
			}
		}
	}
	return CustomCondition{}, false
}

func kstatusCondition(t string) bool { return t == ConditionStalled || t == ConditionReconciling }
