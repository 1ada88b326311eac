package rules

// Mutation check of the generated SLO rules (issue 12, "rule math
// pinned"): every burn-rate factor, every window an alert or a ratio record
// reads and every `for` is perturbed, one at a time, in the generated rule
// file, and the promtool unit tests must fail on each mutant. A mutant
// that passes names a number no test pins.
//
// Only the expressions and `for` change, never the annotations: a mutant
// caught only because its description reads differently would prove
// nothing about the math.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

type mutant struct {
	name  string // what changed, e.g. "pod-startup: ticket pair 1 factor 3 -> 2.55"
	rules []byte // the mutated rule file
}

// factorScale is the perturbation of a factor: the tests sit at about
// ±7-10% of each factor (13x/15x around 14.4, 5.5x/6.5x around 6, 2.8x/3.2x
// around 3, 0.9x/1.1x around 1), so ±15% must be caught.
var factorScale = []float64{0.85, 1.15}

var (
	ratioRecord = regexp.MustCompile(`slo:sli_error:ratio_rate([0-9]+[smhd])\{`)
	factorCmp   = regexp.MustCompile(`(/ [0-9.e-]+ > )([0-9.e+]+)\)`)
	subquery    = regexp.MustCompile(`\[([0-9]+[smhd]):1m\]`)
	rangeSel    = regexp.MustCompile(`\[([0-9]+[smhd])\]`)
	pairSep     = "\n  or\n"
)

// neighbours are the recorded windows next to w: what a typo or a wrong
// table row would put there.
func neighbours(w string, recorded []time.Duration) []string {
	d, err := slo.ParseDuration(w)
	if err != nil {
		return nil
	}
	i := slices.Index(recorded, d)
	var out []string
	if i > 0 {
		out = append(out, slo.FormatDuration(recorded[i-1]))
	}
	if i >= 0 && i+1 < len(recorded) {
		out = append(out, slo.FormatDuration(recorded[i+1]))
	}
	return out
}

