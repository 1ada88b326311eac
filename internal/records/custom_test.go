package records

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

func convention(t *testing.T, r config.Resource) *Convention {
	t.Helper()
	if len(r.Conditions) == 0 && len(r.Ready) == 0 {
		r.Conditions = []string{"Ready"}
	}
	for _, s := range r.Ready {
		e, err := config.ParseJSONPath(s[:len(s)-len("=Ready")])
		if err != nil || e == nil {
			t.Fatal(err)
		}
		r.ReadyExprs = append(r.ReadyExprs, config.ReadyExpr{Path: s[:len(s)-len("=Ready")], Value: "Ready"})
	}
	c, err := NewConvention(r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func obj(gen int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "tls", "namespace": "ns", "uid": "u1", "generation": gen,
			"creationTimestamp": "2026-12-01T10:00:00Z",
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:00:05Z",
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
		"spec": map[string]any{"secretName": "tls", "dnsNames": []any{"a.example.com"}},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func cond(typ, status string, extra ...any) map[string]any {
	m := map[string]any{"type": typ, "status": status, "reason": "R", "message": "m", "lastTransitionTime": "2026-12-01T10:00:07Z"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func TestCustomRecords(t *testing.T) {
	const kind = tracker.Kind("Certificate.cert-manager.io")
	for _, tc := range []struct {
		name         string
		res          config.Resource
		u            *unstructured.Unstructured
		observed     int64
		unknown      bool
		ready        bool
		reason       string
		decodeErrors bool
	}{
		{name: "empty status is not observed", u: obj(1, nil), reason: tracker.ReasonConditionMissing},
		{name: "empty status map is not observed", u: obj(1, map[string]any{}), reason: tracker.ReasonConditionMissing},
		{name: "status.observedGeneration, Ready True", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "True")}}), observed: 2, ready: true},
		{name: "Ready False", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "False")}}), observed: 2, reason: tracker.ReasonConditionFalse},
		{name: "Ready Unknown", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "Unknown")}}), observed: 2, reason: tracker.ReasonConditionUnknown},
		{name: "Ready missing", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Issuing", "True")}}), observed: 2, reason: tracker.ReasonConditionMissing},
		{name: "Stalled wins over Reconciling and False", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Reconciling", "True"), cond("Ready", "False"), cond("Stalled", "True")}}), observed: 2, reason: tracker.ReasonStalled},
		{name: "Reconciling with Ready Unknown: in progress", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "Unknown"), cond("Reconciling", "True")}}), observed: 2, reason: tracker.ReasonReconciling},
		{name: "Ready False outranks Reconciling (Flux retrying a failure)", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "False"), cond("Reconciling", "True")}}), observed: 2, reason: tracker.ReasonConditionFalse},
		{name: "Reconciling=True is not ready, whatever Ready says", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "True"), cond("Reconciling", "True")}}), observed: 2, reason: tracker.ReasonReconciling},
		{name: "Stalled=True is not ready, whatever Ready says", u: obj(2, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{cond("Ready", "True"), cond("Stalled", "True")}}), observed: 2, reason: tracker.ReasonStalled},
		{name: "conditions found by type: Issuing first with an older generation", u: obj(3, map[string]any{
			"conditions": []any{cond("Issuing", "False", "observedGeneration", int64(2)), cond("Ready", "False", "observedGeneration", int64(3))}}),
			observed: 3, reason: tracker.ReasonConditionFalse},
		{name: "observed: the newest of status.observedGeneration and the conditions'", u: obj(5, map[string]any{"observedGeneration": int64(4),
			"conditions": []any{cond("Reconciling", "True", "observedGeneration", int64(5)), cond("Ready", "False", "observedGeneration", int64(5))}}),
			observed: 5, reason: tracker.ReasonConditionFalse},
		{name: "observedGeneration greater than generation", u: obj(2, map[string]any{"observedGeneration": int64(9),
			"conditions": []any{cond("Ready", "True", "observedGeneration", int64(9))}}), observed: 9, ready: true},
		{name: "a preset's extra field: lastAttemptedGeneration", res: config.Resource{ObservedFields: []string{"observedGeneration", "lastAttemptedGeneration"}},
			u:        obj(3, map[string]any{"observedGeneration": int64(2), "lastAttemptedGeneration": int64(3), "conditions": []any{cond("Ready", "Unknown")}}),
			observed: 3, reason: tracker.ReasonConditionUnknown},
		{name: "readiness expression path absent from the status", res: config.Resource{Ready: []string{"{.status.phase}=Ready"}}, u: obj(1, map[string]any{
			"state": "Ready"}), unknown: true, reason: tracker.ReasonConditionMissing},
		{name: "cert-manager: condition-level observedGeneration is the observed one", u: obj(3, map[string]any{
			"conditions": []any{cond("Ready", "True", "observedGeneration", int64(3))}}), observed: 3, ready: true},
		{name: "condition True for an older generation is not ready", u: obj(3, map[string]any{"observedGeneration": int64(3),
			"conditions": []any{cond("Ready", "True", "observedGeneration", int64(2))}}), observed: 3, reason: tracker.ReasonConditionUnknown},
		{name: "Crossplane Synced and Ready", res: config.Resource{Conditions: []string{"Synced", "Ready"}}, u: obj(1, map[string]any{
			"conditions": []any{cond("Synced", "True"), cond("Ready", "False")}}), unknown: true, reason: tracker.ReasonConditionFalse},
		{name: "no observedGeneration anywhere: observed skipped", u: obj(1, map[string]any{
			"conditions": []any{cond("Ready", "True")}}), unknown: true, ready: true},
		{name: "readiness expression", res: config.Resource{Ready: []string{"{.status.phase}=Ready"}}, u: obj(1, map[string]any{
			"observedGeneration": int64(1), "phase": "Ready"}), observed: 1, ready: true},
		{name: "readiness expression false", res: config.Resource{Ready: []string{"{.status.phase}=Ready"}}, u: obj(1, map[string]any{
			"observedGeneration": int64(1), "phase": "Pending"}), observed: 1},
		{name: "override path, decimal string", res: config.Resource{ObservedGeneration: "{.status.seen}"}, u: obj(4, map[string]any{
			"seen": "4", "conditions": []any{cond("Ready", "True")}}), observed: 4, ready: true},
		{name: "override path absent: decode error", res: config.Resource{ObservedGeneration: "{.status.seen}"}, u: obj(4, map[string]any{
			"observedGeneration": int64(4), "conditions": []any{cond("Ready", "True")}}), unknown: true, ready: true, decodeErrors: true},
		{name: "override path not an integer: decode error", res: config.Resource{ObservedGeneration: "{.status.seen}"}, u: obj(4, map[string]any{
			"seen": "four"}), unknown: true, reason: tracker.ReasonConditionMissing, decodeErrors: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := convention(t, tc.res)
			o := conv.Compact(tc.u)
			if (o.DecodeError != "") != tc.decodeErrors {
				t.Errorf("decode error %q, want one: %v", o.DecodeError, tc.decodeErrors)
			}
			w := Custom(o, kind, conv)
			if w.ObservedGeneration != tc.observed || w.Custom.ObservedUnknown != tc.unknown || w.Custom.Ready != tc.ready || w.Custom.Reason != tc.reason {
				t.Errorf("record: observed %d unknown %v ready %v reason %q; want %d %v %v %q",
					w.ObservedGeneration, w.Custom.ObservedUnknown, w.Custom.Ready, w.Custom.Reason, tc.observed, tc.unknown, tc.ready, tc.reason)
			}
			if want := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC); !w.SpecWritten.Equal(want) {
				t.Errorf("spec written %v, want %v (newest managedFields time touching f:spec)", w.SpecWritten, want)
			}
			if m := o.GetObjectMeta(); m.GetName() != "tls" || m.GetNamespace() != "ns" || m.GetUID() != "u1" || m.GetGeneration() != tc.u.GetGeneration() {
				t.Errorf("object meta %+v", m)
			}
			// Idempotent: a second pass of the transform changes nothing.
			again, _ := conv.Transform(o)
			if again != any(o) {
				t.Error("transform of a compacted object is not the identity")
			}
		})
	}
}

