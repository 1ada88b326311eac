package rules

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// With histograms.classicBuckets: thresholds the exporter exposes the
// classic buckets and crossing counters of these histograms only at
// config.DefaultClassicThresholds. The bundled rules stay correct in that
// mode only if every le and threshold they read is kept.

// cutSeries maps the series names whose le or threshold mode thresholds
// cuts to the kept thresholds, in both stored forms.
func cutSeries() map[string][]string {
	out := map[string][]string{}
	exceeded := map[string]string{}
	for _, h := range latency.SLIs() {
		exceeded[h.Name] = h.Exceeded.Name
	}
	for name, keep := range config.DefaultClassicThresholds {
		var forms []string
		for _, k := range keep {
			forms = append(forms, latency.Threshold(k), strconv.FormatFloat(k, 'g', -1, 64))
		}
		out[name+"_bucket"] = forms
		if e := exceeded[name]; e != "" {
			out[e] = forms
		}
	}
	return out
}

var selectorOf = regexp.MustCompile(`\b(kube_convergence_[a-z_]+)\s*\{([^}]*)\}`)

func TestRulesReadOnlyKeptClassicBuckets(t *testing.T) {
	cut := cutSeries()
	checked := 0
	for _, f := range glob(t, "*.rules.yml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range selectorOf.FindAllSubmatch(b, -1) {
			kept, ok := cut[string(sel[1])]
			if !ok {
				continue
			}
			for _, m := range leOrThreshold.FindAllSubmatch(sel[2], -1) {
				expr := strings.ReplaceAll(string(m[3]), `\\`, `\`)
				re, err := regexp.Compile("^(?:" + expr + ")$")
				if err != nil {
					t.Errorf("%s: %s: %v", f, sel[0], err)
					continue
				}
				checked++
				found := false
				for _, k := range kept {
					found = found || re.MatchString(k)
				}
				if !found {
					t.Errorf("%s: %s reads %s %q, which classicBuckets: thresholds drops (kept: %v): add it to config.DefaultClassicThresholds", f, sel[1], m[1], m[3], kept)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no le or threshold matcher on a cut histogram found in the rule files: the scan is broken")
	}
}

// TestPromtoolTestRulesClassicThresholds runs again every promtool test
// file that feeds series mode thresholds would not expose, with those left
// out: the same alerts and records must follow.
func TestPromtoolTestRulesClassicThresholds(t *testing.T) {
	pt := promtool(t)
	cut := cutSeries()
	dir := t.TempDir()
	dropped := 0
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		var doc yaml.Node
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		root := doc.Content[0]
		here := 0
		for i := 0; i+1 < len(root.Content); i += 2 {
			switch root.Content[i].Value {
			case "rule_files":
				for _, rf := range root.Content[i+1].Content {
					abs, err := filepath.Abs(filepath.Join(filepath.Dir(f), rf.Value))
					if err != nil {
						t.Fatal(err)
					}
					rf.Value = abs
				}
			case "tests":
				for _, tc := range root.Content[i+1].Content {
					here += dropCutSeries(tc, cut)
				}
			}
		}
		if here == 0 {
			continue // the same as TestPromtoolTestRules runs
		}
		dropped += here
		out, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, out, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			run(t, 5*time.Minute, pt, "test", "rules", p)
		})
	}
	if dropped == 0 {
		t.Error("no input series dropped: the tests feed no bucket that mode thresholds cuts, so this run proves nothing")
	}
}

var labelPair = regexp.MustCompile(`\b(le|threshold)\s*=\s*"([^"]*)"`)

// dropCutSeries removes from one test case the input series of a cut
// name whose le or threshold is not kept, and returns how many.
func dropCutSeries(tc *yaml.Node, cut map[string][]string) int {
	n := 0
	for i := 0; i+1 < len(tc.Content); i += 2 {
		if tc.Content[i].Value != "input_series" {
			continue
		}
		list := tc.Content[i+1]
		var keep []*yaml.Node
		for _, s := range list.Content {
			if !cutAway(seriesOf(s), cut) {
				keep = append(keep, s)
				continue
			}
			n++
		}
		list.Content = keep
	}
	return n
}

func seriesOf(item *yaml.Node) string {
	for i := 0; i+1 < len(item.Content); i += 2 {
		if item.Content[i].Value == "series" {
			return item.Content[i+1].Value
		}
	}
	return ""
}

func cutAway(series string, cut map[string][]string) bool {
	name, labels, ok := strings.Cut(series, "{")
	kept, isCut := cut[strings.TrimSpace(name)]
	if !ok || !isCut {
		return false
	}
	m := labelPair.FindStringSubmatch(labels)
	return len(m) > 2 && !slices.Contains(kept, m[2])
}