func mutants(t *testing.T, src []byte) []mutant {
	t.Helper()
	var rf slo.RuleFile
	if err := yaml.Unmarshal(src, &rf); err != nil {
		t.Fatal(err)
	}
	var out []mutant
	emit := func(gi, ri int, name string, edit func(r *slo.Rule)) {
		cp := slo.RuleFile{Groups: slices.Clone(rf.Groups)}
		cp.Groups[gi].Rules = slices.Clone(rf.Groups[gi].Rules)
		edit(&cp.Groups[gi].Rules[ri])
		b, err := cp.YAML("")
		if err != nil {
			t.Fatal(err)
		}
		sloName := strings.TrimPrefix(rf.Groups[gi].Name, "slo-kube-convergence-")
		out = append(out, mutant{name: sloName + ": " + name, rules: b})
	}
	for gi, g := range rf.Groups {
		var recorded []time.Duration
		for _, r := range g.Rules {
			if m := ratioRecord.FindStringSubmatch(r.Record + "{"); m != nil {
				d, _ := slo.ParseDuration(m[1])
				recorded = append(recorded, d)
			}
		}
		slices.Sort(recorded)
		for ri, r := range g.Rules {
			switch {
			case strings.HasPrefix(r.Record, slo.RecordErrorRatioPrefix) || r.Record == slo.RecordErrorRatioPeriod:
				// The window a ratio record averages over.
				m := rangeSel.FindStringSubmatch(r.Expr)
				if m == nil {
					continue // the 5m ratio reads the 5m rates directly
				}
				for _, n := range neighbours(m[1], recorded) {
					emit(gi, ri, fmt.Sprintf("record %s window %s -> %s", r.Record, m[1], n), func(r *slo.Rule) {
						r.Expr = strings.ReplaceAll(r.Expr, "["+m[1]+"]", "["+n+"]")
					})
				}
			case r.Alert != "":
				tier := r.Labels["slo_tier"]
				pairs := strings.Split(r.Expr, pairSep)
				for pi, p := range pairs {
					at := fmt.Sprintf("%s pair %d", tier, pi+1)
					replacePair := func(r *slo.Rule, np string) {
						ps := strings.Split(r.Expr, pairSep)
						ps[pi] = np
						r.Expr = strings.Join(ps, pairSep)
					}
					if m := factorCmp.FindStringSubmatch(p); m != nil {
						f, _ := strconv.ParseFloat(m[2], 64)
						for _, s := range factorScale {
							nf := strconv.FormatFloat(f*s, 'g', 4, 64)
							emit(gi, ri, fmt.Sprintf("%s factor %s -> %s", at, m[2], nf), func(r *slo.Rule) {
								replacePair(r, factorCmp.ReplaceAllString(p, "${1}"+nf+")"))
							})
						}
					}
					// The long window, then the short one.
					for wi, m := range ratioRecord.FindAllStringSubmatchIndex(p, -1) {
						w := p[m[2]:m[3]]
						for _, n := range neighbours(w, recorded) {
							emit(gi, ri, fmt.Sprintf("%s %s window %s -> %s", at, []string{"long", "short"}[min(wi, 1)], w, n), func(r *slo.Rule) {
								replacePair(r, p[:m[2]]+n+p[m[3]:])
							})
						}
					}
					// The low-traffic guard's window.
					if m := subquery.FindStringSubmatchIndex(p); m != nil {
						w := p[m[2]:m[3]]
						for _, n := range neighbours(w, recorded) {
							emit(gi, ri, fmt.Sprintf("%s minEvents window %s -> %s", at, w, n), func(r *slo.Rule) {
								replacePair(r, p[:m[2]]+n+p[m[3]:])
							})
						}
					}
				}
				// `for`, one evaluation interval either way.
				if r.For != "" {
					d, err := slo.ParseDuration(r.For)
					if err != nil {
						t.Fatal(err)
					}
					for _, nd := range []time.Duration{d - time.Minute, d + time.Minute} {
						n := ""
						if nd > 0 {
							n = slo.FormatDuration(nd)
						}
						emit(gi, ri, fmt.Sprintf("%s for %s -> %q", tier, r.For, n), func(r *slo.Rule) { r.For = n })
					}
				}
			}
		}
	}
	return out
}

// sloTestFiles are the test files that load the generated SLO rules.
func sloTestFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range glob(t, filepath.Join("tests", "*.yml")) {
		var tf testFile
		readYAML(t, f, &tf)
		for _, r := range tf.RuleFiles {
			if filepath.Base(r) == filepath.Base(SLORulesPath) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// passes runs promtool on the test files with rules as the generated SLO
// rule file; run selects test groups by name ("" all). Safe to call from
// several goroutines with different dirs.
func passes(ctx context.Context, pt, dir string, rules []byte, files []string, run string) (bool, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(SLORulesPath)), rules, 0o644); err != nil {
		return false, err
	}
	args := []string{"test", "rules"}
	if run != "" {
		args = append(args, "--run", run)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		dst := filepath.Join(dir, "tests", filepath.Base(f))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return false, err
		}
		args = append(args, dst)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pt, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return false, fmt.Errorf("promtool: %w: %s", ctx.Err(), out.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return false, fmt.Errorf("promtool: %w", err)
	}
	return err == nil, nil
}

// mutationEnv turns the mutation check on: it runs promtool up to once
// per test group and mutant (about 190 mutants), minutes on 2 cores, too
// long for every `go test ./rules/`. make rules-mutation sets it.
const mutationEnv = "KCE_MUTATION"

// testGroup is one promtool test group: its file, its name and its cost
// (the last evaluation time, in minutes of evaluation).
type testGroup struct {
	file, name string
	cost       time.Duration
}

