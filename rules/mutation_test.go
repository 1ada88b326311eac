package rules

// Mutation check of the generated SLO rules (the rule math pinned):
// every burn-rate factor, every window an alert or a ratio record
// reads and every `for` is perturbed, one at a time, in the generated rule
// file, and the promtool unit tests must fail on each mutant. A mutant
// that passes names a number no test pins.
//
// Only the expressions and `for` change, never the annotations: a mutant
// caught only because its description reads differently would prove
// nothing about the math.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	group int    // the index of the mutated rule group
	alone []byte // the mutated rule group alone, as a rule file
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
		alone, err := (&slo.RuleFile{Groups: cp.Groups[gi : gi+1]}).YAML("")
		if err != nil {
			t.Fatal(err)
		}
		sloName := strings.TrimPrefix(rf.Groups[gi].Name, "slo-kube-convergence-")
		out = append(out, mutant{name: sloName + ": " + name, rules: b, group: gi, alone: alone})
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
				// Every other range an alert reads (the no-events ticket's
				// max_over_time window, the scrape-error window): half and
				// double, what a wrong unit or a copied line would put there.
				for _, m := range rangeSel.FindAllStringSubmatch(r.Expr, -1) {
					d, err := slo.ParseDuration(m[1])
					if err != nil {
						t.Fatal(err)
					}
					for _, nd := range []time.Duration{d / 2, 2 * d} {
						n := slo.FormatDuration(nd)
						emit(gi, ri, fmt.Sprintf("%s range [%s] -> [%s]", r.Alert, m[1], n), func(r *slo.Rule) {
							r.Expr = strings.ReplaceAll(r.Expr, m[0], "["+n+"]")
						})
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
						emit(gi, ri, fmt.Sprintf("%s for %s -> %q", cmp.Or(tier, r.Alert), r.For, n), func(r *slo.Rule) { r.For = n })
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

// passes runs promtool on tests (file name -> content) with rules as the
// SLO rule file they load; run selects test groups by name ("" all). Safe
// to call from several goroutines with different dirs.
func passes(ctx context.Context, pt, dir string, rules []byte, tests map[string][]byte, run string) (bool, error) {
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
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		dst := filepath.Join(dir, "tests", name)
		if err := os.WriteFile(dst, tests[name], 0o644); err != nil {
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
	if exitErr := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exitErr) {
		return false, fmt.Errorf("promtool: %w", err)
	}
	return err == nil, nil
}

// readTests reads test files into what passes takes.
func readTests(t *testing.T, files []string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// mutationEnv turns the mutation check on: it runs promtool up to once
// per test group and mutant (about 200 mutants), minutes on 2 cores, too
// long for every `go test ./rules/`. make rules-mutation sets it.
const mutationEnv = "KCE_MUTATION"

// A mutant changes one rule group, and the rule groups are independent
// (each reads only the exporter's series and its own records). So a mutant
// is tested against its group alone, with each test group pruned to the
// expectations on that group's output: as strict as the whole file for
// that group, and several times cheaper to evaluate (promtool evaluates
// every rule of the file at every step).

// groupInfo is what a rule group produces.
type groupInfo struct {
	slo    string // the sloth_slo of its rules; "" for the exporter's alerts
	alerts map[string]bool
}

func groupInfos(rf slo.RuleFile) []groupInfo {
	out := make([]groupInfo, len(rf.Groups))
	for i, g := range rf.Groups {
		out[i].alerts = map[string]bool{}
		for _, r := range g.Rules {
			if r.Labels["sloth_slo"] != "" {
				out[i].slo = r.Labels["sloth_slo"]
			}
			if r.Alert != "" {
				out[i].alerts[r.Alert] = true
			}
		}
	}
	return out
}

var (
	sloLabel   = regexp.MustCompile(`sloth_slo="([^"]*)"`)
	sloIDLabel = regexp.MustCompile(`sloth_id="kube-convergence-([^"]*)"`)
	alertLabel = regexp.MustCompile(`alertname="([^"]*)"`)
)

// owner returns the rule group that produces a sample with these labels,
// read from the labels or, when they name none, from a query that names
// exactly one SLO; -1 when it cannot tell.
func owner(groups []groupInfo, labels, expr string) int {
	bySLO := func(name string) int {
		return slices.IndexFunc(groups, func(g groupInfo) bool { return g.slo != "" && g.slo == name })
	}
	if m := sloLabel.FindStringSubmatch(labels); m != nil {
		return bySLO(m[1])
	}
	if m := sloIDLabel.FindStringSubmatch(labels); m != nil {
		return bySLO(m[1])
	}
	if m := alertLabel.FindStringSubmatch(labels); m != nil {
		return slices.IndexFunc(groups, func(g groupInfo) bool { return g.alerts[m[1]] })
	}
	if ms := sloLabel.FindAllStringSubmatch(expr, -1); len(ms) == 1 {
		return bySLO(ms[0][1])
	}
	return -1
}

var (
	exactSelection = regexp.MustCompile(`(sloth_slo|alertname)="([^"]*)"|sloth_id="kube-convergence-([^"]*)"|sloth_slo=~"([^"]*)"`)
)

// mentions reports whether a query that expects nothing could select an
// output of group g: unless it names by exact value (or an alternation)
// only other SLOs or alerts. Such entries are kept for every group either
// way (group g alone must still produce nothing); this only decides
// whether the test group is worth running for g.
func mentions(g groupInfo, expr string) bool {
	ms := exactSelection.FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 {
		return true
	}
	for _, m := range ms {
		names := []string{m[2], m[3]}
		names = append(names, strings.Split(m[4], "|")...)
		for _, n := range names {
			if n != "" && (n == g.slo || g.alerts[n]) {
				return true
			}
		}
	}
	return false
}

// prune keeps, of one promtool test group, the expectations on group gi's
// output. relevant: something is left that gi's rules can fail. ok: false
// when an expected sample's group cannot be told (the test group must then
// run against the whole rule file).
func prune(tc map[string]any, gi int, groups []groupInfo) (out map[string]any, relevant, ok bool) {
	out = maps.Clone(tc)
	var alerts []any
	for _, a := range asList(tc["alert_rule_test"]) {
		if name, _ := asMap(a)["alertname"].(string); groups[gi].alerts[name] {
			alerts = append(alerts, a)
		}
	}
	var exprs []any
	mentioned := false
	for _, e := range asList(tc["promql_expr_test"]) {
		em := maps.Clone(asMap(e))
		expr, _ := em["expr"].(string)
		samples := asList(em["exp_samples"])
		if len(samples) == 0 {
			exprs = append(exprs, em)
			mentioned = mentioned || mentions(groups[gi], expr)
			continue
		}
		var kept []any
		for _, sm := range samples {
			labels, _ := asMap(sm)["labels"].(string)
			switch o := owner(groups, labels, expr); {
			case o < 0:
				return nil, false, false
			case o == gi:
				kept = append(kept, sm)
			}
		}
		// Samples of other groups only: gi must add none.
		em["exp_samples"] = kept
		exprs = append(exprs, em)
		mentioned = mentioned || len(kept) > 0 || mentions(groups[gi], expr)
	}
	delete(out, "alert_rule_test")
	delete(out, "promql_expr_test")
	if len(alerts) > 0 {
		out["alert_rule_test"] = alerts
	}
	if len(exprs) > 0 {
		out["promql_expr_test"] = exprs
	}
	return out, len(alerts) > 0 || mentioned, true
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// testGroup is one promtool test group to run a mutant against: alone, in
// a file of its own pruned to the mutated rule group's expectations, or
// (not alone) the original against the whole mutated rule file.
type testGroup struct {
	file, name string
	tests      map[string][]byte
	alone      bool
	cost       time.Duration // the last evaluation time
}

// testGroupsFor lists the test groups that can catch a mutant of rule
// group gi, cheapest first: a mutant is caught by the first group that
// fails, so the usual mutant costs a few short runs.
func testGroupsFor(t *testing.T, files []string, gi int, groups []groupInfo) []testGroup {
	t.Helper()
	var out []testGroup
	for _, f := range files {
		var tf map[string]any
		readYAML(t, f, &tf)
		orig, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range asList(tf["tests"]) {
			tcm := asMap(tc)
			name, _ := tcm["name"].(string)
			g := testGroup{file: filepath.Base(f), name: name}
			for _, k := range []string{"alert_rule_test", "promql_expr_test"} {
				for _, e := range asList(tcm[k]) {
					at, _ := asMap(e)["eval_time"].(string)
					d, err := slo.ParseDuration(at)
					if err != nil {
						t.Fatalf("%s: %s: eval_time %q: %v", f, name, at, err)
					}
					g.cost = max(g.cost, d)
				}
			}
			pruned, relevant, ok := prune(tcm, gi, groups)
			switch {
			case !ok:
				g.tests = map[string][]byte{g.file: orig}
			case !relevant:
				continue
			default:
				one := maps.Clone(tf)
				one["tests"] = []any{pruned}
				b, err := yaml.Marshal(one)
				if err != nil {
					t.Fatal(err)
				}
				g.alone, g.tests = true, map[string][]byte{g.file: b}
			}
			out = append(out, g)
		}
	}
	slices.SortStableFunc(out, func(a, b testGroup) int { return int(a.cost - b.cost) })
	return out
}

// run runs one test group against a mutated rule file: rules is the whole
// file, alone the mutated group by itself.
func (g testGroup) run(ctx context.Context, pt, dir string, rules, alone []byte) (bool, error) {
	r := rules
	if g.alone {
		r = alone
	}
	return passes(ctx, pt, dir, r, g.tests, "^"+regexp.QuoteMeta(g.name)+"$")
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
	var rf slo.RuleFile
	if err := yaml.Unmarshal(src, &rf); err != nil {
		t.Fatal(err)
	}
	files := sloTestFiles(t)
	if ok, err := passes(t.Context(), pt, t.TempDir(), src, readTests(t, files), ""); err != nil || !ok {
		t.Fatalf("the unmutated rules fail their tests (%v)", err)
	}
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
	known := readCatches(t)
	survivors, caught, runs := runMutants(t, pt, rf, files, ms, known)
	for _, s := range survivors {
		t.Errorf("mutant passes every promtool test: %s", s)
	}
	t.Logf("%d mutants, %d caught, %d promtool runs", len(ms), len(ms)-len(survivors), runs)
	// A selected run (KCE_MUTATION=<regexp>) updates its mutants' rows;
	// a whole run rewrites the table, so that mutants that no longer exist
	// leave it.
	if os.Getenv(mutationEnv) != "1" {
		maps.Copy(known, caught)
		caught = known
	}
	writeCatches(t, caught)
}

// catchesPath records, for every mutant, the test group that caught it in
// the last whole run (make rules-mutation writes it): a rerun tries that
// group first, and go test ./rules/ checks a sample against it.
const catchesPath = "testdata/mutants.tsv"

// catch is where a mutant was caught: a test file and group.
type catch struct{ file, group string }

func readCatches(t *testing.T) map[string]catch {
	t.Helper()
	out := map[string]catch{}
	b, err := os.ReadFile(catchesPath)
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("%s:%d: want mutant, test file and test group separated by tabs", catchesPath, n+1)
		}
		out[f[0]] = catch{f[1], f[2]}
	}
	return out
}

func writeCatches(t *testing.T, c map[string]catch) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Written by make rules-mutation (rules/mutation_test.go): each mutant of the\n# generated SLO rules, and the promtool test file and group that caught it.\n")
	for _, m := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", m, c[m].file, c[m].group)
	}
	if err := os.WriteFile(catchesPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// suffix is a mutant's name without its rule group: the three 30-day SLOs
// are generated alike and share their tests, so the test group that caught
// "rollout-available: page pair 1 factor 14.4 -> 12.24" is the first to
// try on the same mutant of observed-generation-lag.
func suffix(name string) string {
	_, s, _ := strings.Cut(name, ": ")
	return s
}

// runMutants runs each mutant against the test groups that can catch it
// and returns the names of those no test group fails, and where each of
// the others was caught. Each mutant tries first the group recorded in
// known, then the groups that caught the same change in another rule
// group, then those that caught most in its own, then the rest, cheapest
// first. A pruned test group that catches a mutant must pass against its
// unmutated rule group (checked once per pair): a pruning that failed it
// would catch mutants it should not.
func runMutants(t *testing.T, pt string, rf slo.RuleFile, files []string, ms []mutant, known map[string]catch) (survivors []string, caught map[string]catch, runs int) {
	t.Helper()
	groups := groupInfos(rf)
	byGroup := map[int][]testGroup{}
	unmutated := map[int][]byte{}
	for _, m := range ms {
		if _, ok := byGroup[m.group]; ok {
			continue
		}
		byGroup[m.group] = testGroupsFor(t, files, m.group, groups)
		b, err := (&slo.RuleFile{Groups: rf.Groups[m.group : m.group+1]}).YAML("")
		if err != nil {
			t.Fatal(err)
		}
		unmutated[m.group] = b
	}
	var (
		mu       sync.Mutex
		errs     []string
		wg       sync.WaitGroup
		verified = map[string]bool{}
		bySuffix = map[string]catch{}
		hits     = map[int]map[catch]int{}
	)
	caught = map[string]catch{}
	for name, c := range known {
		bySuffix[suffix(name)] = c
	}
	verify := func(gi int, g testGroup) {
		key := fmt.Sprint(gi, g.file, g.name)
		mu.Lock()
		done := verified[key]
		verified[key] = true
		mu.Unlock()
		if !g.alone || done {
			return
		}
		if ok, err := g.run(t.Context(), pt, t.TempDir(), nil, unmutated[gi]); err != nil || !ok {
			t.Errorf("%s: %q pruned to %s fails against the unmutated group (%v): the pruning is wrong", g.file, g.name, rf.Groups[gi].Name, err)
		}
	}
	order := func(m mutant) []testGroup {
		mu.Lock()
		defer mu.Unlock()
		rank := func(g testGroup) int {
			c := catch{g.file, g.name}
			switch {
			case known[m.name] == c:
				return -3 << 20
			case bySuffix[suffix(m.name)] == c:
				return -2 << 20
			}
			return -hits[m.group][c]
		}
		out := slices.Clone(byGroup[m.group])
		slices.SortStableFunc(out, func(a, b testGroup) int { return rank(a) - rank(b) })
		return out
	}
	// Two at a time: promtool is single-threaded and the machine is
	// shared.
	sem := make(chan struct{}, 2)
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dir := t.TempDir()
			n := 0
			var (
				err error
				by  *testGroup
			)
			for _, g := range order(m) {
				n++
				var ok bool
				if ok, err = g.run(t.Context(), pt, dir, m.rules, m.alone); err != nil || !ok {
					if err == nil {
						verify(m.group, g)
						by = &g
						t.Logf("caught: %s, by %s: %q", m.name, g.file, g.name)
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
			case by == nil:
				survivors = append(survivors, m.name)
			default:
				c := catch{by.file, by.name}
				caught[m.name] = c
				bySuffix[suffix(m.name)] = c
				if hits[m.group] == nil {
					hits[m.group] = map[catch]int{}
				}
				hits[m.group][c]++
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	slices.Sort(survivors)
	return survivors, caught, runs
}

// mutantKind is the kind of number a mutant changes: factor, long window,
// short window, minEvents window, for, range, or a record's window.
var mutantKind = regexp.MustCompile(`(factor|long window|short window|minEvents window|for|record \S+ window|range)`)

// TestRecordedMutantsFailATest runs in every go test ./rules/ (so in make
// test): every mutant of the generated rules must have a recorded catch
// (rules changed since the last make rules-mutation: run it), and the
// first mutant of each kind in each rule group must still fail the test
// group recorded as catching it (a test change that leaves a kind of
// number unpinned fails here, in one promtool run per sampled mutant).
func TestRecordedMutantsFailATest(t *testing.T) {
	if os.Getenv(mutationEnv) != "" {
		t.Skip("the whole mutation run is on")
	}
	pt := promtool(t)
	src, err := os.ReadFile(filepath.Base(SLORulesPath))
	if err != nil {
		t.Fatal(err)
	}
	var rf slo.RuleFile
	if err := yaml.Unmarshal(src, &rf); err != nil {
		t.Fatal(err)
	}
	known := readCatches(t)
	seen := map[string]bool{}
	var sample []mutant
	for _, m := range mutants(t, src) {
		if _, ok := known[m.name]; !ok {
			t.Errorf("no recorded catch for mutant %q: the rules or their tests changed since the last whole run (make rules-mutation writes %s)", m.name, catchesPath)
			continue
		}
		kind, _, _ := strings.Cut(mutantKind.FindString(m.name), " ")
		if key := fmt.Sprint(m.group, kind); !seen[key] {
			seen[key] = true
			sample = append(sample, m)
		}
	}
	if t.Failed() {
		return
	}
	groups := groupInfos(rf)
	files := sloTestFiles(t)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, m := range sample {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := known[m.name]
			i := slices.IndexFunc(testGroupsFor(t, files, m.group, groups), func(g testGroup) bool { return g.file == c.file && g.name == c.group })
			if i < 0 {
				t.Errorf("mutant %q: its recorded test group %s %q is gone or no longer reads its rule group: run make rules-mutation", m.name, c.file, c.group)
				return
			}
			g := testGroupsFor(t, files, m.group, groups)[i]
			ok, err := g.run(t.Context(), pt, t.TempDir(), m.rules, m.alone)
			switch {
			case err != nil:
				t.Error(err)
			case ok:
				t.Errorf("mutant %q passes %s %q, which caught it in the last whole run: a test no longer pins it (make rules-mutation finds whether another does)", m.name, c.file, c.group)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d sampled mutants checked against their recorded test group", len(sample))
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
		kind := mutantKind.FindString(m.name)
		count[kind]++
	}
	t.Logf("%d mutants: %v", len(ms), count)
	for _, k := range []string{"factor", "long window", "short window", "for", "range"} {
		if count[k] == 0 {
			t.Errorf("no %s mutants", k)
		}
	}
}
