package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Target is one Prometheus query of a dashboard, read back from its JSON
// the way Grafana runs it. The tests check these: they parse, they read
// only metrics the exporter exposes or the bundled rules record, and on a
// real Prometheus they return data.
type Target struct {
	Dashboard   string // uid
	Panel       string // title
	Description string // the panel's
	RefID       string
	Expr        string
	Instant     bool // an instant query (stat, bar gauge, table); else a range query
	Exemplar    bool
}

// String names the target in test failures.
func (t Target) String() string { return fmt.Sprintf("%s / %q / %s", t.Dashboard, t.Panel, t.RefID) }

// Variable is one template variable of a dashboard.
type Variable struct {
	Dashboard string
	Name      string
	Type      string // query, datasource, ...
	Query     string // for query variables, e.g. label_values(metric{...}, label)
	Regex     string // Grafana's /regex/ on the query's values, "" for none
	Hidden    bool
}

// jsRegex is a Grafana variable regex, /pattern/flags.
var jsRegex = regexp.MustCompile(`^/(.*)/([gimsy]*)$`)

// Value is what the variable holds for one value of its query, as Grafana
// computes it (metricNamesToVariableValues in
// public/app/features/variables/query/operations.ts): without a regex the
// value itself; with one, a value it does not match is dropped (ok false)
// and one it matches becomes its first capture group, when it has one.
// Only the flags i, m and s are translated (the patterns the dashboards
// use are RE2 and JavaScript alike).
func (v Variable) Value(s string) (value string, ok bool, err error) {
	if v.Regex == "" {
		return s, true, nil
	}
	m := jsRegex.FindStringSubmatch(v.Regex)
	if m == nil {
		return "", false, fmt.Errorf("variable %s: regex %q is not /pattern/flags", v.Name, v.Regex)
	}
	pattern := m[1]
	if f := strings.Trim(m[2], "gy"); f != "" {
		pattern = "(?" + f + ")" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", false, fmt.Errorf("variable %s: regex %q: %w", v.Name, v.Regex, err)
	}
	match := re.FindStringSubmatch(s)
	switch {
	case match == nil:
		return "", false, nil
	case len(match) > 1:
		return match[1], true, nil
	}
	return s, true, nil
}

// Link is a data link of a panel's column (a field override's links).
type Link struct {
	Dashboard string
	Panel     string // title
	Column    string // the field it is on (override by name)
	URL       string
}

// String names the link in test failures.
func (l Link) String() string {
	return fmt.Sprintf("%s / %q / column %s", l.Dashboard, l.Panel, l.Column)
}

// Parsed is what the tests read from a dashboard's JSON.
type Parsed struct {
	UID       string
	Targets   []Target
	Variables []Variable
	Links     []Link
}