// testGroups lists the test groups of files, cheapest first: a mutant is
// caught by the first group that fails, so the usual mutant costs a few
// short groups instead of every file.
func testGroups(t *testing.T, files []string) []testGroup {
	t.Helper()
	var out []testGroup
	for _, f := range files {
		var tf struct {
			Tests []struct {
				Name  string `yaml:"name"`
				Evals []struct {
					EvalTime string `yaml:"eval_time"`
				} `yaml:"alert_rule_test"`
				Exprs []struct {
					EvalTime string `yaml:"eval_time"`
				} `yaml:"promql_expr_test"`
			} `yaml:"tests"`
		}
		readYAML(t, f, &tf)
		for _, tc := range tf.Tests {
			g := testGroup{file: f, name: tc.Name}
			for _, e := range append(tc.Evals, tc.Exprs...) {
				d, err := slo.ParseDuration(e.EvalTime)
				if err != nil {
					t.Fatalf("%s: %s: eval_time %q: %v", f, tc.Name, e.EvalTime, err)
				}
				g.cost = max(g.cost, d)
			}
			out = append(out, g)
		}
	}
	slices.SortStableFunc(out, func(a, b testGroup) int { return int(a.cost - b.cost) })
	return out
}

func TestEveryMutantOfTheSLORulesFailsATest(t *testing.T) {
	if os.Getenv(mutationEnv) == "" {
		t.Skipf("set %s=1 (make rules-mutation): runs promtool up to once per test group and mutant", mutationEnv)
	}
	pt := promtool(t)
	src, err := os.ReadFile(filepath.Base(SLORulesPath))
	if err != nil {
		t.Fatal(err)
	}
	files := sloTestFiles(t)
	if ok, err := passes(t.Context(), pt, t.TempDir(), src, files, ""); err != nil || !ok {
		t.Fatalf("the unmutated rules fail their tests (%v)", err)
	}
	groups := testGroups(t, files)
	ms := mutants(t, src)
	if len(ms) < 50 {
		t.Fatalf("only %d mutants: the rule layout changed under the mutation patterns", len(ms))
	}
	// KCE_MUTATION=<regexp> (other than 1) runs the mutants it matches.
	if f := os.Getenv(mutationEnv); f != "1" {
		re, err := regexp.Compile(f)
		if err != nil {
			t.Fatalf("%s: %v", mutationEnv, err)
		}
		ms = slices.DeleteFunc(ms, func(m mutant) bool { return !re.MatchString(m.name) })
	}
	// Two at a time: promtool is single-threaded and the machine is
	// shared.
	sem := make(chan struct{}, 2)
	var (
		mu        sync.Mutex
		survivors []string
		errs      []string
		runs      int
		wg        sync.WaitGroup
	)
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dir := t.TempDir()
			survived, n := true, 0
			var err error
			for _, g := range groups {
				n++
				var ok bool
				if ok, err = passes(t.Context(), pt, dir, m.rules, []string{g.file}, "^"+regexp.QuoteMeta(g.name)+"$"); err != nil || !ok {
					survived = false
					if err == nil {
						t.Logf("caught: %s, by %s: %q", m.name, filepath.Base(g.file), g.name)
					}
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			runs += n
			switch {
			case err != nil:
				errs = append(errs, fmt.Sprintf("%s: %v", m.name, err))
			case survived:
				survivors = append(survivors, m.name)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	slices.Sort(survivors)
	for _, s := range survivors {
		t.Errorf("mutant passes every promtool test: %s", s)
	}
	t.Logf("%d mutants, %d caught, %d promtool runs over %d test groups", len(ms), len(ms)-len(survivors), runs, len(groups))
}

// The mutation patterns find what they should in the generated rules
// (without promtool): a factor, both windows and, where there is one, the
// guard's window in every pair, and a `for` on every alert.
func TestMutantsCoverEveryAlertPair(t *testing.T) {
	src, err := os.ReadFile(filepath.Base(SLORulesPath))
	if err != nil {
		t.Fatal(err)
	}
	ms := mutants(t, src)
	count := map[string]int{}
	for _, m := range ms {
		kind := regexp.MustCompile(`(factor|long window|short window|minEvents window|for|record \S+ window)`).FindString(m.name)
		count[kind]++
	}
	t.Logf("%d mutants: %v", len(ms), count)
	for _, k := range []string{"factor", "long window", "short window", "for"} {
		if count[k] == 0 {
			t.Errorf("no %s mutants", k)
		}
	}
}
