package slo

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// latencySLO is a minimal SLO file; %s is the period.
const latencySLO = `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: %s
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {kind: Deployment, stage: available}
`

func mustParse(t *testing.T, doc string) *File {
	t.Helper()
	f, err := Parse("test.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func records(rf *RuleFile) map[string]Rule {
	m := map[string]Rule{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				m[r.Record] = r
			}
		}
	}
	return m
}

func TestGeneratedRecordsPerPeriod(t *testing.T) {
	for _, tc := range []struct {
		period string
		days   string
		alias  bool
	}{
		{"30d", "30", true},
		{"28d", "28", false},
		{"7d", "7", false},
		{"1d", "1", false},
		{"12h", "0.5", false},
	} {
		t.Run(tc.period, func(t *testing.T) {
			doc := fmt.Sprintf(latencySLO, tc.period)
			if tc.period == "12h" {
				// Every default pair is above 100% of a 12h budget.
				doc += "    alerting: {page: {enabled: false}, ticket: {enabled: false}}\n"
			}
			if tc.period == "1d" {
				// Both ticket pairs spend 300% of a day's budget.
				doc += "    alerting: {ticket: {enabled: false}}\n"
			}
			rf, err := Generate(mustParse(t, doc))
			if err != nil {
				t.Fatal(err)
			}
			recs := records(rf)
			// Sloth's windows, always.
			for _, w := range []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"} {
				r, ok := recs["slo:sli_error:ratio_rate"+w]
				if !ok {
					t.Errorf("no slo:sli_error:ratio_rate%s", w)
					continue
				}
				if r.Labels["sloth_window"] != w {
					t.Errorf("ratio_rate%s: sloth_window %q", w, r.Labels["sloth_window"])
				}
			}
			if r := recs["slo:sli_error:ratio_period"]; r.Labels["sloth_window"] != tc.period {
				t.Errorf("ratio_period: sloth_window %q, want %q", r.Labels["sloth_window"], tc.period)
			}
			if _, ok := recs["slo:sli_error:ratio_rate30d"]; ok != tc.alias {
				t.Errorf("Sloth's ratio_rate30d alias present=%v, want %v (only for a 30d period)", ok, tc.alias)
			}
			if got := recs["slo:time_period:days"].Expr; got != "vector("+tc.days+")" {
				t.Errorf("time_period:days = %s", got)
			}
			if got := recs["slo:error_budget:ratio"].Expr; got != "vector(0.01)" {
				t.Errorf("error_budget = %s, want exactly vector(0.01)", got)
			}
			for _, name := range []string{"slo:objective:ratio", "slo:current_burn_rate:ratio", "slo:period_burn_rate:ratio", "slo:period_error_budget_remaining:ratio", "sloth_slo_info"} {
				r, ok := recs[name]
				if !ok {
					t.Errorf("no %s", name)
					continue
				}
				want := map[string]string{"sloth_id": "shop-rollouts", "sloth_service": "shop", "sloth_slo": "rollouts"}
				for k, v := range want {
					if r.Labels[k] != v {
						t.Errorf("%s: %s=%q, want %q", name, k, r.Labels[k], v)
					}
				}
			}
		})
	}
}