// A long condition message is cut on a rune boundary: the timeline serves
// it as JSON, where a cut rune would show as U+FFFD.
func TestConditionMessageCutOnRuneBoundary(t *testing.T) {
	c := convention(t, config.Resource{})
	msg := strings.Repeat("a", informers.MaxMessage-1) + "é and more"
	o := c.Compact(obj(1, map[string]any{"conditions": []any{cond("Ready", "False", "message", msg)}}))
	if len(o.Conditions) != 1 {
		t.Fatalf("conditions %+v", o.Conditions)
	}
	got := o.Conditions[0].Message
	if !utf8.ValidString(got) || got != strings.Repeat("a", informers.MaxMessage-1) {
		t.Errorf("message cut to %q (%d bytes), want the %d a's before the 2-byte é", got[len(got)-3:], len(got), informers.MaxMessage-1)
	}
}

// A condition's reason is cut like its message: bounded, on a rune
// boundary, and copied, so that the decoded string is not kept whole.
func TestConditionReasonCut(t *testing.T) {
	c := convention(t, config.Resource{})
	reason := strings.Repeat("R", informers.MaxReason-1) + "é" + strings.Repeat("x", 10_000)
	o := c.Compact(obj(1, map[string]any{"conditions": []any{cond("Ready", "False", "reason", reason)}}))
	got := o.Conditions[0].Reason
	if !utf8.ValidString(got) || got != strings.Repeat("R", informers.MaxReason-1) {
		t.Errorf("reason cut to %d bytes, want the %d R's before the 2-byte é", len(got), informers.MaxReason-1)
	}
	if unsafe.StringData(got) == unsafe.StringData(reason) {
		t.Error("the cut reason shares the decoded string's memory")
	}
}

