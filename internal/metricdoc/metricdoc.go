// Package metricdoc builds the metric reference from the metrics the
// exporter really registers, so the README cannot drift from the code: a
// Recorder stands in for the registry and records the declarations
// (metric.Family) of what was registered on it; the reference is rendered
// from them.
package metricdoc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// Metric is one documented metric family.
type Metric struct {
	Name, Type, Help string
	Labels           []string
	// Doc is where the family's detail is documented (a link target), ""
	// for none.
	Doc string
}

// Recorder is a prometheus.Registerer that records the metric families
// registered on it.
type Recorder struct {
	metrics map[string]Metric
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{metrics: map[string]Metric{}} }

// Register records the families c declares. c must be a metric.Declared
// whose declarations are what it describes, one family per descriptor:
// a collector without declarations, or with declarations that do not match
// its descriptors, is refused (the reference would not say what /metrics
// exposes).
func (r *Recorder) Register(c prometheus.Collector) error {
	d, ok := c.(metric.Declared)
	if !ok {
		return fmt.Errorf("metricdoc: %T has no metric declarations (build it from a metric.Family and register it with metric.Declare)", c)
	}
	families := d.Families()
	declared := make(map[string]metric.Family, len(families))
	for _, f := range families {
		declared[f.Desc().String()] = f
	}
	descs := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(descs); close(descs) }()
	n := 0
	for desc := range descs {
		n++
		if _, ok := declared[desc.String()]; !ok {
			return fmt.Errorf("metricdoc: %T describes %s, which none of its declarations is", c, desc)
		}
	}
	if n != len(families) {
		return fmt.Errorf("metricdoc: %T describes %d families and declares %d", c, n, len(families))
	}
	for _, f := range families {
		if _, dup := r.metrics[f.Name]; dup {
			return fmt.Errorf("metricdoc: %s registered twice", f.Name)
		}
		r.metrics[f.Name] = Metric{Name: f.Name, Type: string(f.Type), Help: f.Help, Labels: f.Labels}
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

// Markdown renders the reference as a table.
func Markdown(ms []Metric) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, m := range ms {
		labels := "—"
		if len(m.Labels) > 0 {
			labels = "`" + strings.Join(m.Labels, "`, `") + "`"
		}
		meaning := m.Help
		if m.Doc != "" {
			meaning += " [details](" + m.Doc + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, labels, strings.ReplaceAll(meaning, "|", `\|`))
	}
	return b.String()
}
