package slo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each error names the file and the line (file:line: message), the way
// compilers do, so an editor jumps to it.
func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // substrings of the error, each with its file:line
	}{
		{
			name: "threshold between buckets",
			doc: `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 4
`,
			want: []string{`f.yaml:9: slo "rollouts": threshold 4.0 is not a bucket boundary of kube_convergence_rollout_duration_seconds, so no le series holds it (boundaries: 0.1, 0.25, 0.5, 1, 2.5, 5,`},
		},
		{
			// 14.4 x 0.1 = 1.44: an error ratio is at most 1.
			name: "a default window that can never fire",
			doc: `service: shop
slos:
  - name: loose
    objective: 0.9
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
`,
			want: []string{`f.yaml:3: slo "loose": page: window 1h/5m at 14.4x can never fire: it needs an error ratio above 14.4 x 0.1 = 1.44`},
		},
		{
			name: "an explicit window that can never fire",
			doc: `service: shop
slos:
  - name: loose
    objective: 0.5
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
    alerting:
      page: {enabled: false}
      ticket:
        windows:
          - {long: 1d, short: 2h, factor: 1.5}
          - {long: 3d, short: 6h, factor: 2}
`,
			want: []string{`f.yaml:12: slo "loose": ticket: window 3d/6h at 2x can never fire: it needs an error ratio above 2 x 0.5 = 1`},
		},
		{
			name: "a period with no alert left",
			doc: `service: shop
slos:
  - name: daily
    objective: 0.99
    period: 1d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
    alerting: {page: {enabled: false}}
`,
			want: []string{`f.yaml:7: slo "daily": ticket: no window pair is left for a 1d period`},
		},
		{
			name: "noEvents shorter than its window",
			doc: `service: shop
slos:
  - name: a
    objective: 0.99
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
    alerting: {noEvents: {for: 30m}}
`,
			want: []string{`f.yaml:7: slo "a": alerting: noEvents: for 30m is shorter than 1h`},
		},
		{
			name: "threshold of another histogram",
			doc: `service: shop
slos:
  - name: pods
    objective: 0.99
    period: 1d
    sli:
      latency: {metric: kube_convergence_pod_startup_seconds, threshold: 2.5, match: {stage: ready}}
    alerting: {ticket: {enabled: false}}
`,
			want: []string{`f.yaml:7: slo "pods": threshold 2.5 is not a bucket boundary of kube_convergence_pod_startup_seconds`},
		},
		{
			name: "objective outside (0, 1)",
			doc: `service: shop
slos:
  - name: a
    objective: 1
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
  - name: b
    objective: 99.9
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
  - name: c
    objective: 0
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
`,
			want: []string{
				`f.yaml:4: slo "a": objective 1 is outside (0, 1)`,
				`f.yaml:8: slo "b": objective 99.9 is outside (0, 1)`,
				`f.yaml:12: slo "c": objective 0 is outside (0, 1)`,
			},
		},
		{
			name: "period shorter than the longest alert window used",
			doc: `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 1d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
    alerting:
      ticket:
        windows:
          - {long: 3d, short: 6h, factor: 0.2}
          - {long: 1d, short: 2h, factor: 3}
`,
			want: []string{
				`f.yaml:11: slo "rollouts": ticket: period 1d is shorter than the alert window 3d`,
				`f.yaml:12: slo "rollouts": ticket: window 1d/2h at 3x would spend 300% of the 1d budget before it fires (> 100%)`,
			},
		},
		{
			name: "period shorter than the fastest default alert",
			doc: `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 30m
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
    alerting: {ticket: {enabled: false}}
`,
			want: []string{`f.yaml:8: slo "rollouts": page: period 30m is shorter than 1h, the long window of the fastest alert (1h/5m at 14.4x)`},
		},
		{
			name: "unknown indicator",
			doc: `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 30d
    sli:
      latncy: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
`,
			want: []string{`f.yaml:7: unknown indicator "latncy" (want latency, goodMinutes or ratio)`},
		},
		{
			name: "two indicators",
			doc: `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
      ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}
`,
			want: []string{`f.yaml:7: slo "rollouts": sli has latency and ratio: one indicator per SLO`},
		},
		{
			name: "PromQL that does not parse",
			doc: `service: shop
slos:
  - name: watch
    objective: 0.99
    period: 7d
    sli:
      goodMinutes:
        badWhen: sum(increase(x[1m]) > 0
        countWhen: sum(x)
  - name: ratio
    objective: 0.99
    period: 7d
    sli:
      ratio:
        errorQuery: sum(rate(e[5m]))
        totalQuery: sum(rate(t[{{.window}}])) by
`,
			want: []string{
				`f.yaml:8: slo "watch": goodMinutes: badWhen: PromQL does not parse:`,
				`f.yaml:15: slo "ratio": ratio: errorQuery has no {{.window}}`,
				`f.yaml:16: slo "ratio": ratio: totalQuery: PromQL does not parse:`,
			},
		},
		{
			name: "PromQL of the wrong type",
			doc: `service: shop
slos:
  - name: watch
    objective: 0.99
    period: 7d
    sli:
      goodMinutes: {badWhen: 'x[5m]', countWhen: '1'}
`,
			want: []string{
				`f.yaml:7: slo "watch": goodMinutes: badWhen: PromQL "x[5m]" is a range vector, want an instant vector`,
				`f.yaml:7: slo "watch": goodMinutes: countWhen: PromQL "1" is a scalar, want an instant vector`,
			},
		},
		{
			name: "unknown keys, metric, labels and values",
			doc: `service: shop
slos:
  - name: rollouts
    objectiv: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_seconds
        threshold: 300
  - name: stages
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {stage: Available, pod: web, le: "1.0"}
        scope: {kind: Deployment}
`,
			want: []string{
				`f.yaml:4: unknown key "objectiv"`,
			},
		},
		{
			name: "labels, values and scope",
			doc: `service: shop
slos:
  - name: stages
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match:
          stage: [available, Ready]
          pod: web
          le: "1.0"
        scope: {kind: Deployment}
  - name: unknown-metric
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_seconds, threshold: 300}
`,
			want: []string{
				`f.yaml:11: slo "stages": match: stage "Ready" is not a value the exporter exposes (values: observed, updated, available, ready, endpoints_ready)`,
				`f.yaml:12: slo "stages": match: "pod" is not a label of kube_convergence_rollout_duration_seconds (its labels: kind, namespace, stage, change; target labels such as job go under scope)`,
				`f.yaml:13: slo "stages": match: le is set from threshold`,
				`f.yaml:14: slo "stages": scope: kind is a label of kube_convergence_rollout_duration_seconds itself: put it under match`,
				`f.yaml:19: slo "unknown-metric": unknown latency metric "kube_convergence_rollout_seconds" (known: kube_convergence_rollout_duration_seconds, kube_convergence_pod_startup_seconds, kube_convergence_endpoint_propagation_seconds)`,
			},
		},
		{
			name: "names and labels",
			doc: `service: Shop
slos:
  - name: Rollouts_1
    objective: 0.99
    period: 30d
    labels: {sloth_id: x, "bad-name": y}
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
    alerting:
      name: "9lives"
      runbookURL: /relative
      page: {labels: {slo_tier: x}, minEvents: -1}
  - name: dup
    objective: 0.99
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
  - name: dup
    objective: 0.99
    period: 30d
    sli: {ratio: {errorQuery: 'sum(rate(e[{{.window}}]))', totalQuery: 'sum(rate(t[{{.window}}]))'}}
`,
			want: []string{
				`f.yaml:1: service "Shop": want lower-case letters, digits and dashes`,
				`f.yaml:3: name "Rollouts_1": want at most 63 lower-case letters, digits and dashes`,
				`f.yaml:6: labels: "bad-name" is not a valid label name`,
				`f.yaml:6: labels: "sloth_id" is set by the generator`,
				`f.yaml:9: slo "Rollouts_1": alerting: name "9lives" is not a valid alert name`,
				`f.yaml:10: slo "Rollouts_1": alerting: runbookURL "/relative": want an absolute http(s) URL`,
				`f.yaml:11: slo "Rollouts_1": page: labels: "slo_tier" is set by the generator`,
				`f.yaml:11: slo "Rollouts_1": page: minEvents -1 must not be negative`,
				`f.yaml:16: slo "dup" is defined twice (first at line 12)`,
			},
		},
		{
			name: "missing fields and bad scalars",
			doc: `service: shop
slos:
  - name: bare
  - name: scalars
    objective: high
    period: monthly
    sli: {latency: {metric: kube_convergence_rollout_duration_seconds, threshold: soon}}
`,
			want: []string{
				`f.yaml:5: want a number such as 0.99, got "high"`,
				`f.yaml:6: want a positive duration such as 30d, 7d or 12h, got "monthly"`,
				`f.yaml:7: want a number, got "soon"`,
			},
		},
		{
			name: "missing fields",
			doc: `service: shop
slos:
  - name: bare
`,
			want: []string{
				`f.yaml:3: slo "bare": objective is required`,
				`f.yaml:3: slo "bare": period is required`,
				`f.yaml:3: slo "bare": sli is required`,
			},
		},
		{
			name: "not YAML",
			doc:  "service: shop\nslos: [\n",
			want: []string{`f.yaml:2: did not find expected node content`},
		},
		{
			name: "two documents",
			doc:  "service: shop\n---\nservice: other\n",
			want: []string{`f.yaml:2: more than one YAML document`},
		},
		{
			name: "empty",
			doc:  "# nothing\n",
			want: []string{`f.yaml: empty SLO file`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q; got:\n%v", w, err)
				}
			}
		})
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := Parse("f.yaml", []byte("service: shop\nslos: []\n"))
	var e *Error
	if !errors.As(err, &e) || e.File != "f.yaml" || e.Line != 2 {
		t.Fatalf("want an *Error at f.yaml:2, got %#v", err)
	}
}