// A list of 200 conditions, the readiness one last and repeated, keeps one
// condition per type read: found by type, the first of a type standing.
func TestConditionsLongListKeepsOnePerType(t *testing.T) {
	c := convention(t, config.Resource{})
	var conds []any
	for i := range 197 {
		conds = append(conds, cond(fmt.Sprintf("Other%d", i), "False", "observedGeneration", int64(7)))
	}
	conds = append(conds, cond("Ready", "True", "observedGeneration", int64(3)), cond("Ready", "False", "observedGeneration", int64(3)),
		cond("Reconciling", "True", "observedGeneration", int64(2)))
	o := c.Compact(obj(3, map[string]any{"conditions": conds}))
	if len(o.Conditions) != 2 {
		t.Fatalf("kept %d conditions, want Ready and Reconciling: %+v", len(o.Conditions), o.Conditions)
	}
	w := Custom(o, "Certificate.cert-manager.io", c)
	// Other* carry generation 7 but are not read: the observed generation
	// is the readiness and kstatus conditions' newest, 3.
	if w.ObservedGeneration != 3 || w.Custom.Ready || w.Custom.Reason != tracker.ReasonReconciling {
		t.Errorf("observed %d ready %v reason %q, want 3 false reconciling", w.ObservedGeneration, w.Custom.Ready, w.Custom.Reason)
	}
}

// A deletionTimestamp is kept: kstatus Terminating.
func TestCustomTerminating(t *testing.T) {
	c := convention(t, config.Resource{})
	u := obj(2, map[string]any{"conditions": []any{cond("Ready", "True")}})
	u.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 12, 1, 10, 0, 9, 0, time.UTC)})
	if w := Custom(c.Compact(u), "Certificate.cert-manager.io", c); !w.Custom.Terminating {
		t.Error("a deletionTimestamp is not Terminating")
	}
}
