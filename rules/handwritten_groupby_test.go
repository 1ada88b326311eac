package rules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// ruleFileOf is a rule file of one group holding rules, each "expr" or
// "expr\x00annotation" (an alert with a description).
func ruleFileOf(rules ...string) []byte {
	var b strings.Builder
	b.WriteString("groups:\n  - name: g\n    rules:\n")
	for i, r := range rules {
		expr, desc, _ := strings.Cut(r, "\x00")
		if desc != "" {
			b.WriteString("      - alert: A" + string(rune('a'+i)) + "\n")
		} else {
			b.WriteString("      - record: r" + string(rune('a'+i)) + "\n")
		}
		b.WriteString("        expr: |-\n          " + strings.ReplaceAll(expr, "\n", "\n          ") + "\n")
		if desc != "" {
			b.WriteString("        annotations:\n          description: '" + desc + "'\n")
		}
	}
	return []byte(b.String())
}

type rewritten struct{ exprs, annotations []string }

func rewriteOf(t *testing.T, src []byte, by ...string) rewritten {
	t.Helper()
	out, err := WithGroupBy([]File{{Name: "t.rules.yml", Data: src}}, by)
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(out[0].Data, &rf); err != nil {
		t.Fatalf("%v\n%s", err, out[0].Data)
	}
	var r rewritten
	for _, rule := range rf.Groups[0].Rules {
		r.exprs = append(r.exprs, rule.Expr)
		if d, ok := rule.Annotations["description"]; ok {
			r.annotations = append(r.annotations, d)
		}
	}
	return r
}

