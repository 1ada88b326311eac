package records

import (
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

// maxMessage bounds a kept condition message (bytes): messages go to logs
// only, and a controller's message can be kilobytes (a whole error chain).
const maxMessage = 256

// Convention is how a configured custom resource is judged: its readiness
// conditions, or readiness expressions, and where its observed generation
// is. It is safe for concurrent use.
type Convention struct {
	Conditions   []string
	mu           sync.Mutex // a JSONPath keeps state while it evaluates
	observed     *jsonpath.JSONPath
	observedText string
	ready        []readyPath
}

type readyPath struct {
	path  *jsonpath.JSONPath
	value string
}

// NewConvention compiles a configured resource's convention.
func NewConvention(r config.Resource) (*Convention, error) {
	c := &Convention{Conditions: r.Conditions}
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
// JSON, which is then dropped.
type CustomObject struct {
	// TypeMeta stays empty: the informer knows the resource.
	metav1.TypeMeta
	// ObjectMeta keeps identity, generation and times; its annotations and
	// managedFields are dropped (Received, Listed and SpecWrite hold what
	// was read from them).
	metav1.ObjectMeta

	// Received is when the exporter received the object (Unix ns), Listed
	// whether a list cycle delivered it (see informers.Stamp).
	Received int64
	Listed   bool
	// SpecWrite is the newest managedFields time touching spec (API side,
	// one-second precision); zero when unknown.
	SpecWrite time.Time

	HasStatus bool
	// ObservedGeneration is read from status.observedGeneration (or the
	// configured path) when HasObserved.
	ObservedGeneration int64
	HasObserved        bool
	// FirstConditionObserved is the first condition's own observedGeneration
	// (0: none): the fallback where status.observedGeneration is absent.
	FirstConditionObserved int64
	// DecodeError says why the configured observedGeneration path gave no
	// integer for this object; "" when it did or none is configured.
	DecodeError string
	// Conditions are the readiness conditions and the kstatus ones, as found.
	Conditions []CustomCondition
	// Ready holds each readiness expression's result.
	Ready []bool
}

// CustomCondition is one kept condition.
type CustomCondition struct {
	Type, Status, Reason, Message string
	ObservedGeneration            int64
	LastTransition                time.Time
}

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
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Conditions = append([]CustomCondition(nil), o.Conditions...)
	c.Ready = append([]bool(nil), o.Ready...)
	return &c
}

// Transform returns the informer transform of resources judged by conv:
// unstructured objects become CustomObjects; a CustomObject passes
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
		ObjectMeta: metav1.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
			Generation: u.GetGeneration(), CreationTimestamp: u.GetCreationTimestamp(), DeletionTimestamp: u.GetDeletionTimestamp(),
			Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields(),
		},
	}
	informers.CompactMeta(&o.ObjectMeta)
	o.SpecWrite = SpecWritten(&o.ObjectMeta)
	at, listed := informers.Received(&o.ObjectMeta)
	o.Received, o.Listed = at.UnixNano(), listed
	if at.IsZero() {
		o.Received = 0
	}
	o.Annotations = nil
	status, _ := u.Object["status"].(map[string]any)
	o.HasStatus = len(status) > 0
	if v, ok := status["observedGeneration"]; ok {
		if o.ObservedGeneration, o.HasObserved = integer(v); !o.HasObserved {
			o.DecodeError = fmt.Sprintf("status.observedGeneration is not an integer: %v", v)
		}
	}
	conds, _ := status["conditions"].([]any)
	for i, raw := range conds {
		m, _ := raw.(map[string]any)
		if m == nil {
			continue
		}
		og, _ := integer(m["observedGeneration"])
		if i == 0 {
			o.FirstConditionObserved = og
		}
		typ, _ := m["type"].(string)
		if typ != ConditionStalled && typ != ConditionReconciling && !contains(c.Conditions, typ) {
			continue
		}
		cc := CustomCondition{Type: typ, ObservedGeneration: og}
		cc.Status, _ = m["status"].(string)
		cc.Reason, _ = m["reason"].(string)
		cc.Message, _ = m["message"].(string)
		if len(cc.Message) > maxMessage {
			cc.Message = cc.Message[:maxMessage]
		}
		if s, ok := m["lastTransitionTime"].(string); ok {
			cc.LastTransition, _ = time.Parse(time.RFC3339, s)
		}
		o.Conditions = append(o.Conditions, cc)
	}
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
	}
	return o
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Custom returns the tracker record of a custom resource of kind (its
// <Kind>.<group> label), judged by conv.
func Custom(o *CustomObject, kind tracker.Kind, conv *Convention) tracker.Workload {
	w := tracker.Workload{
		Kind: kind, UID: string(o.UID), Namespace: o.Namespace, Name: o.Name,
		Generation: o.Generation, Created: o.CreationTimestamp.Time, SpecWritten: o.SpecWrite,
		Custom: &tracker.Custom{},
	}
	f := w.Custom
	switch {
	case !o.HasStatus:
		// An empty status: nothing observed yet.
	case o.HasObserved:
		w.ObservedGeneration = o.ObservedGeneration
	case o.DecodeError == "" && o.FirstConditionObserved > 0:
		w.ObservedGeneration = o.FirstConditionObserved
	default:
		f.ObservedUnknown = true
	}
	byType := map[string]*CustomCondition{}
	for i := range o.Conditions {
		byType[o.Conditions[i].Type] = &o.Conditions[i]
	}
	var false_, unknown, missing bool
	if len(o.Ready) > 0 {
		f.Ready = true
		for _, ok := range o.Ready {
			f.Ready = f.Ready && ok
		}
	} else {
		f.Ready = len(conv.Conditions) > 0
		for _, t := range conv.Conditions {
			c := byType[t]
			switch {
			case c == nil:
				missing = true
			case c.Status == "False":
				false_ = true
			case c.Status != "True" || (c.ObservedGeneration > 0 && c.ObservedGeneration < o.Generation):
				// True for an older generation says nothing of this one.
				unknown = true
			}
			if c == nil || c.Status != "True" || (c.ObservedGeneration > 0 && c.ObservedGeneration < o.Generation) {
				f.Ready = false
			} else if c.LastTransition.After(f.ReadySince) {
				f.ReadySince = c.LastTransition
			}
		}
	}
	isTrue := func(t string) bool { c := byType[t]; return c != nil && c.Status == "True" }
	switch {
	case isTrue(ConditionStalled):
		f.Reason = tracker.ReasonStalled
	case isTrue(ConditionReconciling):
		f.Reason = tracker.ReasonReconciling
	case false_:
		f.Reason = tracker.ReasonConditionFalse
	case unknown:
		f.Reason = tracker.ReasonConditionUnknown
	case missing:
		f.Reason = tracker.ReasonConditionMissing
	}
	return w
}

// NotReadyCondition returns the first condition that explains why o is not
// ready (a kstatus Stalled or Reconciling that is True, a readiness
// condition that is not), for logs and timelines, never labels.
func NotReadyCondition(o *CustomObject) (CustomCondition, bool) {
	for _, c := range o.Conditions {
		kstatus := c.Type == ConditionStalled || c.Type == ConditionReconciling
		if kstatus == (c.Status == "True") {
			return c, true
		}
	}
	return CustomCondition{}, false
}
