package slo

import (
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// validator collects every error of a file with its line, so that one run
// of `slo validate` shows them all.
type validator struct {
	file string
	doc  *yaml.Node
	errs []error
}

func (v *validator) errorf(line int, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) line(path ...any) int { return lineOf(v.doc, path...) }

func (v *validator) err() error { return errors.Join(v.errs...) }

// where maps a path relative to some node to a line.
type where func(path ...any) int

func (v *validator) at(base []any) where {
	return func(p ...any) int { return v.line(append(append([]any{}, base...), p...)...) }
}

var (
	// sloName is a DNS label: the name goes into sloth_id, rule group
	// names and generated alert names.
	sloName   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	alertName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// reservedLabel reports whether the generator sets the label on every
// series or alert.
func reservedLabel(name string) bool {
	switch name {
	case labelID, labelService, labelSLO, labelWindow, labelSloth, labelTier:
		return true
	}
	return false
}

func (v *validator) name(name string, at []any) {
	switch {
	case name == "":
		v.errorf(v.line(at...), "name is required")
	case !sloName.MatchString(name) || len(name) > 63:
		v.errorf(v.line(at...), "name %q: want at most 63 lower-case letters, digits and dashes (it becomes sloth_slo and part of sloth_id)", name)
	}
}

// labels checks label names for the labels of records and alerts.
func (v *validator) labels(ls map[string]string, at []any, what string) {
	for _, k := range sortedKeys(ls) {
		line := v.line(append(append([]any{}, at...), k)...)
		switch {
		case !labelName.MatchString(k) || strings.HasPrefix(k, "__"):
			v.errorf(line, "%s: %q is not a valid label name", what, k)
		case reservedLabel(k):
			v.errorf(line, "%s: %q is set by the generator", what, k)
		}
	}
}

func (v *validator) objective(slo string, r *big.Rat, at []any) *big.Rat {
	if r.Sign() <= 0 || r.Cmp(big.NewRat(1, 1)) >= 0 {
		v.errorf(v.line(at...), "slo %q: objective %s is outside (0, 1): it is the fraction of good events, e.g. 0.99", slo, formatRat(r))
		return nil
	}
	return r
}

// sli converts and checks the native sli block.
func (v *validator) sli(slo string, y *sliYAML, at []any) SLI {
	var kinds []string
	if y.Latency != nil {
		kinds = append(kinds, "latency")
	}
	if y.GoodMinutes != nil {
		kinds = append(kinds, "goodMinutes")
	}
	if y.Ratio != nil {
		kinds = append(kinds, "ratio")
	}
	line := v.line(at...)
	switch len(kinds) {
	case 0:
		v.errorf(line, "slo %q: sli needs one indicator: latency, goodMinutes or ratio", slo)
		return SLI{}
	case 1:
	default:
		v.errorf(line, "slo %q: sli has %s: one indicator per SLO", slo, strings.Join(kinds, " and "))
		return SLI{}
	}
	w := v.at(at)
	switch {
	case y.Latency != nil:
		l := &LatencySLI{Metric: y.Latency.Metric, Match: toValues(y.Latency.Match), Scope: toValues(y.Latency.Scope)}
		if y.Latency.Threshold == nil {
			v.errorf(w("latency"), "slo %q: latency: threshold is required (seconds, a bucket boundary of the histogram)", slo)
		} else {
			l.Threshold = y.Latency.Threshold.v
		}
		v.latency(slo, l, y.Latency.Threshold != nil, func(p ...any) int { return w(append([]any{"latency"}, p...)...) })
		return SLI{Latency: l}
	case y.GoodMinutes != nil:
		g := &GoodMinutesSLI{BadWhen: y.GoodMinutes.BadWhen, CountWhen: y.GoodMinutes.CountWhen}
		v.goodMinutes(slo, g, func(p ...any) int { return w(append([]any{"goodMinutes"}, p...)...) })
		return SLI{GoodMinutes: g}
	default:
		r := &RatioSLI{ErrorQuery: y.Ratio.ErrorQuery, TotalQuery: y.Ratio.TotalQuery}
		v.ratio(slo, r, func(p ...any) int { return w(append([]any{"ratio"}, p...)...) })
		return SLI{Ratio: r}
	}
}

func toValues(m map[string]valuesYAML) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (v *validator) latency(slo string, l *LatencySLI, haveThreshold bool, w where) {
	m, ok := latencyMetric(l.Metric)
	if !ok {
		known := make([]string, 0, 3)
		for _, m := range LatencyMetrics() {
			known = append(known, m.Histogram)
		}
		v.errorf(w("metric"), "slo %q: unknown latency metric %q (known: %s)", slo, l.Metric, strings.Join(known, ", "))
		return
	}
	if haveThreshold && !m.isBucket(l.Threshold) {
		v.errorf(w("threshold"), "slo %q: threshold %s is not a bucket boundary of %s, so no le series holds it (boundaries: %s)",
			slo, latency.Threshold(l.Threshold), m.Histogram, formatBuckets(m.Buckets))
	}
	for _, k := range sortedKeys(l.Match) {
		line := w("match", k)
		lv, ok := m.label(k)
		switch {
		case k == "le" || k == "threshold":
			v.errorf(line, "slo %q: match: %s is set from threshold", slo, k)
			continue
		case !ok:
			v.errorf(line, "slo %q: match: %q is not a label of %s (its labels: %s; target labels such as job go under scope)", slo, k, m.Histogram, strings.Join(m.labelNames(), ", "))
			continue
		}
		for _, val := range l.Match[k] {
			if lv.Values != nil && !slices.Contains(lv.Values, val) {
				v.errorf(line, "slo %q: match: %s %q is not a value the exporter exposes (values: %s)", slo, k, val, strings.Join(lv.Values, ", "))
			}
		}
	}
	for _, k := range sortedKeys(l.Scope) {
		line := w("scope", k)
		_, own := m.label(k)
		switch {
		case k == "le" || k == "threshold":
			v.errorf(line, "slo %q: scope: %s is set from threshold", slo, k)
		case own:
			v.errorf(line, "slo %q: scope: %s is a label of %s itself: put it under match", slo, k, m.Histogram)
		case !labelName.MatchString(k):
			v.errorf(line, "slo %q: scope: %q is not a valid label name", slo, k)
		}
	}
}

func (v *validator) goodMinutes(slo string, g *GoodMinutesSLI, w where) {
	for _, q := range []struct{ key, expr, what string }{
		{"badWhen", g.BadWhen, "returns a sample in a bad minute"},
		{"countWhen", g.CountWhen, "returns a sample in every minute that counts"},
	} {
		if q.expr == "" {
			v.errorf(w(), "slo %q: goodMinutes: %s is required (a PromQL expression that %s)", slo, q.key, q.what)
			continue
		}
		v.promql(slo, "goodMinutes: "+q.key, q.expr, w(q.key))
	}
}

func (v *validator) ratio(slo string, r *RatioSLI, w where) {
	for _, q := range []struct{ key, expr string }{{"errorQuery", r.ErrorQuery}, {"totalQuery", r.TotalQuery}} {
		switch {
		case q.expr == "":
			v.errorf(w(), "slo %q: ratio: %s is required (a per-second rate with %s as its range)", slo, q.key, WindowPlaceholder)
		case !strings.Contains(q.expr, WindowPlaceholder):
			v.errorf(w(q.key), "slo %q: ratio: %s has no %s: it is evaluated over several windows, e.g. sum(rate(x_total[%s]))", slo, q.key, WindowPlaceholder, WindowPlaceholder)
		default:
			v.promql(slo, "ratio: "+q.key, withWindow(q.expr, "5m"), w(q.key))
		}
	}
}

// promql checks that expr parses and yields an instant vector.
func (v *validator) promql(slo, what, expr string, line int) {
	if err := checkPromQL(expr); err != nil {
		v.errorf(line, "slo %q: %s: %v", slo, what, err)
	}
}

// checkPromQL parses expr with Prometheus's own parser (the version the
// sandbox runs, v0.316.0), without experimental functions.
func checkPromQL(expr string) error {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return fmt.Errorf("PromQL does not parse: %w", err)
	}
	switch t := e.Type(); t {
	case parser.ValueTypeVector:
	case parser.ValueTypeMatrix:
		return fmt.Errorf("PromQL %q is a range vector, want an instant vector", expr)
	default:
		return fmt.Errorf("PromQL %q is a %s, want an instant vector", expr, t)
	}
	return nil
}

// alerting applies defaults and checks the alerting block (y may be nil).
func (v *validator) alerting(s *SLO, y *alertingYAML, at []any) Alerting {
	if y == nil {
		y = &alertingYAML{}
	}
	w := v.at(at)
	a := Alerting{
		Name:        y.Name,
		RunbookURL:  y.RunbookURL,
		Labels:      y.Labels,
		Annotations: y.Annotations,
	}
	if a.Name == "" {
		a.Name = camel(s.Service) + camel(s.Name) + "BudgetBurn"
	} else if !alertName.MatchString(a.Name) {
		v.errorf(w("name"), "slo %q: alerting: name %q is not a valid alert name", s.Name, a.Name)
	}
	if a.RunbookURL != "" {
		if u, err := url.Parse(a.RunbookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf(w("runbookURL"), "slo %q: alerting: runbookURL %q: want an absolute http(s) URL", s.Name, a.RunbookURL)
		}
	}
	v.labels(y.Labels, append(append([]any{}, at...), "labels"), fmt.Sprintf("slo %q: alerting: labels", s.Name))
	for _, k := range sortedKeys(y.Annotations) {
		if !labelName.MatchString(k) {
			v.errorf(w("annotations", k), "slo %q: alerting: annotations: %q is not a valid annotation name", s.Name, k)
		}
	}
	a.Page = v.tier(s, TierPage, y.Page, append(append([]any{}, at...), "page"))
	a.Ticket = v.tier(s, TierTicket, y.Ticket, append(append([]any{}, at...), "ticket"))
	a.NoEvents = NoEvents{Enabled: true, For: DefaultNoEventsFor}
	if ne := y.NoEvents; ne != nil {
		if ne.Enabled != nil {
			a.NoEvents.Enabled = *ne.Enabled
		}
		if ne.For != nil {
			a.NoEvents.For = ne.For.d
			if ne.For.d < time.Hour {
				v.errorf(w("noEvents", "for"), "slo %q: alerting: noEvents: for %s is shorter than 1h, the window the ticket reads", s.Name, FormatDuration(ne.For.d))
			}
		}
	}
	return a
}

func (v *validator) tier(s *SLO, name string, y *tierYAML, at []any) Tier {
	t := Tier{Enabled: true, For: DefaultTicketFor, Labels: map[string]string{"severity": "warning"}}
	defaults := DefaultTicketWindows()
	if name == TierPage {
		t.For, t.MinEvents, t.Labels["severity"] = DefaultPageFor, DefaultPageMinEvents, "critical"
		defaults = DefaultPageWindows()
	}
	if y == nil {
		y = &tierYAML{}
	}
	w := v.at(at)
	if y.Enabled != nil {
		t.Enabled = *y.Enabled
	}
	if y.For != nil {
		t.For = y.For.d
	}
	if y.MinEvents != nil {
		if *y.MinEvents < 0 {
			v.errorf(w("minEvents"), "slo %q: %s: minEvents %d must not be negative", s.Name, name, *y.MinEvents)
		}
		t.MinEvents = *y.MinEvents
	}
	v.labels(y.Labels, append(append([]any{}, at...), "labels"), fmt.Sprintf("slo %q: %s: labels", s.Name, name))
	for k, val := range y.Labels {
		t.Labels[k] = val
	}
	defer v.tierFires(s, name, &t, y.Windows != nil, at)
	if y.Windows == nil {
		if t.Enabled && s.Period > 0 && s.Period < time.Hour {
			v.errorf(v.line(at...), "slo %q: %s: period %s is shorter than 1h, the long window of the fastest alert (1h/5m at 14.4x): set enabled: false, or explicit windows", s.Name, name, FormatDuration(s.Period))
		}
		for _, win := range defaults {
			if s.Period > 0 && !win.Kept(s.Period) {
				t.Dropped = append(t.Dropped, win)
				continue
			}
			t.Windows = append(t.Windows, win)
		}
		return t
	}
	// Explicit windows are the user's choice: checked, never dropped.
	if len(y.Windows) == 0 {
		v.errorf(w("windows"), "slo %q: %s: windows is empty (leave it out for the defaults, or set enabled: false)", s.Name, name)
	}
	for i, wy := range y.Windows {
		line := w("windows", i)
		if wy.Long == nil || wy.Short == nil || wy.Factor == nil {
			v.errorf(line, "slo %q: %s: a window needs long, short and factor", s.Name, name)
			continue
		}
		win := Window{Long: wy.Long.d, Short: wy.Short.d, Factor: wy.Factor.v}
		switch {
		case win.Short < baseWindow || win.Long < baseWindow || win.Long%time.Second != 0 || win.Short%time.Second != 0:
			v.errorf(line, "slo %q: %s: window %s: long and short must be whole seconds of at least %s, the shortest recorded window", s.Name, name, win, FormatDuration(baseWindow))
		case win.Short >= win.Long:
			v.errorf(line, "slo %q: %s: window %s: short must be shorter than long", s.Name, name, win)
		case win.Factor <= 0:
			v.errorf(line, "slo %q: %s: window %s: factor must be positive", s.Name, name, win)
		case s.Period > 0 && win.Long > s.Period:
			v.errorf(line, "slo %q: %s: period %s is shorter than the alert window %s", s.Name, name, FormatDuration(s.Period), FormatDuration(win.Long))
		case s.Period > 0 && !win.Kept(s.Period):
			v.errorf(line, "slo %q: %s: window %s would spend %.0f%% of the %s budget before it fires (> 100%%)", s.Name, name, win, 100*win.BudgetShare(s.Period), FormatDuration(s.Period))
		}
		t.Windows = append(t.Windows, win)
	}
	return t
}

// tierFires checks, once the tier is complete, that it can fire: a window
// whose threshold (factor x budget) is an error ratio of 100% or more can
// never be exceeded, and an enabled tier whose default windows were all
// dropped for the period has no alert left.
func (v *validator) tierFires(s *SLO, name string, t *Tier, explicit bool, at []any) {
	if !t.Enabled || s.Objective == nil {
		return
	}
	w := v.at(at)
	if len(t.Windows) == 0 && !explicit && s.Period > 0 {
		v.errorf(v.line(at...), "slo %q: %s: no window pair is left for a %s period (every default pair would spend more than 100%% of the budget), so this tier would never alert: set %s.enabled: false, explicit windows, or a longer period",
			s.Name, name, FormatDuration(s.Period), name)
	}
	budget, _ := s.Budget().Float64()
	for i, win := range t.Windows {
		if win.Factor*budget >= 1 {
			line := v.line(at...)
			if explicit {
				line = w("windows", i)
			}
			v.errorf(line, "slo %q: %s: window %s can never fire: it needs an error ratio above %s x %s = %.4g, and a ratio is at most 1 (lower the factor or the objective)",
				s.Name, name, win, strconv.FormatFloat(win.Factor, 'g', -1, 64), formatRat(s.Budget()), win.Factor*budget)
		}
	}
}

// camel turns kube-convergence into KubeConvergence.
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