// Parse reads the targets and variables of a dashboard JSON.
func Parse(dashboardJSON []byte) (*Parsed, error) {
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				RefID    string `json:"refId"`
				Expr     string `json:"expr"`
				Instant  bool   `json:"instant"`
				Exemplar bool   `json:"exemplar"`
			} `json:"targets"`
			FieldConfig struct {
				Overrides []struct {
					Matcher struct {
						ID      string `json:"id"`
						Options any    `json:"options"`
					} `json:"matcher"`
					Properties []struct {
						ID    string          `json:"id"`
						Value json.RawMessage `json:"value"`
					} `json:"properties"`
				} `json:"overrides"`
			} `json:"fieldConfig"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
				Regex string `json:"regex"`
				Hide  int    `json:"hide"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	p := &Parsed{UID: d.UID}
	for _, panel := range d.Panels {
		for _, t := range panel.Targets {
			p.Targets = append(p.Targets, Target{
				Dashboard: d.UID, Panel: panel.Title, Description: panel.Description,
				RefID: t.RefID, Expr: t.Expr, Instant: t.Instant, Exemplar: t.Exemplar,
			})
		}
		for _, o := range panel.FieldConfig.Overrides {
			column, _ := o.Matcher.Options.(string)
			for _, prop := range o.Properties {
				if prop.ID != "links" {
					continue
				}
				var links []struct {
					URL string `json:"url"`
				}
				if err := json.Unmarshal(prop.Value, &links); err != nil {
					return nil, fmt.Errorf("dashboard JSON: panel %q: links: %w", panel.Title, err)
				}
				for _, l := range links {
					p.Links = append(p.Links, Link{Dashboard: d.UID, Panel: panel.Title, Column: column, URL: l.URL})
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		q, _ := v.Query.(string) // a datasource variable's query is its plugin type
		p.Variables = append(p.Variables, Variable{Dashboard: d.UID, Name: v.Name, Type: v.Type, Query: q, Regex: v.Regex, Hidden: v.Hide == 2})
	}
	return p, nil
}

// Intervals are the values of Grafana's built-in interval variables.
type Intervals struct {
	RateInterval time.Duration // $__rate_interval
	Interval     time.Duration // $__interval
	Range        time.Duration // $__range
}

// varRef matches Grafana's three variable syntaxes: $name, ${name} or
// ${name:format}, and the deprecated [[name]] or [[name:format]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]`)

// Expand substitutes the variables of expr the way Grafana would with every
// variable of vars set to its All value (.*) and the built-in intervals
// set to iv. A variable that is neither built in nor in vars is an error: a
// misspelt variable would otherwise stay in the query, or match everything.
func Expand(expr string, vars []Variable, iv Intervals) (string, error) {
	known := map[string]bool{}
	for _, v := range vars {
		known[v.Name] = true
	}
	builtin := map[string]string{
		"__rate_interval": model.Duration(iv.RateInterval).String(),
		"__interval":      model.Duration(iv.Interval).String(),
		"__interval_ms":   fmt.Sprint(iv.Interval.Milliseconds()),
		"__range":         model.Duration(iv.Range).String(),
		"__range_s":       fmt.Sprint(int64(iv.Range.Seconds())),
		"__range_ms":      fmt.Sprint(iv.Range.Milliseconds()),
	}
	var errs []string
	out := varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3] // exactly one group matched
		if v, ok := builtin[name]; ok {
			return v
		}
		if known[name] {
			return allValue
		}
		errs = append(errs, ref)
		return ref
	})
	if len(errs) > 0 {
		return "", fmt.Errorf("unknown variables %s in %q", strings.Join(errs, ", "), expr)
	}
	return out, nil
}

// dataField matches Grafana's data link variable of a row's column,
// ${__data.fields.name}.
var dataField = regexp.MustCompile(`\$\{__data\.fields\.(\w+)\}`)

// ExpandLink substitutes a data link's URL the way Grafana does for one
// table row: ${__data.fields.label} from fields (the row's columns by
// label name), then dashboard variables from vars. A reference to a column
// the row lacks, or to an unknown variable, is an error: Grafana would
// leave it in the URL.
func ExpandLink(url string, vars, fields map[string]string) (string, error) {
	var errs []string
	out := dataField.ReplaceAllStringFunc(url, func(ref string) string {
		v, ok := fields[dataField.FindStringSubmatch(ref)[1]]
		if !ok {
			errs = append(errs, ref)
		}
		return v
	})
	out = varRef.ReplaceAllStringFunc(out, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		v, ok := vars[m[1]+m[2]+m[3]]
		if !ok {
			errs = append(errs, ref)
		}
		return v
	})
	if len(errs) > 0 {
		return "", fmt.Errorf("unknown fields or variables %s in %q", strings.Join(errs, ", "), url)
	}
	return out, nil
}

// labelValues matches a label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// LabelValuesQuery splits a label_values(selector, label) variable query;
// ok is false for any other form.
func LabelValuesQuery(q string) (selector, label string, ok bool) {
	m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
