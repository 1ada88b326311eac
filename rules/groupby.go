package rules

// The hand-written rule files for a central ruler (Thanos Ruler, Mimir's
// ruler) that evaluates the series of several clusters at once: the same
// rewrite `slo generate --group-by` applies to the SLO rules it generates,
// done on the parsed PromQL of files written for one Prometheus per
// cluster. `sum by (webhook, type)` drops the cluster label, so two
// clusters' rates add up; `and on (job, configuration, webhook, type)`
// matches one cluster's finding with the other's info series.

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// File is a rule file by its base name.
type File struct {
	Name string
	Data []byte
}

// HandWritten returns the bundled hand-written rule files (every
// rules/*.rules.yml but the one generated from slos.yaml), in name order.
func HandWritten() ([]File, error) {
	names, err := fs.Glob(ruleFiles, "*.rules.yml") // sorted
	if err != nil {
		return nil, fmt.Errorf("bundled rule files: %w", err)
	}
	var out []File
	for _, name := range names {
		if name == path.Base(SLORulesPath) {
			continue
		}
		b, err := ruleFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("rules/%s: %w", name, err)
		}
		out = append(out, File{Name: name, Data: b})
	}
	return out, nil
}

var groupLabel = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithGroupBy returns files with the labels by added so that every rule
// keeps them, the way `slo generate --group-by` writes the SLO rules:
//
//   - every aggregation keeps them: `sum by (webhook, type)` becomes
//     `sum by (cluster, webhook, type)`, `max (x)` becomes
//     `max by (cluster) (x)`, and `without (...)` no longer lists them;
//   - every match between two vectors that both carry them matches on them:
//     `and on (job, webhook)` becomes `and on (cluster, job, webhook)`,
//     `ignoring (...)` no longer lists them, nor `group_left (...)`;
//   - the queries of annotation and label templates
//     (`printf "...{webhook=%q}" $labels.webhook | query`) get the same
//     rewrite, and every selector that picks series by a $labels value also
//     selects $labels.<label>, so that an annotation of one cluster's alert
//     never reads another cluster's value.
//
// A vector that cannot carry the labels is matched as before: one built by
// vector() or absent() (the controllers file's per-queue thresholds,
// label_replace(vector(Inf), "name", ...)), or a series a rule of files
// records only from such vectors. Those are one table for all clusters,
// and each cluster's series still find their row in it. Any other series
// (scraped, or recorded by a rule outside files) is taken to carry them.
//
// The YAML's comments and layout are kept; the comments still describe the
// rules for one cluster, hence the header out puts in front.
func WithGroupBy(files []File, by []string) ([]File, error) {
	for _, l := range by {
		if !groupLabel.MatchString(l) || strings.HasPrefix(l, "__") || l == "le" {
			return nil, fmt.Errorf("group-by %q: not a label the rules can group by", l)
		}
	}
	w := &rewriter{by: by, records: map[string][]parser.Expr{}, carries: map[string]bool{}}
	docs := make([]*yaml.Node, len(files))
	for i, f := range files {
		var doc yaml.Node
		if err := yaml.Unmarshal(f.Data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		docs[i] = &doc
		err := eachRule(&doc, func(rule *yaml.Node) error {
			rec, expr := field(rule, "record"), field(rule, "expr")
			if rec == nil || expr == nil {
				return nil
			}
			e, err := parseExpr(expr.Value)
			if err != nil {
				return fmt.Errorf("record %s: %w", rec.Value, err)
			}
			w.records[rec.Value] = append(w.records[rec.Value], e)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	out := make([]File, len(files))
	for i, f := range files {
		b, err := w.rewriteFile(f.Data, docs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		header := fmt.Sprintf("# Generated from the bundled rules/%s with the labels %s kept by every\n"+
			"# aggregation and matched by every join, for a central ruler\n"+
			"# (kube-convergence-exporter slo generate --group-by %s --bundled-rules DIR).\n"+
			"# DO NOT EDIT. The comments below are the original's: they describe the rules\n"+
			"# of one Prometheus per cluster.\n",
			f.Name, strings.Join(by, ", "), strings.Join(by, " --group-by "))
		out[i] = File{Name: f.Name, Data: append([]byte(header), b...)}
	}
	return out, nil
}

// rewriteFile edits src, a rule file, in place: the lines of each expr and
// the templates' queries, so that the output is src with the labels added
// and nothing else changed (layout, comments, blank lines). The output is
// parsed again and must hold the rewritten values.
func (w *rewriter) rewriteFile(src []byte, doc *yaml.Node) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	vals := ruleValues(doc)
	want := make([]string, len(vals))
	for i, v := range vals {
		var err error
		if v.key == "expr" {
			if want[i], err = w.rewriteExpr(v.node.Value, nil); err == nil {
				err = replaceScalar(lines, v.node, want[i])
			}
		} else {
			want[i], err = w.rewriteTemplate(v.node.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", v.rule, v.key, err)
		}
	}
	// A template's query is written on one line (checked below): rewrite
	// it where it stands, outside comments.
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		var err error
		if lines[i], err = w.rewriteTemplate(l); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	out := []byte(strings.Join(lines, "\n"))
	var got yaml.Node
	if err := yaml.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("rewritten: %w", err)
	}
	have := ruleValues(&got)
	if len(have) != len(vals) {
		return nil, fmt.Errorf("rewritten: %d values, want %d", len(have), len(vals))
	}
	for i, v := range vals {
		if have[i].rule != v.rule || have[i].key != v.key || have[i].node.Value != want[i] {
			return nil, fmt.Errorf("%s: %s rewritten in place reads\n%s\nnot\n%s", v.rule, v.key, have[i].node.Value, want[i])
		}
	}
	return out, nil
}

// A ruleValue is the expr, an annotation or a label of a rule.
type ruleValue struct {
	rule, key string // "alert X", "annotations description"
	node      *yaml.Node
}

func ruleValues(doc *yaml.Node) []ruleValue {
	var out []ruleValue
	_ = eachRule(doc, func(rule *yaml.Node) error {
		name := "record " + value(field(rule, "record"))
		if a := field(rule, "alert"); a != nil {
			name = "alert " + a.Value
		}
		if expr := field(rule, "expr"); expr != nil {
			out = append(out, ruleValue{name, "expr", expr})
		}
		for _, key := range []string{"annotations", "labels"} {
			if m := field(rule, key); m != nil && m.Kind == yaml.MappingNode {
				for j := 1; j < len(m.Content); j += 2 {
					out = append(out, ruleValue{name, key + " " + m.Content[j-1].Value, m.Content[j]})
				}
			}
		}
		return nil
	})
	return out
}

// replaceScalar replaces in lines the text of the scalar n, a plain
// scalar on one line or a literal block, by s, which has as many lines.
func replaceScalar(lines []string, n *yaml.Node, s string) error {
	old, repl := strings.Split(n.Value, "\n"), strings.Split(s, "\n")
	if len(old) != len(repl) {
		return fmt.Errorf("%d lines rewritten as %d", len(old), len(repl))
	}
	switch n.Style {
	case 0: // plain
		i, c := n.Line-1, n.Column-1
		if len(old) != 1 || i >= len(lines) || !strings.HasPrefix(lines[i][c:], n.Value) {
			return fmt.Errorf("line %d: not found as written", n.Line)
		}
		lines[i] = lines[i][:c] + s + lines[i][c+len(n.Value):]
		return nil
	case yaml.LiteralStyle:
		first := n.Line // the line after the indicator's, 0-based
		if first+len(old) > len(lines) {
			return fmt.Errorf("line %d: block past the end", n.Line)
		}
		indent := lines[first][:len(lines[first])-len(strings.TrimLeft(lines[first], " "))]
		for k, o := range old {
			blank := o == "" && strings.TrimSpace(lines[first+k]) == ""
			if lines[first+k] != indent+o && !blank {
				return fmt.Errorf("line %d: not found as written", first+k+1)
			}
			if repl[k] != "" {
				lines[first+k] = indent + repl[k]
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: only plain and literal (|) exprs can be rewritten", n.Line)
}

// eachRule calls f with every rule mapping of a rule file document.
func eachRule(doc *yaml.Node, f func(rule *yaml.Node) error) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	groups := field(doc.Content[0], "groups")
	if groups == nil {
		return nil
	}
	for _, g := range groups.Content {
		rules := field(g, "rules")
		if rules == nil {
			continue
		}
		for _, r := range rules.Content {
			if err := f(r); err != nil {
				return fmt.Errorf("group %s: %w", value(field(g, "name")), err)
			}
		}
	}
	return nil
}

func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func value(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

func parseExpr(s string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(s)
}

type rewriter struct {
	by      []string
	records map[string][]parser.Expr // the rules' exprs by the series they record
	carries map[string]bool          // records known to carry the labels, or not
}

// An edit replaces text[start:end] of a query with text.
type edit struct {
	start, end int
	text       string
}

// rewriteExpr returns the query s rewritten. The rewrite is done twice: on
// the parsed query (what it means) and on its text (what is written, so
// that the output keeps the original's layout and diffs against it by the
// added labels only), and the two must parse alike.
func (w *rewriter) rewriteExpr(s string, sel func(*parser.VectorSelector) bool) (string, error) {
	e, err := parseExpr(s)
	if err != nil {
		return "", err
	}
	var edits []edit
	w.rewrite(e, s, sel, &edits)
	slices.SortFunc(edits, func(a, b edit) int { return b.start - a.start })
	out := s
	for _, ed := range edits {
		out = out[:ed.start] + ed.text + out[ed.end:]
	}
	got, err := parseExpr(out)
	if err != nil {
		return "", fmt.Errorf("rewritten as %s: %w", out, err)
	}
	if normalized(got) != normalized(e) {
		return "", fmt.Errorf("rewritten as %s, which reads %s, not %s", out, normalized(got), normalized(e))
	}
	return out, nil
}

// normalized prints e with its matchers in name order.
func normalized(e parser.Expr) string {
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			slices.SortFunc(vs.LabelMatchers, func(a, b *labels.Matcher) int { return strings.Compare(a.Name, b.Name) })
		}
		return nil
	})
	return e.String()
}

var (
	groupingClause = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)
	matchingClause = regexp.MustCompile(`\b(on|ignoring)\s*\(([^)]*)\)`)
	includeClause  = regexp.MustCompile(`\b(group_left|group_right)\s*\(([^)]*)\)`)
	aggregationOp  = regexp.MustCompile(`^\s*[a-zA-Z_]+`)
)

// relist records the edit of the label list of the first clause re
// matches in text[from:to], to list; it reports whether there was one.
func relist(edits *[]edit, text string, from, to int, re *regexp.Regexp, list []string) bool {
	if from < 0 || to > len(text) || from > to {
		return false
	}
	m := re.FindStringSubmatchIndex(text[from:to])
	if m == nil {
		return false
	}
	*edits = append(*edits, edit{start: from + m[4], end: from + m[5], text: strings.Join(list, ", ")})
	return true
}

func (w *rewriter) drop(list []string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(l string) bool { return slices.Contains(w.by, l) })
}

func pos(n parser.Node) (int, int) {
	r := n.PositionRange()
	return int(r.Start), int(r.End)
}

// rewrite adds the labels to the aggregations and joins of n, and to the
// selectors for which sel returns true (nil: none), both in n and as edits
// of text, n's query; it reports whether the vectors n gives carry the
// labels.
func (w *rewriter) rewrite(n parser.Node, text string, sel func(*parser.VectorSelector) bool, edits *[]edit) bool {
	switch n := n.(type) {
	case *parser.VectorSelector:
		c := w.recordCarries(n.Name)
		if c && sel != nil && sel(n) {
			var add []*labels.Matcher
			var written []string
			for _, l := range w.by {
				if !slices.ContainsFunc(n.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == l }) {
					m := labels.MustNewMatcher(labels.MatchEqual, l, labelPlaceholder(l))
					add = append(add, m)
					written = append(written, m.String())
				}
			}
			start, end := pos(n)
			if i := strings.IndexByte(text[start:end], '{'); i >= 0 && len(add) > 0 {
				n.LabelMatchers = append(n.LabelMatchers, add...)
				*edits = append(*edits, edit{start: start + i + 1, end: start + i + 1, text: strings.Join(written, ", ") + ", "})
			}
		}
		return c
	case *parser.MatrixSelector:
		return w.rewrite(n.VectorSelector, text, sel, edits)
	case *parser.SubqueryExpr:
		return w.rewrite(n.Expr, text, sel, edits)
	case *parser.ParenExpr:
		return w.rewrite(n.Expr, text, sel, edits)
	case *parser.UnaryExpr:
		return w.rewrite(n.Expr, text, sel, edits)
	case *parser.StepInvariantExpr:
		return w.rewrite(n.Expr, text, sel, edits)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return false
	case *parser.AggregateExpr:
		first := n.Expr
		if n.Param != nil {
			w.rewrite(n.Param, text, sel, edits)
			first = n.Param
		}
		c := w.rewrite(n.Expr, text, sel, edits)
		start, end := pos(n)
		headEnd, _ := pos(first)
		_, exprEnd := pos(n.Expr)
		if n.Without {
			n.Grouping = w.drop(n.Grouping)
		} else {
			n.Grouping = w.prepend(n.Grouping)
		}
		// sum by (a) (x), or sum (x) by (a); sum (x) has no clause.
		if !relist(edits, text, start, headEnd, groupingClause, n.Grouping) &&
			!relist(edits, text, exprEnd, end, groupingClause, n.Grouping) && !n.Without {
			op := aggregationOp.FindStringIndex(text[start:headEnd])
			if op != nil {
				at := start + op[1]
				*edits = append(*edits, edit{start: at, end: at, text: " by (" + strings.Join(n.Grouping, ", ") + ")" + spaceUnless(text[at:], " ")})
			}
		}
		return c
	case *parser.Call:
		// A function's series are those of its first vector or range
		// argument (rate, label_replace, histogram_quantile's second).
		c, seen := false, false
		for _, a := range n.Args {
			ac := w.rewrite(a, text, sel, edits)
			if t := a.Type(); (t == parser.ValueTypeVector || t == parser.ValueTypeMatrix) && !seen {
				c, seen = ac, true
			}
		}
		switch n.Func.Name {
		case "vector", "absent", "absent_over_time":
			return false // a series of its own, with the selector's equality matchers at most
		}
		return c
	case *parser.BinaryExpr:
		l, r := w.rewrite(n.LHS, text, sel, edits), w.rewrite(n.RHS, text, sel, edits)
		if n.LHS.Type() != parser.ValueTypeVector || n.RHS.Type() != parser.ValueTypeVector {
			return l || r // the vector side's
		}
		if vm := n.VectorMatching; vm != nil && l && r {
			_, from := pos(n.LHS)
			to, _ := pos(n.RHS)
			if vm.On {
				vm.MatchingLabels = w.prepend(vm.MatchingLabels)
			} else {
				vm.MatchingLabels = w.drop(vm.MatchingLabels)
			}
			relist(edits, text, from, to, matchingClause, vm.MatchingLabels)
			vm.Include = w.drop(vm.Include)
			relist(edits, text, from, to, includeClause, vm.Include)
		}
		switch {
		case n.Op == parser.LOR:
			return l && r // a series of either side
		case n.VectorMatching != nil && n.VectorMatching.Card == parser.CardOneToMany:
			return r
		default:
			return l
		}
	}
	return true
}

func spaceUnless(rest, prefix string) string {
	if strings.HasPrefix(rest, prefix) {
		return ""
	}
	return " "
}

// prepend returns list with the labels in front, each once.
func (w *rewriter) prepend(list []string) []string {
	out := slices.Clone(w.by)
	for _, l := range list {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// recordCarries reports whether the series name carries the labels: no
// when every rule of the files that records it builds it from vectors
// that do not; yes for anything else.
func (w *rewriter) recordCarries(name string) bool {
	exprs, ok := w.records[name]
	if !ok {
		return true
	}
	if c, ok := w.carries[name]; ok {
		return c
	}
	w.carries[name] = true // a record that reads itself: a cycle Prometheus refuses anyway
	c := false
	for _, e := range exprs {
		// A parsed copy: the rewrite of the rule itself is done when its
		// rule is rewritten.
		cp, err := parseExpr(e.String())
		var scratch []edit
		if err == nil && w.rewrite(cp, cp.String(), nil, &scratch) {
			c = true
		}
	}
	w.carries[name] = c
	return c
}

// printfQuery is a template's query on an alert's labels:
// printf "<PromQL with %q>" $labels.a $labels.b | query.
var printfQuery = regexp.MustCompile(`printf\s+("(?:[^"\\]|\\.)*")((?:\s+\$[A-Za-z0-9_.]+)*)\s*\|\s*query\b`)

const placeholderPrefix = "__kce_groupby_"

func argPlaceholder(i int) string      { return placeholderPrefix + "arg" + strconv.Itoa(i) + "__" }
func labelPlaceholder(l string) string { return placeholderPrefix + "label_" + l + "__" }
func isPlaceholder(m *labels.Matcher) bool {
	return strings.HasPrefix(m.Value, placeholderPrefix+"arg")
}

var placeholder = regexp.MustCompile(`"` + placeholderPrefix + `(arg([0-9]+)|label_([a-zA-Z0-9_]+?))__"`)

// rewriteTemplate rewrites the query of every printf ... | query in a
// template: its PromQL as rule exprs are rewritten, and a matcher on each
// label for every selector that has a matcher on an argument.
func (w *rewriter) rewriteTemplate(tmpl string) (string, error) {
	var failed error
	out := printfQuery.ReplaceAllStringFunc(tmpl, func(m string) string {
		sub := printfQuery.FindStringSubmatch(m)
		format, err := strconv.Unquote(sub[1])
		if err != nil {
			failed = fmt.Errorf("%s: %w", sub[1], err)
			return m
		}
		args := strings.Fields(sub[2])
		// %q in a query is a PromQL string: replace each by a string the
		// parser keeps, and find it again in the printed query.
		var b strings.Builder
		n := 0
		for i := 0; i < len(format); i++ {
			if format[i] != '%' {
				b.WriteByte(format[i])
				continue
			}
			if i+1 >= len(format) || format[i+1] != 'q' {
				failed = fmt.Errorf("%s: only %%q verbs can be rewritten", sub[1])
				return m
			}
			i++
			b.WriteString(strconv.Quote(argPlaceholder(n)))
			n++
		}
		if n != len(args) {
			failed = fmt.Errorf("%s: %d verbs, %d arguments", sub[1], n, len(args))
			return m
		}
		q, err := w.rewriteExpr(b.String(), func(vs *parser.VectorSelector) bool { return slices.ContainsFunc(vs.LabelMatchers, isPlaceholder) })
		if err != nil {
			failed = fmt.Errorf("query %s: %w", sub[1], err)
			return m
		}
		var newArgs []string
		q = placeholder.ReplaceAllStringFunc(q, func(p string) string {
			ps := placeholder.FindStringSubmatch(p)
			if ps[2] != "" {
				i, _ := strconv.Atoi(ps[2])
				newArgs = append(newArgs, args[i])
			} else {
				newArgs = append(newArgs, "$labels."+ps[3])
			}
			return "%q"
		})
		return "printf " + strconv.Quote(q) + " " + strings.Join(newArgs, " ") + " | query"
	})
	return out, failed
}
