package report

import (
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// The report reads the raw series the generated rules read: the latency
// selectors are in the rules' 5m records, a good-minutes SLI's bad-minute
// expression is the rule's, and a ratio SLI's series are found in its
// queries.
func TestReportReadsTheSeriesOfTheRules(t *testing.T) {
	f, err := slo.Load("../../rules/slos.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := slo.Parse("extra.yaml", []byte(`service: extra
slos:
  - name: minutes
    objective: 0.99
    period: 7d
    sli:
      goodMinutes:
        badWhen: sum(kube_convergence_rollouts_stalled) > 0
        countWhen: up{job="kube-convergence-exporter"} == 1
  - name: ratio
    objective: 0.99
    period: 7d
    sli:
      ratio:
        errorQuery: sum(rate(kube_convergence_relists_total{reason="expired"}[{{.window}}]))
        totalQuery: sum(rate(kube_convergence_relists_total[{{.window}}]))
`))
	if err != nil {
		t.Fatal(err)
	}
	f.SLOs = append(f.SLOs, extra.SLOs...)
	rf, err := slo.Generate(f)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]map[string]string{} // group -> record -> expr
	for _, g := range rf.Groups {
		rules[g.Name] = map[string]string{}
		for _, r := range g.Rules {
			if r.Record != "" {
				rules[g.Name][r.Record] = r.Expr
			}
		}
	}
	for i := range f.SLOs {
		s := &f.SLOs[i]
		g := rules["slo-"+s.ID()]
		switch {
		case s.SLI.Latency != nil:
			good, bad, err := s.SLI.Latency.Selectors()
			if err != nil {
				t.Fatal(err)
			}
			total := g[slo.RecordTotalRate]
			if !strings.Contains(total, good+"[5m]") || !strings.Contains(total, bad+"[5m]") || !strings.Contains(g[slo.RecordBadRate], bad+"[5m]") {
				t.Errorf("%s: the report's selectors %s and %s are not those of the rules:\n%s", s.ID(), good, bad, total)
			}
		case s.SLI.GoodMinutes != nil:
			if got := s.SLI.GoodMinutes.BadMinute(); got != g[slo.RecordBadMinute] {
				t.Errorf("%s: bad minute %q, the rule's %q", s.ID(), got, g[slo.RecordBadMinute])
			}
		case s.SLI.Ratio != nil:
			total, bad, err := seriesSelectors(s.SLI)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(total, " ") != "kube_convergence_relists_total" || strings.Join(bad, " ") != `kube_convergence_relists_total{reason="expired"}` {
				t.Errorf("%s: series %q and %q", s.ID(), total, bad)
			}
		}
	}
}

// selectorsOf gives the series without their offset or @: a range of
// "x offset 1m" would not parse as "x offset 1m[1m]".
func TestSelectorsOfDropsOffset(t *testing.T) {
	got, err := selectorsOf(`x{a="1"} - x{a="1"} offset 1m > 0 or y @ 100`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != `x{a="1"} y` {
		t.Errorf("selectors %q, want x{a=\"1\"} and y", got)
	}
}

// Only an errorQuery that adds up counters' rates is split into its
// selectors' per-minute increases; a difference would count good events
// as bad.
func TestSumOfRates(t *testing.T) {
	for q, want := range map[string]bool{
		`sum(rate(a_total{x="1"}[1m]))`:                       true,
		`sum(rate(a_total[1m])) + sum(increase(b_total[1m]))`: true,
		`sum(rate(a_total[1m])) - sum(rate(good_total[1m]))`:  false,
		`sum(rate(a_total[1m])) / sum(rate(b_total[1m]))`:     false,
		`max(rate(a_total[1m]))`:                              false,
		`sum(rate(a_total[1m])) * 2`:                          false,
		`histogram_quantile(0.99, sum by (le) (rate(h[1m])))`: false,
		`sum(rate(a_total[1m]) > 0)`:                          false,
	} {
		if got := sumOfRates(q); got != want {
			t.Errorf("sumOfRates(%s) = %v, want %v", q, got, want)
		}
	}
}
