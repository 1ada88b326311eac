// Package metricdoc builds the metric reference from the metrics the
// exporter really registers, so the README cannot drift from the code: a
// Recorder stands in for the registry, and the reference is rendered from
// what was registered on it.
package metricdoc

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric is one documented metric family.
type Metric struct {
	Name, Type, Help string
	Labels           []string
}

// Typed is implemented by collectors computed at scrape time, whose type
// cannot be seen before they have something to report.
type Typed interface {
	MetricType(name string) string
}

// Recorder is a prometheus.Registerer that records the metric families
// registered on it.
type Recorder struct {
	metrics map[string]Metric
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{metrics: map[string]Metric{}} }

// Register records c's metric families.
func (r *Recorder) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(descs); close(descs) }()
	collected := collectedTypes(c)
	for d := range descs {
		m, err := parseDesc(d.String())
		if err != nil {
			return err
		}
		if _, dup := r.metrics[m.Name]; dup {
			return fmt.Errorf("metricdoc: %s registered twice", m.Name)
		}
		m.Type = typeOf(c, m.Name, collected)
		if m.Type == "" {
			return fmt.Errorf("metricdoc: cannot tell the type of %s (implement metricdoc.Typed)", m.Name)
		}
		r.metrics[m.Name] = m
	}
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *Recorder) Unregister(prometheus.Collector) bool { return false }

// Metrics returns the recorded families sorted by name.
func (r *Recorder) Metrics() []Metric {
	out := make([]Metric, 0, len(r.metrics))
	for _, m := range r.metrics {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func typeOf(c prometheus.Collector, name string, collected map[string]string) string {
	// Vecs with no children emit nothing, so their type comes from their Go
	// type. Plain metrics always emit a sample and are read from it below
	// (their interfaces overlap: a Gauge has a Counter's methods, a Summary
	// a Histogram's).
	switch c.(type) {
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.SummaryVec:
		return "summary"
	case *prometheus.HistogramVec:
		return "histogram"
	}
	if t, ok := collected[name]; ok {
		return t
	}
	if t, ok := c.(Typed); ok {
		return t.MetricType(name)
	}
	return ""
}

// collectedTypes collects c once and reads the types of what it emits
// (function metrics such as build_info).
func collectedTypes(c prometheus.Collector) map[string]string {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]string{}
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		d, err := parseDesc(m.Desc().String())
		if err != nil {
			continue
		}
		switch {
		case pb.Counter != nil:
			out[d.Name] = "counter"
		case pb.Gauge != nil:
			out[d.Name] = "gauge"
		case pb.Histogram != nil:
			out[d.Name] = "histogram"
		case pb.Summary != nil:
			out[d.Name] = "summary"
		default:
			out[d.Name] = "untyped"
		}
	}
	return out
}

var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// parseDesc reads a Desc's String(): its fields are not exported.
func parseDesc(s string) (Metric, error) {
	m := descRE.FindStringSubmatch(s)
	if m == nil {
		return Metric{}, fmt.Errorf("metricdoc: unexpected descriptor %s", s)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return Metric{}, err
	}
	help, err := strconv.Unquote(m[2])
	if err != nil {
		return Metric{}, err
	}
	var labels []string
	if m[4] != "" {
		for _, l := range strings.Split(m[4], ",") {
			labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
		}
	}
	return Metric{Name: name, Help: help, Labels: labels}, nil
}

// Markdown renders the reference as a table.
func Markdown(ms []Metric) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, m := range ms {
		labels := "—"
		if len(m.Labels) > 0 {
			labels = "`" + strings.Join(m.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, labels, strings.ReplaceAll(m.Help, "|", `\|`))
	}
	return b.String()
}
