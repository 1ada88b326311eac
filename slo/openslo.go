package slo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// openSLOVersion is the only OpenSLO version read. Sloth reads v1alpha
// only (its OpenSLO plugin parses openslo/v1alpha); v1 is the stable one.
const openSLOVersion = "openslo/v1"

// What of OpenSLO v1 is read (docs/slo.md has the same list):
//
//   - kind SLO with an inline indicator or an indicatorRef to a kind SLI
//     document of the same file, and kind Service (read, not used);
//   - ratioMetric (good or bad, and total) with budgetingMethod Occurrences
//     -> a ratio SLI; queries of type Prometheus, either a counter selector
//     (counter: true, wrapped in rate()) or an expression with {{.window}};
//   - thresholdMetric with budgetingMethod Occurrences or Timeslices (1m
//     slices) -> a good-minutes SLI: a minute is bad when the query
//     breaks the objective's op and value;
//   - one rolling timeWindow; every objective becomes one SLO (named
//     <name>-<displayName or index> when there are several).
//
// Anything else is an error naming the line, never silently ignored:
// calendar windows, RatioTimeslices, raw ratios, alertPolicies (the
// generator's page and ticket tiers apply), composite objectives,
// metricSourceRef and DataSource documents.

type openSLOMeta struct {
	Name        string                `yaml:"name"`
	DisplayName string                `yaml:"displayName"`
	Labels      map[string]valuesYAML `yaml:"labels"`
	Annotations map[string]string     `yaml:"annotations"`
}

type openSLOHeader struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   openSLOMeta `yaml:"metadata"`
}

type openSLOService struct {
	openSLOHeader `yaml:",inline"`
	Spec          struct {
		Description string `yaml:"description"`
	} `yaml:"spec"`
}

type openSLOSLO struct {
	openSLOHeader `yaml:",inline"`
	Spec          struct {
		Description     string              `yaml:"description"`
		Service         string              `yaml:"service"`
		Indicator       *openSLOSLI         `yaml:"indicator"`
		IndicatorRef    string              `yaml:"indicatorRef"`
		TimeWindow      []openSLOTimeWindow `yaml:"timeWindow"`
		BudgetingMethod string              `yaml:"budgetingMethod"`
		Objectives      []openSLOObjective  `yaml:"objectives"`
		AlertPolicies   []any               `yaml:"alertPolicies"`
	} `yaml:"spec"`
}

type openSLOTimeWindow struct {
	Duration  string `yaml:"duration"`
	IsRolling *bool  `yaml:"isRolling"`
	Calendar  any    `yaml:"calendar"`
}

type openSLOObjective struct {
	DisplayName     string   `yaml:"displayName"`
	Op              string   `yaml:"op"`
	Value           *number  `yaml:"value"`
	Target          *decimal `yaml:"target"`
	TargetPercent   *decimal `yaml:"targetPercent"`
	TimeSliceTarget *decimal `yaml:"timeSliceTarget"`
	TimeSliceWindow string   `yaml:"timeSliceWindow"`
	Indicator       any      `yaml:"indicator"`
	IndicatorRef    string   `yaml:"indicatorRef"`
	CompositeWeight *number  `yaml:"compositeWeight"`
}

// openSLOSLI is a kind SLI document, or an inline indicator (which has no
// apiVersion and kind).
type openSLOSLI struct {
	openSLOHeader `yaml:",inline"`
	Spec          openSLOSLISpec `yaml:"spec"`
}

type openSLOSLISpec struct {
	Description     string         `yaml:"description"`
	ThresholdMetric *openSLOMetric `yaml:"thresholdMetric"`
	RatioMetric     *openSLORatio  `yaml:"ratioMetric"`
}

type openSLORatio struct {
	Counter *bool          `yaml:"counter"`
	Good    *openSLOMetric `yaml:"good"`
	Bad     *openSLOMetric `yaml:"bad"`
	Total   *openSLOMetric `yaml:"total"`
	RawType string         `yaml:"rawType"`
	Raw     *openSLOMetric `yaml:"raw"`
}

type openSLOMetric struct {
	MetricSource struct {
		MetricSourceRef string         `yaml:"metricSourceRef"`
		Type            string         `yaml:"type"`
		Spec            map[string]any `yaml:"spec"`
	} `yaml:"metricSource"`
}