func TestDefaults(t *testing.T) {
	f := mustParse(t, `service: kube-convergence
slos:
  - name: rollout-available
    objective: 0.999
    period: 28d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: "300.0"
        match: {kind: [Deployment, StatefulSet]}
`)
	s := f.SLOs[0]
	if s.ID() != "kube-convergence-rollout-available" || s.Period != 28*Day || formatRat(s.Budget()) != "0.001" {
		t.Errorf("id %s period %v budget %s", s.ID(), s.Period, formatRat(s.Budget()))
	}
	a := s.Alerting
	if a.Name != "KubeConvergenceRolloutAvailableBudgetBurn" {
		t.Errorf("default alert name %q", a.Name)
	}
	if !a.Page.Enabled || a.Page.For != 2*time.Minute || a.Page.MinEvents != 10 || a.Page.Labels["severity"] != "critical" || len(a.Page.Windows) != 2 {
		t.Errorf("page defaults %+v", a.Page)
	}
	if !a.Ticket.Enabled || a.Ticket.For != 15*time.Minute || a.Ticket.MinEvents != 0 || a.Ticket.Labels["severity"] != "warning" || len(a.Ticket.Windows) != 2 {
		t.Errorf("ticket defaults %+v", a.Ticket)
	}
	if got := s.SLI.Latency.Match["kind"]; len(got) != 2 {
		t.Errorf("match kind %v", got)
	}
}

func TestLoadNamesTheFileAndReadsStdin(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(p, []byte("service: shop\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), p+`:2: unknown key "bogus"`) {
		t.Errorf("Load error = %v", err)
	}
	if _, err := Load("-", strings.NewReader(fmt.Sprintf(latencySLO, "7d"))); err != nil {
		t.Errorf("Load(-): %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestLeadingEmptyDocument(t *testing.T) {
	f := mustParse(t, "---\n# comment only\n---\n"+fmt.Sprintf(latencySLO, "30d"))
	if len(f.SLOs) != 1 || f.SLOs[0].Line != 6 {
		t.Errorf("SLOs %+v", f.SLOs)
	}
}
