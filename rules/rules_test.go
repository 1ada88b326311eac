package rules

// The bundled rules are tested for real with the pinned promtool
// (tools/build.sh builds it into .bin/, or $KCE_BIN_DIR): `promtool check
// rules` on every rule file, `promtool test rules` on every test file. The
// Go tests around it keep the suite honest: every alert has a test that it
// fires and one that it stays silent, and no le or threshold value is
// written in the form Prometheus 3 never stores.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// promtool returns the pinned promtool binary.
func promtool(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("promtool not built (run make tools, or set KCE_BIN_DIR): %v", err)
	}
	return p
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files match %s", pattern)
	}
	return files
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out.String())
	}
}

// The demo and the end-to-end tests load rules/*.rules.yml: a rule file
// under another name would be silently left out.
func TestRuleFilesAreNamedForTheGlob(t *testing.T) {
	for _, f := range glob(t, "*.y*ml") {
		if f == "slos.yaml" {
			continue
		}
		if ok, _ := filepath.Match("*.rules.yml", f); !ok {
			t.Errorf("%s: rule files must be named *.rules.yml (make demo and the e2e tests load rules/*.rules.yml)", f)
		}
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	run(t, 2*time.Minute, promtool(t), append([]string{"check", "rules"}, glob(t, "*.rules.yml")...)...)
}

func TestPromtoolTestRules(t *testing.T) {
	pt := promtool(t)
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			// About 20 s for the SLO tests on 2 cores: they evaluate
			// hours of minutes.
			run(t, 5*time.Minute, pt, "test", "rules", f)
		})
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type testFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert of every rule file has a test where it fires and one where
// it does not (fires when it should, silent when it should not), in a
// test file that loads that rule file.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		var tf testFile
		readYAML(t, f, &tf)
		for _, tc := range tf.Tests {
			for _, at := range tc.AlertRuleTests {
				if len(at.ExpAlerts) > 0 {
					fires[at.Alertname] = true
				} else {
					silent[at.Alertname] = true
				}
			}
		}
	}
	n := 0
	for _, f := range glob(t, "*.rules.yml") {
		var rf ruleFile
		readYAML(t, f, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				if !fires[r.Alert] {
					t.Errorf("%s: alert %s has no test where it fires", f, r.Alert)
				}
				if !silent[r.Alert] {
					t.Errorf("%s: alert %s has no test where it stays silent", f, r.Alert)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts found")
	}
}

// le and threshold values. client_golang exposes le="300"; Prometheus 3
// (and any OpenMetrics scrape) stores it as "300.0", Prometheus 2 as
// "300". Rules must match both, with le=~"300(\\.0)?" (an exact match on
// either form matches nothing on the other kind of server); test inputs
// must use one of the two stored forms, and at least one test feeds the
// Prometheus 2 form so that the regular expressions are exercised.
var leOrThreshold = regexp.MustCompile(`\b(le|threshold)\s*(=~?|!=)\s*"([^"]*)"`)

func TestLeAndThresholdMatchBothStoredForms(t *testing.T) {
	for _, f := range glob(t, "*.rules.yml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range leOrThreshold.FindAllSubmatch(b, -1) {
			// The YAML block holds the PromQL string literal: \\ is one
			// backslash of the regular expression.
			expr := strings.ReplaceAll(string(m[3]), `\\`, `\`)
			re, err := regexp.Compile("^(?:" + expr + ")$")
			if string(m[2]) != "=~" || err != nil {
				t.Errorf("%s: %s: want %s=~ with a regular expression matching both stored forms", f, m[0], m[1])
				continue
			}
			n := 0
			for _, form := range []string{"0.1", "0.25", "5", "5.0", "30", "30.0", "300", "300.0"} {
				if re.MatchString(form) {
					n++
				}
			}
			x, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(expr, `(\.0)?`), ""), 64)
			whole := x == float64(int64(x)) && x > 0
			if whole && (!re.MatchString(latency.Threshold(x)) || !re.MatchString(strconv.FormatFloat(x, 'g', -1, 64))) {
				t.Errorf("%s: %s: does not match both %q and %q", f, m[0], strconv.FormatFloat(x, 'g', -1, 64), latency.Threshold(x))
			}
			if n > 2 {
				t.Errorf("%s: %s: matches %d different bounds", f, m[0], n)
			}
		}
	}
	prom2 := 0
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range leOrThreshold.FindAllSubmatch(b, -1) {
			v := string(m[3])
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue // a regular expression in a query
			}
			if v != latency.Threshold(x) && v != strconv.FormatFloat(x, 'g', -1, 64) {
				t.Errorf("%s: %s: neither stored form (%q, %q)", f, m[0], strconv.FormatFloat(x, 'g', -1, 64), latency.Threshold(x))
			}
			if v != latency.Threshold(x) {
				prom2++
			}
		}
	}
	if prom2 == 0 {
		t.Error(`no test feeds le="300"-style series (the form Prometheus 2 stores)`)
	}
}

// The generated rule file is tested by the test files that load it.
func TestTestFilesLoadEveryRuleFile(t *testing.T) {
	var loaded []string
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		var tf testFile
		readYAML(t, f, &tf)
		for _, r := range tf.RuleFiles {
			loaded = append(loaded, filepath.Base(r))
		}
	}
	for _, f := range glob(t, "*.rules.yml") {
		if !slices.Contains(loaded, f) {
			t.Errorf("%s is not loaded by any test file in tests/", f)
		}
	}
}

// The committed generated file is what the SLO file gives (also checked by
// internal/gen's TestGeneratedFilesUpToDate; here so that `go test
// ./rules/` alone catches an edit of slos.yaml without make generate).
func TestGeneratedRulesUpToDate(t *testing.T) {
	want, err := SLORules()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Base(SLORulesPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Errorf("%s is stale: run make generate", SLORulesPath)
	}
}
