package records

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// fuzzConventions are the conventions FuzzConventionTransform judges by:
// every preset's (conditions, observed fields), then one reading the
// observed generation at a configured path with a readiness expression.
func fuzzConventions(t *testing.T) []*Convention {
	var out []*Convention
	for _, p := range config.Presets {
		c, err := NewConvention(config.Resource{Conditions: p.Conditions, ObservedFields: p.ObservedFields})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	c, err := NewConvention(config.Resource{ObservedGeneration: "{.status.lastObservedGeneration}",
		ReadyExprs: []config.ReadyExpr{{Path: "{.status.phase}", Value: "Ready"}}})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, c)
}

// FuzzConventionTransform decodes any JSON document as the dynamic client
// decodes a custom resource (unstructured, integers as int64) and
// transforms it with the convention the first byte picks
// (fuzzConventions). Seeds (testdata/fuzz/FuzzConventionTransform): the
// recorded operators' objects of testdata/operators, as JSON. Whatever the
// status holds (conditions that are not a list, a type that is a number,
// generations as strings or floats), checkCustomObject's properties hold.
func FuzzConventionTransform(f *testing.F) {
	f.Fuzz(func(t *testing.T, pick uint8, doc []byte) {
		convs := fuzzConventions(t)
		conv := convs[int(pick)%len(convs)]
		u, ok := decodeUnstructured(doc)
		if !ok {
			return
		}
		out, err := conv.Transform(u)
		if err != nil {
			t.Fatalf("Transform: %v", err)
		}
		checkCustomObject(t, conv, u, out)
	})
}

// FuzzJSONPathOverride configures any path as a resource's
// observedGeneration and as a readiness expression (`{path}=value`, the
// resources[].observedGeneration and ready keys of docs/resources.md) and
// evaluates it on any JSON document. Seeds
// (testdata/fuzz/FuzzJSONPathOverride): the paths of docs/resources.md
// and the tests, on recorded operators' objects. It checks:
//
//   - a path NewConvention refuses is one config.ParseJSONPath refuses,
//     and the other way round (the config is validated with the same
//     parser the transform evaluates with);
//   - the observed generation is read or DecodeError says why, naming the
//     path;
//   - the readiness expression holds exactly when the value found prints
//     as value;
//   - and checkCustomObject's properties.
func FuzzJSONPathOverride(f *testing.F) {
	f.Fuzz(func(t *testing.T, path, value string, doc []byte) {
		if len(path) > 4096 || !utf8.ValidString(path) || !utf8.ValidString(value) {
			return // the configuration file is YAML, which is UTF-8 (config.Parse)
		}
		_, perr := config.ParseJSONPath(path)
		conv, err := NewConvention(config.Resource{Conditions: []string{"Ready"}, ObservedGeneration: path,
			ReadyExprs: []config.ReadyExpr{{Path: path, Value: value}}})
		if (perr == nil) != (err == nil) {
			t.Fatalf("ParseJSONPath(%q) = %v but NewConvention = %v", path, perr, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", path)) {
				t.Errorf("error %q does not quote the path %q", err, path)
			}
			return
		}
		u, ok := decodeUnstructured(doc)
		if !ok {
			return
		}
		out, err := conv.Transform(u)
		if err != nil {
			t.Fatalf("Transform: %v", err)
		}
		o := checkCustomObject(t, conv, u, out)
		switch {
		case o.HasObserved && o.DecodeError != "":
			t.Errorf("observed generation %d read and a decode error %q", o.ObservedGeneration, o.DecodeError)
		case !o.HasObserved && !strings.HasPrefix(o.DecodeError, path) && !strings.HasPrefix(path, o.DecodeError):
			t.Errorf("no observed generation, and the decode error %q does not start with the path %q", o.DecodeError, path)
		}
		// The expression again, on a fresh parse: the convention's
		// JSONPath keeps state between evaluations (Convention.mu).
		j, _ := config.ParseJSONPath(path)
		v, ferr := find(j, u.Object)
		if want := ferr == nil && fmt.Sprint(v) == value; o.Ready[0] != want {
			t.Errorf("ready %v, want %v (value found %v, %v)", o.Ready[0], want, v, ferr)
		}
	})
}

