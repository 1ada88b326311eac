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
	slo   string // sloth_slo of the group, to run its tests first
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
		out = append(out, mutant{name: sloName + ": " + name, slo: sloName, rules: b})
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

// mutationEnv turns the mutation check on: it runs promtool once or more
// per mutant (about 190 of them), 20 to 40 minutes on 2 cores, too long
// for every `go test ./rules/`. make rules-mutation sets it.
const mutationEnv = "KCE_MUTATION"

func TestEveryMutantOfTheSLORulesFailsATest(t *testing.T) {
	if os.Getenv(mutationEnv) == "" {
		t.Skipf("set %s=1 (make rules-mutation): runs promtool once or more per mutant", mutationEnv)
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
	// Cheapest first: a mutant is usually caught by the first file that
	// pins its number, and the day-long tests of exporter.test.yml only
	// pin the `for` of the no-events and exporter alerts.
	order := map[string]int{"slos.test.yml": 0, "burnrate-long.test.yml": 1, "burnrate.test.yml": 2}
	slices.SortStableFunc(files, func(a, b string) int {
		rank := func(f string) int {
			if r, ok := order[filepath.Base(f)]; ok {
				return r
			}
			return len(order)
		}
		return rank(a) - rank(b)
	})
	ms := mutants(t, src)
	if len(ms) < 50 {
		t.Fatalf("only %d mutants: the rule layout changed under the mutation patterns", len(ms))
	}
	// Two at a time: promtool is single-threaded per test file and the
	// machine is shared.
	sem := make(chan struct{}, 2)
	var (
		mu        sync.Mutex
		survivors []string
		errs      []string
		wg        sync.WaitGroup
	)
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dir := t.TempDir()
			survived := true
			var err error
			for _, f := range files {
				var ok bool
				if ok, err = passes(t.Context(), pt, dir, m.rules, []string{f}, ""); err != nil || !ok {
					survived = false
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
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
	t.Logf("%d mutants, %d caught", len(ms), len(ms)-len(survivors))
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
