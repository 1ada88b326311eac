package slo

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// LatencyMetric describes a latency histogram of the exporter that a
// latency SLI can read, with its threshold counter.
type LatencyMetric struct {
	// Histogram is the family name; its buckets are Histogram + "_bucket".
	Histogram string
	// Exceeded counts episodes whose age passed a threshold before they
	// reached the stage; its threshold label is formatted like le.
	Exceeded string
	// Buckets are the histogram's boundaries: a threshold must be one.
	Buckets []float64
	// Labels are the histogram's labels (le aside), in order, with the
	// values they can take; nil means any value (namespace, owner_kind).
	Labels []LabelValues
}

// LabelValues is a label and its possible values (nil: open-ended).
type LabelValues = latency.Label

// LatencyMetrics lists the histograms a latency SLI can read: the SLIs
// the collectors declare (latency.SLIs), so a threshold that is not a
// boundary, or a label the histogram does not have, is caught here and not
// by an SLI that matches nothing in production.
func LatencyMetrics() []LatencyMetric {
	slis := latency.SLIs()
	out := make([]LatencyMetric, len(slis))
	for i, h := range slis {
		out[i] = LatencyMetric{Histogram: h.Name, Exceeded: h.Exceeded.Name, Buckets: slices.Clone(h.Buckets), Labels: slices.Clone(h.Labels)}
	}
	return out
}

func latencyMetric(name string) (LatencyMetric, bool) {
	for _, m := range LatencyMetrics() {
		if m.Histogram == name {
			return m, true
		}
	}
	return LatencyMetric{}, false
}

func (m LatencyMetric) label(name string) (LabelValues, bool) {
	for _, l := range m.Labels {
		if l.Name == name {
			return l, true
		}
	}
	return LabelValues{}, false
}

func (m LatencyMetric) labelNames() []string {
	names := make([]string, 0, len(m.Labels))
	for _, l := range m.Labels {
		names = append(names, l.Name)
	}
	return names
}

// isBucket reports whether t is one of the boundaries, exactly: a
// threshold between two buckets has no le series to read.
func (m LatencyMetric) isBucket(t float64) bool { return slices.Contains(m.Buckets, t) }

func formatBuckets(bs []float64) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	return strings.Join(s, ", ")
}

// goodSelector and badSelector are the two series sets of a latency SLI.
// The le and threshold values are matched in both forms they are stored
// in: client_golang exposes le="300", which Prometheus 3 (and any
// OpenMetrics scrape) stores as "300.0" and Prometheus 2 keeps as "300"
// (Prometheus 3 migration guide, "le and quantile label values"). An exact
// match on either form matches nothing on the other kind of server while
// passing every promtool test written in the same form.
func (l *LatencySLI) goodSelector(m LatencyMetric) string {
	return selector(m.Histogram+"_bucket", l.Match, l.Scope, "le", l.Threshold)
}

func (l *LatencySLI) badSelector(m LatencyMetric) string {
	return selector(m.Exceeded, l.Match, l.Scope, "threshold", l.Threshold)
}

// ThresholdRegex is the regular expression matching both stored forms of
// a bucket boundary: 300(\.0)? for a whole number, 0\.25 otherwise (one
// form).
func ThresholdRegex(t float64) string {
	s := strconv.FormatFloat(t, 'g', -1, 64)
	if s+".0" == latency.Threshold(t) {
		return regexp.QuoteMeta(s) + `(\.0)?`
	}
	return regexp.QuoteMeta(latency.Threshold(t))
}

// selector renders name{...} with the matchers sorted by label name: one
// value is an equality matcher, several a regex alternation of the
// literally quoted values; the bound (le or threshold) matches both of
// its stored forms.
func selector(name string, match, scope map[string][]string, boundName string, bound float64) string {
	all := map[string][]string{}
	for k, v := range match {
		all[k] = v
	}
	for k, v := range scope {
		all[k] = v
	}
	parts := make([]string, 0, len(all)+1)
	for _, k := range sortedKeys(all) {
		parts = append(parts, matcher(k, all[k]))
	}
	parts = append(parts, boundName+"=~"+strconv.Quote(ThresholdRegex(bound)))
	slices.SortFunc(parts, func(a, b string) int { return strings.Compare(labelOf(a), labelOf(b)) })
	return name + "{" + strings.Join(parts, ", ") + "}"
}

func labelOf(matcher string) string { return matcher[:strings.IndexAny(matcher, "=!")] }

func matcher(name string, values []string) string {
	if len(values) == 1 {
		return name + "=" + strconv.Quote(values[0])
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = regexp.QuoteMeta(v)
	}
	return name + "=~" + strconv.Quote(strings.Join(quoted, "|"))
}

// withWindow substitutes the window into a RatioSLI query.
func withWindow(query, window string) string {
	return strings.ReplaceAll(query, WindowPlaceholder, window)
}

func (s SLI) String() string {
	switch {
	case s.Latency != nil:
		return fmt.Sprintf("latency %s <= %s", s.Latency.Metric, latency.Threshold(s.Latency.Threshold))
	case s.GoodMinutes != nil:
		return "good minutes"
	case s.Ratio != nil:
		return "ratio"
	}
	return "none"
}

// LookupLatencyMetric returns the histogram a latency SLI reads.
func LookupLatencyMetric(name string) (LatencyMetric, bool) { return latencyMetric(name) }

// HasLabel reports whether the histogram has the label (le aside).
func (m LatencyMetric) HasLabel(name string) bool { _, ok := m.label(name); return ok }

// Selectors returns the series selectors of the SLI's good events (the
// le="T" bucket) and bad events (the threshold="T" counter), with the
// SLO's match and scope, each bound matched in both stored forms: the
// selectors the generated rules read, for `report` to read the same raw
// series.
func (l *LatencySLI) Selectors() (good, bad string, err error) {
	m, ok := latencyMetric(l.Metric)
	if !ok {
		return "", "", fmt.Errorf("unknown latency metric %q", l.Metric)
	}
	return l.goodSelector(m), l.badSelector(m), nil
}

// Queries returns ErrorQuery and TotalQuery with {{.window}} set to window
// (a Prometheus duration such as 5m or 30d): per-second rates.
func (r *RatioSLI) Queries(window string) (errorQuery, totalQuery string) {
	return withWindow(r.ErrorQuery, window), withWindow(r.TotalQuery, window)
}

// BadMinute is the expression of the slo:sli_bad_minute:bool rule: 1 in a
// bad minute, 0 in a good one, no sample in a minute that does not count.
func (g *GoodMinutesSLI) BadMinute() string {
	return Options{}.aggregation().badMinute(strings.TrimSpace(g.BadWhen), strings.TrimSpace(g.CountWhen))
}