// parseOpenSLO reads a stream of OpenSLO v1 documents.
func parseOpenSLO(name string, data []byte, docs []*yaml.Node) (*File, error) {
	v := &validator{file: name}
	// The same stream again, strictly, one typed document at a time: docs
	// holds every document, empty ones included, so the two stay in step.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var (
		slos    []*openSLOSLO
		sloDocs []*yaml.Node
	)
	slis := map[string]*openSLOSLI{}
	for _, doc := range docs {
		v.doc = doc
		var target any = &yaml.Node{}
		var sli *openSLOSLI
		if !emptyDocument(doc) {
			if apiVersion(doc) != openSLOVersion {
				v.errorf(v.line("apiVersion"), "apiVersion %q: every document of an OpenSLO file must be %s", apiVersion(doc), openSLOVersion)
			}
			kind := ""
			if k := lookup(doc, "kind"); k != nil {
				kind = k.Value
			}
			switch kind {
			case "SLO":
				s := &openSLOSLO{}
				slos, sloDocs, target = append(slos, s), append(sloDocs, doc), s
			case "SLI":
				sli = &openSLOSLI{}
				target = sli
			case "Service":
				target = &openSLOService{}
			default:
				v.errorf(v.line("kind"), "OpenSLO kind %q is not supported (supported: SLO, SLI, Service)", kind)
			}
		}
		if err := dec.Decode(target); err != nil && !errors.Is(err, io.EOF) {
			v.errs = append(v.errs, yamlError(name, err))
		}
		if sli != nil && sli.Metadata.Name != "" {
			if _, dup := slis[sli.Metadata.Name]; dup {
				v.errorf(v.line("metadata", "name"), "SLI %q is defined twice", sli.Metadata.Name)
			}
			slis[sli.Metadata.Name] = sli
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if len(slos) == 0 {
		return nil, &Error{File: name, Msg: "no OpenSLO document of kind SLO"}
	}
	f := &File{Name: name}
	seen := map[string]int{}
	for i, s := range slos {
		v.doc = sloDocs[i]
		for _, out := range v.openSLO(s, slis) {
			if prev, ok := seen[out.Name]; ok {
				v.errorf(out.Line, "slo %q is defined twice (first at line %d)", out.Name, prev)
			}
			seen[out.Name] = out.Line
			f.SLOs = append(f.SLOs, out)
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// badOp negates an OpenSLO objective's op: the comparison that makes a
// minute bad.
func badOp(op string) (string, bool) {
	switch op {
	case "lt":
		return ">=", true
	case "lte":
		return ">", true
	case "gt":
		return "<=", true
	case "gte":
		return "<", true
	}
	return "", false
}

// openSLO maps one SLO document to one SLO per objective.
func (v *validator) openSLO(y *openSLOSLO, slis map[string]*openSLOSLI) []SLO {
	sp := &y.Spec
	line := v.line()
	v.name(y.Metadata.Name, []any{"metadata", "name"})
	if sp.Service == "" {
		v.errorf(line, "SLO %q: spec.service is required", y.Metadata.Name)
	} else if !sloName.MatchString(sp.Service) {
		v.errorf(v.line("spec", "service"), "SLO %q: service %q: want lower-case letters, digits and dashes", y.Metadata.Name, sp.Service)
	}
	if len(sp.AlertPolicies) > 0 {
		v.errorf(v.line("spec", "alertPolicies"), "SLO %q: alertPolicies are not supported: the generated page and ticket burn-rate alerts apply; set or disable them with the metadata annotation %s (docs/slo.md)", y.Metadata.Name, AlertingAnnotation)
	}
	labels := map[string]string{}
	for k, vals := range y.Metadata.Labels {
		labels[k] = strings.Join(vals, ",")
	}
	v.labels(labels, []any{"metadata", "labels"}, fmt.Sprintf("SLO %q: metadata.labels", y.Metadata.Name))

	// Indicator.
	var sli *openSLOSLI
	indicatorAt := []any{"spec", "indicator"}
	switch {
	case sp.Indicator != nil && sp.IndicatorRef != "":
		v.errorf(v.line("spec", "indicatorRef"), "SLO %q: indicator and indicatorRef are exclusive", y.Metadata.Name)
	case sp.Indicator != nil:
		sli = sp.Indicator
	case sp.IndicatorRef != "":
		sli = slis[sp.IndicatorRef]
		if sli == nil {
			v.errorf(v.line("spec", "indicatorRef"), "SLO %q: indicatorRef %q: no SLI document of that name in this file", y.Metadata.Name, sp.IndicatorRef)
		}
		indicatorAt = []any{"spec", "indicatorRef"}
	default:
		v.errorf(line, "SLO %q: spec.indicator or spec.indicatorRef is required", y.Metadata.Name)
	}

	// Period.
	var period time.Duration
	switch {
	case len(sp.TimeWindow) != 1:
		v.errorf(v.line("spec", "timeWindow"), "SLO %q: want exactly one timeWindow, got %d", y.Metadata.Name, len(sp.TimeWindow))
	case sp.TimeWindow[0].Calendar != nil || (sp.TimeWindow[0].IsRolling != nil && !*sp.TimeWindow[0].IsRolling):
		v.errorf(v.line("spec", "timeWindow", 0), "SLO %q: calendar time windows are not supported: Prometheus rules see rolling windows only", y.Metadata.Name)
	default:
		d, err := ParseDuration(sp.TimeWindow[0].Duration)
		if err != nil || d < baseWindow {
			v.errorf(v.line("spec", "timeWindow", 0, "duration"), "SLO %q: timeWindow duration %q: want a duration of at least 5m in m, h, d or w (months, quarters and years vary in length)", y.Metadata.Name, sp.TimeWindow[0].Duration)
		} else {
			period = d
		}
	}
	switch sp.BudgetingMethod {
	case "Occurrences", "Timeslices":
	case "RatioTimeslices":
		v.errorf(v.line("spec", "budgetingMethod"), "SLO %q: budgetingMethod RatioTimeslices is not supported (Occurrences, or Timeslices with a thresholdMetric)", y.Metadata.Name)
	default:
		v.errorf(v.line("spec", "budgetingMethod"), "SLO %q: budgetingMethod %q: want Occurrences or Timeslices", y.Metadata.Name, sp.BudgetingMethod)
	}

	if len(sp.Objectives) == 0 {
		v.errorf(line, "SLO %q: spec.objectives is empty", y.Metadata.Name)
	}
	description := sp.Description
	if description == "" {
		description = y.Metadata.DisplayName
	}
	var out []SLO
	for i := range sp.Objectives {
		o := &sp.Objectives[i]
		oat := func(p ...any) int { return v.line(append([]any{"spec", "objectives", i}, p...)...) }
		name := y.Metadata.Name
		if len(sp.Objectives) > 1 {
			suffix := slug(o.DisplayName)
			if suffix == "" {
				suffix = strconv.Itoa(i + 1)
			}
			name += "-" + suffix
		}
		s := SLO{Service: sp.Service, Name: name, Description: description, Labels: labels, Period: period, Line: oat()}
		if o.Indicator != nil || o.IndicatorRef != "" || o.CompositeWeight != nil {
			v.errorf(oat(), "SLO %q: composite objectives (indicator, indicatorRef, compositeWeight on an objective) are not supported", name)
		}
		switch {
		case o.Target != nil && o.TargetPercent != nil:
			v.errorf(oat(), "SLO %q: target and targetPercent are exclusive", name)
		case o.Target != nil:
			s.Objective = v.objective(name, o.Target.r, []any{"spec", "objectives", i, "target"})
		case o.TargetPercent != nil:
			s.Objective = v.objective(name, new(big.Rat).Quo(o.TargetPercent.r, big.NewRat(100, 1)), []any{"spec", "objectives", i, "targetPercent"})
		default:
			v.errorf(oat(), "SLO %q: an objective needs target or targetPercent", name)
		}
		if sli != nil {
			s.SLI = v.openSLOIndicator(name, sp.BudgetingMethod, sli, o, indicatorAt, oat)
		}
		s.Alerting = v.alerting(&s, v.openSLOAlerting(y), []any{"metadata", "annotations", AlertingAnnotation})
		out = append(out, s)
	}
	return out
}

// AlertingAnnotation is the metadata annotation of an OpenSLO SLO that
// holds this project's alerting block as YAML (the same keys as under
// alerting: in the native format): OpenSLO's alertPolicies describe
// notification targets, not burn-rate windows, so the tiers are set here,
// e.g. `ticket: {enabled: false}` or `page: {enabled: false}`.
const AlertingAnnotation = "kube-convergence.io/alerting"

// openSLOAlerting decodes the alerting annotation strictly; nil without one.
func (v *validator) openSLOAlerting(y *openSLOSLO) *alertingYAML {
	text, ok := y.Metadata.Annotations[AlertingAnnotation]
	if !ok {
		return nil
	}
	line := v.line("metadata", "annotations", AlertingAnnotation)
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	var a alertingYAML
	if err := dec.Decode(&a); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if te, ok := errors.AsType[*yaml.TypeError](err); ok {
			msg = strings.Join(te.Errors, "; ")
		}
		v.errorf(line, "SLO %q: annotation %s: %s", y.Metadata.Name, AlertingAnnotation, msg)
		return nil
	}
	return &a
}

// openSLOIndicator maps the indicator with one objective.
func (v *validator) openSLOIndicator(name, budgeting string, sli *openSLOSLI, o *openSLOObjective, at []any, oat where) SLI {
	sat := func(p ...any) int { return v.line(append(append([]any{}, at...), p...)...) }
	rm, tm := sli.Spec.RatioMetric, sli.Spec.ThresholdMetric
	if (rm == nil) == (tm == nil) {
		v.errorf(sat(), "SLO %q: the indicator needs exactly one of ratioMetric and thresholdMetric", name)
		return SLI{}
	}
	if o.TimeSliceTarget != nil {
		v.errorf(oat("timeSliceTarget"), "SLO %q: timeSliceTarget is not supported: a 1m slice is good when the condition holds", name)
	}
	if o.TimeSliceWindow != "" {
		if d, err := ParseDuration(o.TimeSliceWindow); err != nil || d != time.Minute {
			v.errorf(oat("timeSliceWindow"), "SLO %q: timeSliceWindow %q: only 1m slices are supported", name, o.TimeSliceWindow)
		}
	}
	if tm != nil {
		op, ok := badOp(o.Op)
		if !ok || o.Value == nil {
			v.errorf(oat(), "SLO %q: a thresholdMetric objective needs op (lt, lte, gt, gte) and value", name)
			return SLI{}
		}
		q := v.openSLOQuery(name, tm, sat)
		if q == "" {
			return SLI{}
		}
		g := &GoodMinutesSLI{BadWhen: fmt.Sprintf("(%s) %s %s", q, op, strconv.FormatFloat(o.Value.v, 'g', -1, 64)), CountWhen: q}
		v.goodMinutes(name, g, func(...any) int { return sat() })
		return SLI{GoodMinutes: g}
	}
	if budgeting != "Occurrences" {
		v.errorf(sat(), "SLO %q: a ratioMetric needs budgetingMethod Occurrences", name)
	}
	if rm.Raw != nil || rm.RawType != "" {
		v.errorf(sat(), "SLO %q: raw ratio metrics are not supported: give good or bad, and total", name)
		return SLI{}
	}
	if rm.Total == nil || (rm.Good == nil) == (rm.Bad == nil) {
		v.errorf(sat(), "SLO %q: a ratioMetric needs total and exactly one of good and bad", name)
		return SLI{}
	}
	counter := rm.Counter != nil && *rm.Counter
	total := v.openSLORate(name, v.openSLOQuery(name, rm.Total, sat), counter, sat)
	r := &RatioSLI{TotalQuery: total}
	if rm.Bad != nil {
		r.ErrorQuery = v.openSLORate(name, v.openSLOQuery(name, rm.Bad, sat), counter, sat)
	} else if good := v.openSLORate(name, v.openSLOQuery(name, rm.Good, sat), counter, sat); good != "" && total != "" {
		// Clamped at 0: good and total are separate series, scraped and
		// rated separately, so total - good can dip below zero for a
		// window (a counter reset on one side, a good series ahead of its
		// total); a negative error rate would credit the budget.
		r.ErrorQuery = fmt.Sprintf("clamp_min(sum(%s) - (sum(%s) or on () vector(0)), 0)", total, good)
	}
	if r.ErrorQuery == "" || r.TotalQuery == "" {
		return SLI{}
	}
	v.ratio(name, r, func(...any) int { return sat() })
	return SLI{Ratio: r}
}

func (v *validator) openSLOQuery(name string, m *openSLOMetric, sat where) string {
	ms := m.MetricSource
	if ms.MetricSourceRef != "" {
		v.errorf(sat(), "SLO %q: metricSourceRef is not supported: give type Prometheus and spec.query inline", name)
		return ""
	}
	if !strings.EqualFold(ms.Type, "prometheus") {
		v.errorf(sat(), "SLO %q: metricSource type %q is not supported (Prometheus)", name, ms.Type)
		return ""
	}
	q, _ := ms.Spec["query"].(string)
	if strings.TrimSpace(q) == "" {
		v.errorf(sat(), "SLO %q: metricSource spec.query is required", name)
	}
	return strings.TrimSpace(q)
}

// openSLORate turns a ratioMetric query into a per-second rate with
// {{.window}}: as written when it has the placeholder, rate(q[{{.window}}])
// for a counter selector.
func (v *validator) openSLORate(name, q string, counter bool, sat where) string {
	switch {
	case q == "":
		return ""
	case strings.Contains(q, WindowPlaceholder):
		return q
	case counter:
		e, err := parser.NewParser(parser.Options{}).ParseExpr(q)
		if _, ok := e.(*parser.VectorSelector); err != nil || !ok {
			v.errorf(sat(), "SLO %q: query %q: with counter: true, give a metric selector (it is wrapped in rate()) or an expression with %s", name, q, WindowPlaceholder)
			return ""
		}
		return "rate(" + q + "[" + WindowPlaceholder + "])"
	default:
		v.errorf(sat(), "SLO %q: query %q: set counter: true for a counter selector, or write a per-second rate with %s", name, q, WindowPlaceholder)
		return ""
	}
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}