func TestWithGroupByRewritesByAndOn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`sum by (webhook, type) (rate(x[5m]))`, `sum by (cluster, webhook, type) (rate(x[5m]))`},
		{`sum(rate(x[5m]))`, `sum by (cluster) (rate(x[5m]))`},
		{`sum (x) by (a)`, `sum (x) by (cluster, a)`},
		{`max without (instance, pod) (x)`, `max without (instance, pod) (x)`},
		{`max without (cluster, pod) (x)`, `max without (pod) (x)`},
		{`count by (cluster, a) (x)`, `count by (cluster, a) (x)`},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))`, `histogram_quantile(0.99, sum by (cluster, le) (rate(h_bucket[5m])))`},
		{`topk(3, x)`, `topk by (cluster) (3, x)`},
		// Joins between vectors that both carry the label match on it.
		{"a and on (job, webhook)\nb", "a and on (cluster, job, webhook)\nb"},
		{`a / on (x) group_left (cluster, y) b`, `a / on (cluster, x) group_left (y) b`},
		{`a * ignoring (cluster, le) b`, `a * ignoring (le) b`},
		{`a - ignoring (le) b`, `a - ignoring (le) b`},
		{`a > on () b`, `a > on (cluster) b`},
		// Comparisons with a scalar have no matching.
		{`max by (w) (t) >= 2 < 5`, `max by (cluster, w) (t) >= 2 < 5`},
		// Series built by vector() carry no cluster: joined as before.
		{`a > on (name) group_left () label_replace(vector(1), "name", "q", "", "")`, `a > on (name) group_left () label_replace(vector(1), "name", "q", "", "")`},
		{`a unless on (job) absent(up{job="x"})`, `a unless on (job) absent(up{job="x"})`},
	} {
		got := rewriteOf(t, ruleFileOf(tc.in), "cluster").exprs[0]
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// A series recorded only from vectors without the label (the controllers
// file's per-queue thresholds) is one table for every cluster: joins on it
// keep their labels, joins on what is recorded from scraped series do not.
func TestWithGroupByFollowsRecords(t *testing.T) {
	r := rewriteOf(t, ruleFileOf(
		`label_replace(vector(Inf), "name", "q", "", "")`,          // record ra
		`max by (name) (override) or on (name) max by (name) (ra)`, // rb: override (not recorded here) or ra
		`max by (job, name) (depth)`,                               // rc
		`rc > on (name) group_left () rb`,
		`rc and on (job, name) rc`,
	), "cluster")
	want := []string{
		`label_replace(vector(Inf), "name", "q", "", "")`,
		`max by (cluster, name) (override) or on (name) max by (cluster, name) (ra)`,
		`max by (cluster, job, name) (depth)`,
		`rc > on (name) group_left () rb`,
		`rc and on (cluster, job, name) rc`,
	}
	if !slices.Equal(r.exprs, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(r.exprs, "\n"), strings.Join(want, "\n"))
	}
}

// The queries of templates select the alert's own cluster.
func TestWithGroupByRewritesTemplateQueries(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{
			`{{ with printf "max(t{webhook=%q, type=%q})" $labels.webhook $labels.type | query }}{{ (index . 0).Value }}{{ end }}`,
			`{{ with printf "max by (cluster) (t{cluster=%q, webhook=%q, type=%q})" $labels.cluster $labels.webhook $labels.type | query }}{{ (index . 0).Value }}{{ end }}`,
		},
		{
			`{{ with printf "info{u!=\"\"} and on (job) x{job=%q}" $labels.job | query }}{{ end }}`,
			`{{ with printf "info{u!=\"\"} and on (cluster, job) x{cluster=%q, job=%q}" $labels.cluster $labels.job | query }}{{ end }}`,
		},
		{
			// A selector without a $labels matcher reads every cluster's
			// series, as it read every series before.
			`{{ range printf "sum by (r) (e{p=%q}) > on (r) group_left () t" $labels.p | query | sortByLabel "r" }}{{ end }}`,
			`{{ range printf "sum by (cluster, r) (e{cluster=%q, p=%q}) > on (cluster, r) group_left () t" $labels.cluster $labels.p | query | sortByLabel "r" }}{{ end }}`,
		},
		{`{{ $labels.webhook }} is slow`, `{{ $labels.webhook }} is slow`},
	} {
		got := rewriteOf(t, ruleFileOf("x > 0\x00"+tc.in), "cluster").annotations[0]
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestWithGroupBySeveralLabelsAndErrors(t *testing.T) {
	got := rewriteOf(t, ruleFileOf(`sum by (a) (x) / on (a) y`), "cluster", "region").exprs[0]
	if want := `sum by (cluster, region, a) (x) / on (cluster, region, a) y`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, by := range [][]string{{"le"}, {"__name__"}, {"a-b"}} {
		if _, err := WithGroupBy([]File{{Name: "t.rules.yml", Data: ruleFileOf("x")}}, by); err == nil {
			t.Errorf("group-by %v: no error", by)
		}
	}
	if _, err := WithGroupBy([]File{{Name: "t.rules.yml", Data: ruleFileOf(`x > 0` + "\x00" + `{{ printf "x{a=%s}" $labels.a | query }}`)}}, []string{"cluster"}); err == nil {
		t.Errorf("a %%s verb in a query: no error")
	}
}

// addedLabel removes what WithGroupBy adds for the label cluster.
var addedLabel = strings.NewReplacer("cluster=%q, ", "", "cluster, ", "", " by (cluster) (", "(", " by (cluster)", "", " $labels.cluster", "")

// The rewrite of the bundled files changes nothing but the label lists and
// the templates' queries (the layout and the comments stay, line for line),
// and afterwards every aggregation keeps cluster and every join between
// series that carry it matches on it.
func TestWithGroupByBundledFiles(t *testing.T) {
	files, err := HandWritten()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d hand-written rule files", len(files))
	}
	out, err := WithGroupBy(files, []string{"cluster"})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range out {
		have := strings.Split(string(f.Data), "\n")
		orig := strings.Split(string(files[i].Data), "\n")
		for len(have) > 0 && strings.HasPrefix(have[0], "# ") && !strings.HasPrefix(orig[0], have[0]) {
			have = have[1:] // the header
		}
		if len(have) != len(orig) {
			t.Errorf("%s: %d lines rewritten as %d", f.Name, len(orig), len(have))
			continue
		}
		changed := 0
		for j := range orig {
			if have[j] != orig[j] {
				changed++
				if addedLabel.Replace(have[j]) != orig[j] {
					t.Errorf("%s:%d: more than the label changed:\n%s\n%s", f.Name, j+1, orig[j], have[j])
				}
			}
		}
		if changed == 0 {
			t.Errorf("%s: nothing rewritten", f.Name)
		}
		var rf ruleFile
		if err := yaml.Unmarshal(f.Data, &rf); err != nil {
			t.Fatal(err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				e, err := parseExpr(r.Expr)
				if err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
				parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
					if a, ok := n.(*parser.AggregateExpr); ok && a.Without == slices.Contains(a.Grouping, "cluster") {
						t.Errorf("%s: %s: %s drops cluster", f.Name, r.Alert, a.String())
					}
					return nil
				})
			}
		}
	}
}

// The bundled hand-written files rewritten for --group-by cluster load in
// Prometheus, and the webhook alerts keep clusters apart:
// testdata/webhooks-groupby.test.yml.
func TestGroupByClusterHandWrittenRules(t *testing.T) {
	pt := promtool(t)
	files, err := HandWritten()
	if err != nil {
		t.Fatal(err)
	}
	out, err := WithGroupBy(files, []string{"cluster"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, f := range out {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	test, err := os.ReadFile(filepath.Join("testdata", "webhooks-groupby.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "webhooks-groupby.test.yml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, time.Minute, pt, append([]string{"check", "rules"}, paths...)...)
	run(t, 2*time.Minute, pt, "test", "rules", filepath.Join(dir, "webhooks-groupby.test.yml"))
}
