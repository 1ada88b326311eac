package slo

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// FuzzParse reads any document as an SLO file of this project's format
// (seeds: testdata/fuzz/FuzzParse, rules/slos.yaml cut in three and the
// three indicator kinds of the tests); FuzzParseOpenSLO the same with
// OpenSLO seeds (testdata/openslo.yaml). Both check checkSLOFile's
// properties.
func FuzzParse(f *testing.F) { f.Fuzz(checkSLOFile) }

// FuzzParseOpenSLO: see FuzzParse.
func FuzzParseOpenSLO(f *testing.F) { f.Fuzz(checkSLOFile) }

// checkSLOFile parses doc and checks:
//
//   - every error is an *Error naming the file, and a line of the
//     document when it has one;
//   - a file that parses generates rules (GenerateWith, with and without
//     a grouping label), every expression an instant vector of
//     Prometheus' parser, and the rendered rule file is one that
//     Prometheus loads (loadRuleFile: strict, unknown keys, repeated
//     groups, bad names and templates are errors);
//   - its periods and windows are written as Prometheus durations that
//     read back as the same duration.
func checkSLOFile(t *testing.T, doc []byte) {
	if len(doc) > 64<<10 {
		return
	}
	const name = "fuzz.yaml"
	f, err := Parse(name, doc)
	if err != nil {
		checkSLOErrors(t, name, doc, err)
		return
	}
	for i := range f.SLOs {
		s := &f.SLOs[i]
		roundTrip(t, s.Period)
		for _, tier := range []Tier{s.Alerting.Page, s.Alerting.Ticket} {
			for _, w := range tier.Windows {
				roundTrip(t, w.Long)
				roundTrip(t, w.Short)
			}
		}
	}
	for _, o := range []Options{{}, {GroupBy: []string{"cluster"}}} {
		rf, err := GenerateWith(f, o)
		if err != nil {
			t.Fatalf("a file that validates does not generate (%+v): %v\n%s", o, err, doc)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if err := checkPromQL(r.Expr); err != nil {
					t.Errorf("group %s, rule %s%s: %v", g.Name, r.Record, r.Alert, err)
				}
			}
		}
		out, err := rf.YAML(GeneratedHeader("fuzz.yaml", o))
		if err != nil {
			t.Fatal(err)
		}
		if errs := loadRuleFile(out); len(errs) > 0 {
			t.Errorf("Prometheus refuses the generated rules: %v\nSLO file:\n%s", errors.Join(errs...), doc)
		}
	}
}

// checkSLOErrors fails t unless err is a join of *Error for the file, each
// at a line of doc or none.
func checkSLOErrors(t *testing.T, name string, doc []byte, err error) {
	t.Helper()
	lines := yamlLines(doc)
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var se *Error
		switch {
		case !errors.As(e, &se):
			t.Errorf("an error that is not an *Error: %T %v", e, e)
		case se.File != name:
			t.Errorf("error names file %q, want %q: %v", se.File, name, se)
		case se.Line < 0 || se.Line > lines:
			t.Errorf("error at line %d of a document of %d lines: %v", se.Line, lines, se)
		}
	}
}

// yamlLines is the number of lines of doc as YAML counts them: CR LF, CR,
// LF, NEL, LS and PS each end one ("\r0" is two lines).
func yamlLines(doc []byte) int {
	n := 1
	for i := 0; i < len(doc); i++ {
		switch {
		case doc[i] == '\r' && i+1 < len(doc) && doc[i+1] == '\n':
		case doc[i] == '\r', doc[i] == '\n':
			n++
		case bytes.HasPrefix(doc[i:], []byte("\u0085")), bytes.HasPrefix(doc[i:], []byte("\u2028")), bytes.HasPrefix(doc[i:], []byte("\u2029")):
			n++
		}
	}
	return n
}

// roundTrip fails t unless d is written as a duration that reads back as d.
func roundTrip(t *testing.T, d time.Duration) {
	t.Helper()
	if d == 0 {
		return
	}
	back, err := ParseDuration(FormatDuration(d))
	if err != nil || back != d {
		t.Errorf("duration %v written %q reads back as %v, %v", d, FormatDuration(d), back, err)
	}
}

// FuzzDuration: a duration that parses is written back (FormatDuration,
// the windows' names) as one that parses to the same value.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"30d", "28d", "1w", "90m", "1h30m", "5m", "2h", "1y", "0s", "100ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		roundTrip(t, d)
	})
}