// decodeUnstructured decodes doc as the dynamic client does: a JSON object,
// numbers as int64 when integral (k8s.io/apimachinery util/json).
func decodeUnstructured(doc []byte) (*unstructured.Unstructured, bool) {
	if len(doc) > 64<<10 {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, false
	}
	return &unstructured.Unstructured{Object: m}, true
}

// checkCustomObject checks what Transform made of u (out) and returns it:
//
//   - a *CustomObject, which Transform passes unchanged (the same pointer)
//     and whose deep copy is equal to it;
//   - the identity of u, read as the informer's key function reads it;
//   - every string from the cluster within its cap (informers' caps.go),
//     valid UTF-8, the condition types among those the convention reads,
//     one condition per type, ConditionsObserved their newest generation;
//   - one readiness result per expression;
//   - the tracker's record (Custom) is ready only without a reason.
func checkCustomObject(t *testing.T, conv *Convention, u *unstructured.Unstructured, out any) *CustomObject {
	t.Helper()
	o, ok := out.(*CustomObject)
	if !ok {
		t.Fatalf("Transform returned a %T, want a *CustomObject", out)
	}
	if again, _ := conv.Transform(o); again != any(o) {
		t.Errorf("a second Transform returned another object")
	}
	if c := o.DeepCopyObject(); !reflect.DeepEqual(c, o) {
		t.Errorf("DeepCopyObject differs:\n%+v\n%+v", c, o)
	}
	if o.Namespace != u.GetNamespace() || o.Name != u.GetName() || o.UID != u.GetUID() || o.ResourceVersion != u.GetResourceVersion() {
		t.Errorf("identity %s/%s %s %s, want %s/%s %s %s", o.Namespace, o.Name, o.UID, o.ResourceVersion,
			u.GetNamespace(), u.GetName(), u.GetUID(), u.GetResourceVersion())
	}
	capped := func(what, s string, limit int) {
		if len(s) > limit || !utf8.ValidString(s) {
			t.Errorf("%s: %d bytes (cap %d), valid UTF-8 %v: %.80q", what, len(s), limit, utf8.ValidString(s), s)
		}
	}
	capped("DecodeError", o.DecodeError, informers.MaxMessage)
	capped("WriteManagers", o.WriteManagers, informers.MaxKeptAnnotation)
	var seen []string
	var newest int64
	for _, c := range o.Conditions {
		if c.Type != ConditionStalled && c.Type != ConditionReconciling && !slices.Contains(conv.Conditions, c.Type) {
			t.Errorf("kept a condition of type %q, which the convention does not read", c.Type)
		}
		if slices.Contains(seen, c.Type) {
			t.Errorf("two conditions of type %q kept", c.Type)
		}
		seen = append(seen, c.Type)
		newest = max(newest, c.ObservedGeneration)
		capped("condition status", c.Status, informers.MaxReason)
		capped("condition reason", c.Reason, informers.MaxReason)
		capped("condition message", c.Message, informers.MaxMessage)
	}
	if o.ConditionsObserved != newest {
		t.Errorf("ConditionsObserved %d, want the newest of the kept conditions, %d", o.ConditionsObserved, newest)
	}
	if len(o.Ready) != len(conv.ready) {
		t.Errorf("%d readiness results for %d expressions", len(o.Ready), len(conv.ready))
	}
	w := Custom(o, tracker.Kind("Widget.example.com"), conv)
	if w.Custom.Ready && w.Custom.Reason != "" {
		t.Errorf("ready with a reason, %q", w.Custom.Reason)
	}
	return o
}