// Zero traffic must give no sample, never NaN or Inf: every division by an
// event count is guarded by > 0, and every division by the budget divides
// by a literal that is positive because the objective is below 1.
func TestEveryDivisionIsGuarded(t *testing.T) {
	f := mustParse(t, fmt.Sprintf(latencySLO, "30d"))
	rf, err := Generate(f)
	if err != nil {
		t.Fatal(err)
	}
	divByLiteral := regexp.MustCompile(`/ [0-9.]+( |$|\))`)
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, part := range strings.Split(r.Expr, "/")[1:] {
				p := strings.TrimSpace(part)
				switch {
				case strings.HasPrefix(p, "(sum(") && strings.Contains(p, ") > 0)"):
				case divByLiteral.MatchString("/ " + p):
				case strings.HasPrefix(p, "sum(count_over_time("): // goodMinutes: a count of present samples is >= 1
				default:
					t.Errorf("%s%s: unguarded division by %q", r.Record, r.Alert, firstLine(p))
				}
			}
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// The latency SLI reads le and threshold in both forms they are stored
// in: "300" (Prometheus 2, the exposition) and "300.0" (Prometheus 3,
// OpenMetrics); the regular expressions match both and nothing else.
func TestLatencySelectorsMatchBothStoredForms(t *testing.T) {
	for _, tc := range []struct {
		threshold string
		want      string
		match     []string
		reject    []string
	}{
		{"300", `"300(\\.0)?"`, []string{"300", "300.0"}, []string{"3000", "300.5", "30"}},
		{"0.25", `"0\\.25"`, []string{"0.25"}, []string{"0x25", "0.250"}},
		{"1", `"1(\\.0)?"`, []string{"1", "1.0"}, []string{"10", "1.5"}},
		{`"5.0"`, `"5(\\.0)?"`, []string{"5", "5.0"}, []string{"5.00", "50"}},
	} {
		doc := strings.Replace(fmt.Sprintf(latencySLO, "30d"), "threshold: 300", "threshold: "+tc.threshold, 1)
		rf, err := Generate(mustParse(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		total := records(rf)["slo:sli_total:rate5m"].Expr
		if !strings.Contains(total, "le=~"+tc.want) || !strings.Contains(total, "threshold=~"+tc.want) {
			t.Errorf("threshold %s: want le=~%s and threshold=~%s in\n%s", tc.threshold, tc.want, tc.want, total)
		}
		// PromQL anchors label regexps at both ends.
		f := mustParse(t, doc)
		re := regexp.MustCompile("^(?:" + ThresholdRegex(f.SLOs[0].SLI.Latency.Threshold) + ")$")
		for _, v := range tc.match {
			if !re.MatchString(v) {
				t.Errorf("threshold %s: %s does not match le=%q", tc.threshold, re, v)
			}
		}
		for _, v := range tc.reject {
			if re.MatchString(v) {
				t.Errorf("threshold %s: %s matches le=%q", tc.threshold, re, v)
			}
		}
	}
}

func TestAlertLabelsAndAnnotations(t *testing.T) {
	doc := fmt.Sprintf(latencySLO, "30d") + `    labels: {team: platform}
    alerting:
      name: ShopRolloutsSlow
      runbookURL: https://runbooks.example/rollouts
      labels: {route: sre}
      annotations: {dashboard: https://grafana.example/d/slo}
      page: {for: 5m, minEvents: 20, labels: {severity: pager}}
      ticket: {enabled: false}
      noEvents: {enabled: false}
`
	rf, err := Generate(mustParse(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	var alerts []Rule
	for _, r := range rf.Groups[0].Rules {
		if r.Alert != "" {
			alerts = append(alerts, r)
		}
	}
	if len(alerts) != 1 {
		t.Fatalf("%d alerts, want the page only", len(alerts))
	}
	a := alerts[0]
	if a.Alert != "ShopRolloutsSlow" || a.For != "5m" {
		t.Errorf("alert %s for %s", a.Alert, a.For)
	}
	wantLabels := map[string]string{"severity": "pager", "slo_tier": "page", "sloth_severity": "page", "route": "sre"}
	for k, v := range wantLabels {
		if a.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, a.Labels[k], v)
		}
	}
	if a.Annotations["runbook_url"] != "https://runbooks.example/rollouts" || a.Annotations["dashboard"] == "" {
		t.Errorf("annotations %v", a.Annotations)
	}
	if !strings.Contains(a.Expr, "* 60 >= 20)") {
		t.Errorf("the page's guard of 20 events is missing:\n%s", a.Expr)
	}
	// The SLO's own labels come with the series, not as alert labels.
	if got := records(rf)["slo:sli_error:ratio_rate1h"].Labels["team"]; got != "platform" {
		t.Errorf("record label team=%q", got)
	}
}

// The three indicator kinds all generate rules that parse, and the YAML
// rendering round-trips.
func TestGenerateEveryIndicatorKind(t *testing.T) {
	doc := `service: shop
slos:
  - name: latency
    objective: 0.995
    period: 28d
    sli:
      latency:
        metric: kube_convergence_endpoint_propagation_seconds
        threshold: 1
        scope: {cluster: [eu-1, eu-2]}
  - name: minutes
    objective: 0.999
    period: 7d
    sli:
      goodMinutes:
        badWhen: sum(rate(http_requests_total{code=~"5.."}[1m])) > 1
        countWhen: sum(rate(http_requests_total[1m]))
  - name: ratio
    objective: 0.95
    period: 30d
    sli:
      ratio:
        errorQuery: sum(rate(http_requests_total{code=~"5.."}[{{.window}}]))
        totalQuery: sum(rate(http_requests_total[{{.window}}]))
`
	rf, err := Generate(mustParse(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(rf.Groups) != 3 {
		t.Fatalf("%d groups", len(rf.Groups))
	}
	recs := records(&RuleFile{Groups: rf.Groups[:1]})
	if total := recs["slo:sli_total:rate5m"].Expr; !strings.Contains(total, `cluster=~"eu-1|eu-2"`) || !strings.Contains(total, `le=~"1(\\.0)?"`) {
		t.Errorf("latency with scope:\n%s", total)
	}
	if got := records(&RuleFile{Groups: rf.Groups[0:1]})["slo:error_budget:ratio"].Expr; got != "vector(0.005)" {
		t.Errorf("budget of 0.995 = %s, want exactly 0.005", got)
	}
	minutes := records(&RuleFile{Groups: rf.Groups[1:2]})
	if _, ok := minutes["slo:sli_bad_minute:bool"]; !ok {
		t.Error("goodMinutes: no slo:sli_bad_minute:bool")
	}
	ratio := records(&RuleFile{Groups: rf.Groups[2:3]})
	if e := ratio["slo:sli_bad:rate5m"].Expr; !strings.Contains(e, `[5m]`) || strings.Contains(e, "{{") {
		t.Errorf("ratio: window not substituted:\n%s", e)
	}
	b, err := rf.YAML("header line")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# header line\ngroups:\n") {
		t.Errorf("rendering starts %q", firstLine(string(b)))
	}
	var back RuleFile
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Groups) != 3 || len(back.Groups[1].Rules) != len(rf.Groups[1].Rules) || back.Groups[1].Rules[0].Expr != rf.Groups[1].Rules[0].Expr {
		t.Error("the YAML rendering does not round-trip")
	}
}

// Explicit windows replace the defaults and get their own records.
func TestExplicitWindows(t *testing.T) {
	doc := fmt.Sprintf(latencySLO, "1d") + `    alerting:
      ticket:
        windows:
          - {long: 12h, short: 1h, factor: 1.5}
`
	f := mustParse(t, doc)
	rf, err := Generate(f)
	if err != nil {
		t.Fatal(err)
	}
	_, ticket := alertPairs(t, rf)
	if !slices.Equal(ticket, []string{"12h/1h"}) {
		t.Errorf("ticket pairs %v", ticket)
	}
	if _, ok := records(rf)["slo:sli_error:ratio_rate12h"]; !ok {
		t.Error("no record for the 12h window")
	}
}

func TestPrometheusRule(t *testing.T) {
	rf, err := Generate(mustParse(t, fmt.Sprintf(latencySLO, "30d")))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rf.YAML("")
	if err != nil {
		t.Fatal(err)
	}
	hand := []byte("groups:\n  - name: hand\n    rules:\n      # why this alert\n      - alert: X\n        expr: up == 0\n")
	b, err := PrometheusRule("generated", ObjectMeta{Name: "n", Namespace: "ns"}, hand, gen)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string     `yaml:"apiVersion"`
		Kind       string     `yaml:"kind"`
		Metadata   ObjectMeta `yaml:"metadata"`
		Spec       RuleFile   `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" || obj.Metadata.Name != "n" || obj.Metadata.Namespace != "ns" {
		t.Errorf("object %+v", obj)
	}
	if len(obj.Spec.Groups) != 2 || obj.Spec.Groups[0].Name != "hand" || obj.Spec.Groups[1].Name != "slo-shop-rollouts" {
		t.Errorf("groups %+v", obj.Spec.Groups)
	}
	if !strings.Contains(string(b), "# why this alert") {
		t.Error("the hand-written comment did not survive")
	}
	if _, err := PrometheusRule("", ObjectMeta{Name: "n"}, hand, hand); err == nil || !strings.Contains(err.Error(), `group "hand" is defined twice`) {
		t.Errorf("duplicate groups: %v", err)
	}
}

// The raw reads of a latency SLI fold the exporter's HA replicas (max of
// the rate without instance and pod) inside the sum over shards, with or
// without --group-by; a ratio SLI's queries are the user's, left as they
// are (three API servers are not replicas). rules/tests/replicas.test.yml
// checks the values with promtool.
func TestRawReadsFoldReplicas(t *testing.T) {
	doc := fmt.Sprintf(latencySLO, "30d") + `  - name: ratio
    objective: 0.95
    period: 30d
    sli:
      ratio:
        errorQuery: sum(rate(http_requests_total{code=~"5.."}[{{.window}}]))
        totalQuery: sum(rate(http_requests_total[{{.window}}]))
`
	for _, o := range []Options{{}, {GroupBy: []string{"cluster"}}} {
		rf, err := GenerateWith(mustParse(t, doc), o)
		if err != nil {
			t.Fatal(err)
		}
		sum := "sum("
		if len(o.GroupBy) > 0 {
			sum = "sum by (cluster) ("
		}
		latency := records(&RuleFile{Groups: rf.Groups[:1]})
		for _, rec := range []string{RecordBadRate, RecordTotalRate} {
			e := latency[rec].Expr
			if n, m := strings.Count(e, "rate("), strings.Count(e, sum+"max without (instance, pod) (rate("); n == 0 || n != m {
				t.Errorf("%v: %s: %d rate() reads, %d folded as %smax without (instance, pod) (rate(...))):\n%s", o.GroupBy, rec, n, m, sum, e)
			}
		}
		ratio := records(&RuleFile{Groups: rf.Groups[1:2]})
		if e := ratio[RecordBadRate].Expr; strings.Contains(e, "max without") {
			t.Errorf("%v: the ratio SLI's query was rewritten:\n%s", o.GroupBy, e)
		}
	}
}