// promRuleFile is the rule file format of Prometheus 3 (rulefmt.RuleGroups),
// every key it knows, so that a strict decode refuses the others.
type promRuleFile struct {
	Groups []struct {
		Name        string            `yaml:"name"`
		Interval    string            `yaml:"interval"`
		QueryOffset string            `yaml:"query_offset"`
		Limit       int               `yaml:"limit"`
		Labels      map[string]string `yaml:"labels"`
		Rules       []struct {
			Record        string            `yaml:"record"`
			Alert         string            `yaml:"alert"`
			Expr          string            `yaml:"expr"`
			For           string            `yaml:"for"`
			KeepFiringFor string            `yaml:"keep_firing_for"`
			Labels        map[string]string `yaml:"labels"`
			Annotations   map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// templateFuncs are the names of the functions of Prometheus' alert
// templates (template/template.go), for text/template to parse with.
var templateFuncs = template.FuncMap{}

func init() {
	for _, name := range []string{
		"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml", "match",
		"title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "stripPort", "stripDomain",
		"humanize", "humanize1024", "humanizeDuration", "humanizePercentage", "humanizeTimestamp",
		"toTime", "toDuration", "now", "pathPrefix", "externalURL", "parseDuration", "urlQueryEscape",
	} {
		templateFuncs[name] = func(...any) any { return nil }
	}
}

// loadRuleFile is what Prometheus' rulefmt.Parse checks of a rule file
// (rulefmt.go, Prometheus v0.316.0: RuleGroups.Validate, Rule.Validate,
// testTemplateParsing), done here because rulefmt imports the promql
// engine, whose mmap-go dependency go.sum does not hold: a strict decode,
// group names set and distinct, durations Prometheus parses, one of
// record and alert, an expression that parses, a recording rule without
// annotations or for and a valid name without braces, label and
// annotation names valid in the UTF-8 scheme, label values valid UTF-8,
// and an alerting rule's labels and annotations templates that parse with
// the variables and functions Prometheus defines.
func loadRuleFile(b []byte) (errs []error) {
	var rf promRuleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return []error{err}
	}
	p := parser.NewParser(parser.Options{})
	duration := func(what, s string) {
		if s == "" {
			return
		}
		if _, err := model.ParseDuration(s); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", what, s, err))
		}
	}
	labels := func(where string, m map[string]string) {
		for k, v := range m {
			if !model.UTF8Validation.IsValidLabelName(k) || k == model.MetricNameLabel {
				errs = append(errs, fmt.Errorf("%s: invalid label name %q", where, k))
			}
			if !model.LabelValue(v).IsValid() {
				errs = append(errs, fmt.Errorf("%s: invalid label value %q", where, v))
			}
		}
	}
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" {
			errs = append(errs, errors.New("a group without a name"))
		}
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("group %q is repeated", g.Name))
		}
		seen[g.Name] = true
		duration("group "+g.Name+" interval", g.Interval)
		duration("group "+g.Name+" query_offset", g.QueryOffset)
		labels("group "+g.Name, g.Labels)
		for i, r := range g.Rules {
			where := fmt.Sprintf("group %s, rule %d (%s%s)", g.Name, i+1, r.Record, r.Alert)
			if (r.Record == "") == (r.Alert == "") {
				errs = append(errs, fmt.Errorf("%s: exactly one of record and alert must be set", where))
			}
			if r.Expr == "" {
				errs = append(errs, fmt.Errorf("%s: no expression", where))
			} else if _, err := p.ParseExpr(r.Expr); err != nil {
				errs = append(errs, fmt.Errorf("%s: expression %q: %w", where, r.Expr, err))
			}
			duration(where+" for", r.For)
			duration(where+" keep_firing_for", r.KeepFiringFor)
			labels(where, r.Labels)
			for k := range r.Annotations {
				if !model.UTF8Validation.IsValidLabelName(k) {
					errs = append(errs, fmt.Errorf("%s: invalid annotation name %q", where, k))
				}
			}
			if r.Record != "" {
				if len(r.Annotations) > 0 || r.For != "" || r.KeepFiringFor != "" {
					errs = append(errs, fmt.Errorf("%s: annotations, for or keep_firing_for in a recording rule", where))
				}
				if !model.UTF8Validation.IsValidMetricName(r.Record) || strings.ContainsAny(r.Record, "{}") {
					errs = append(errs, fmt.Errorf("%s: invalid recording rule name", where))
				}
				continue
			}
			for _, m := range []map[string]string{r.Labels, r.Annotations} {
				for k, v := range m {
					if _, err := template.New(k).Funcs(templateFuncs).Option("missingkey=zero").Parse(defs + v); err != nil {
						errs = append(errs, fmt.Errorf("%s: template %s: %w", where, k, err))
					}
				}
			}
		}
	}
	return errs
}
