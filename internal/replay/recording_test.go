package replay

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

const (
	podJSON  = `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ns","name":"p","uid":"u1","resourceVersion":"1"}}`
	listEnd  = `{"resource":"pods","type":"list-end","at":"2026-01-02T03:04:05Z"}`
	podAdded = `{"resource":"pods","type":"added","at":"2026-01-02T03:04:06Z","live":true,"object":` + podJSON + `}`
)

// TestReadRejectsMalformedRecordings: a malformed recording fails whole,
// naming the line.
func TestReadRejectsMalformedRecordings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		line  int
		want  string
	}{{
		name:  "bad JSON",
		lines: []string{listEnd, `{"resource":"pods","type":"added",`},
		line:  2, want: "not a notification",
	}, {
		name:  "an unknown field",
		lines: []string{`{"resource":"pods","type":"list-end","at":"2026-01-02T03:04:05Z","colour":"red"}`},
		line:  1, want: `unknown field "colour"`,
	}, {
		name:  "an unknown resource",
		lines: []string{listEnd, `{"resource":"widgets.example.com","type":"list-end","at":"2026-01-02T03:04:05Z"}`},
		line:  2, want: `unknown resource "widgets.example.com"`,
	}, {
		name:  "an unknown type",
		lines: []string{listEnd, `{"resource":"pods","type":"bookmark","at":"2026-01-02T03:04:06Z"}`},
		line:  2, want: `unknown type "bookmark"`,
	}, {
		name:  "an object that does not decode as its kind",
		lines: []string{listEnd, `{"resource":"pods","type":"added","at":"2026-01-02T03:04:06Z","live":true,"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":"none"}}}`},
		line:  2, want: "object:",
	}, {
		name:  "an object without kind",
		lines: []string{`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05Z","object":{"metadata":{"name":"p"}}}`, listEnd},
		line:  1, want: "no apiVersion or kind",
	}, {
		name:  "an object without name",
		lines: []string{`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05Z","object":{"apiVersion":"v1","kind":"Pod","metadata":{}}}`, listEnd},
		line:  1, want: "no metadata.name",
	}, {
		name:  "time going backwards within a resource",
		lines: []string{listEnd, podAdded, `{"resource":"pods","type":"deleted","at":"2026-01-02T03:04:05.5Z","live":true,"object":` + podJSON + `}`},
		line:  3, want: "time goes backwards",
	}, {
		name:  "an end before the last line",
		lines: []string{listEnd, podAdded, `{"type":"end","at":"2026-01-02T03:04:05Z"}`},
		line:  3, want: "time goes backwards",
	}, {
		name:  "a line after the end",
		lines: []string{listEnd, `{"type":"end","at":"2026-01-02T03:04:05Z"}`, podAdded},
		line:  3, want: "after the end line 2",
	}, {
		name:  "an event without live",
		lines: []string{listEnd, `{"resource":"pods","type":"added","at":"2026-01-02T03:04:06Z","object":` + podJSON + `}`},
		line:  2, want: `needs "live"`,
	}, {
		name:  "a live list item",
		lines: []string{`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05Z","live":true,"object":` + podJSON + `}`, listEnd},
		line:  1, want: `takes no "live"`,
	}, {
		name:  "an event inside a list cycle",
		lines: []string{`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05Z","object":` + podJSON + `}`, podAdded, listEnd},
		line:  2, want: "inside its list cycle (opened at line 1",
	}, {
		name:  "a list cycle that never ends",
		lines: []string{listEnd, `{"resource":"pods","type":"list","at":"2026-01-02T03:04:07Z","object":` + podJSON + `}`},
		line:  2, want: "never ends",
	}, {
		name:  "a tombstone without key",
		lines: []string{listEnd, `{"resource":"pods","type":"tombstone","at":"2026-01-02T03:04:06Z"}`},
		line:  2, want: `needs "key"`,
	}, {
		name:  "no receive time",
		lines: []string{`{"resource":"pods","type":"list-end"}`},
		line:  1, want: "no receive time",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(strings.Join(tc.lines, "\n")+"\n"), "bad.jsonl", NewResources())
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Read: %v, want a *LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bad.jsonl:") {
				t.Errorf("Read: %q (line %d), want line %d and %q", err, le.Line, tc.line, tc.want)
			}
		})
	}
}

// TestReadDecodes: built-in kinds decode to their types without apiVersion
// and kind (as the typed clientset hands them), others to unstructured;
// list items of a cycle may come in any time order; notes and blank lines
// are kept or skipped.
func TestReadDecodes(t *testing.T) {
	widgets := informers.Resource{Group: "example.com", Version: "v1", Resource: "widgets"}
	in := strings.Join([]string{
		`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05.2Z","object":` + podJSON + `}`,
		`{"resource":"pods","type":"list","at":"2026-01-02T03:04:05.1Z","object":{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ns","name":"q"}}}`,
		`{"resource":"pods","type":"list-end","at":"2026-01-02T03:04:05.3Z"}`,
		``,
		`{"type":"note","at":"2026-01-02T03:04:05Z","note":"cut"}`,
		`{"resource":"widgets.example.com","type":"added","at":"2026-01-02T03:04:06Z","live":false,"object":{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"ns","name":"w"}}}`,
		`{"resource":"pods","type":"tombstone","at":"2026-01-02T03:04:07Z","key":"ns/gone"}`,
		`{"type":"end","at":"2026-01-02T03:04:08Z"}`,
	}, "\n")
	rec, err := Read(strings.NewReader(in), "ok.jsonl", NewResources(widgets))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Lines) != 7 || rec.Lines[4].N != 6 {
		t.Fatalf("%d lines (want 7), fifth at line %d (want 6)", len(rec.Lines), rec.Lines[4].N)
	}
	p, ok := rec.Lines[0].Object.(*corev1.Pod)
	if !ok || p.Name != "p" || !p.GetObjectKind().GroupVersionKind().Empty() {
		t.Errorf("first object %#v, want a *corev1.Pod without apiVersion and kind", rec.Lines[0].Object)
	}
	if u, ok := rec.Lines[4].Object.(*unstructured.Unstructured); !ok || u.GetKind() != "Widget" || rec.Lines[4].Live {
		t.Errorf("widget line %#v, want an unstructured Widget, not live", rec.Lines[4])
	}
	if rec.Lines[5].Key != "ns/gone" || rec.Lines[5].Object != nil {
		t.Errorf("tombstone line %#v", rec.Lines[5])
	}
	if got := rec.End().Format("15:04:05"); got != "03:04:08" {
		t.Errorf("end %s", got)
	}
}

// TestResourcesKnowEveryCollectorsResource: a recording may name every
// resource a collector reads, with every collector on and a custom
// resource configured.
func TestResourcesKnowEveryCollectorsResource(t *testing.T) {
	cfg := config.Default()
	cfg.Resources = []config.Resource{{Group: "example.com", Resource: "widgets", Version: "v1"}}
	rs := New(Options{Config: cfg}).Resources()
	for _, r := range all.ResourcesOf(cfg) {
		if got, ok := rs[r.String()]; !ok || got.Group != r.Group || got.Resource != r.Resource {
			t.Errorf("%s: not known to recordings (got %v)", r, got)
		}
	}
}
