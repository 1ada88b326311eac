package metricdoc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

var computed = metric.Family{Name: "d_seconds", Type: metric.Gauge, Help: "computed", Labels: []string{"name"}}

type scrapeOnly struct{ d *prometheus.Desc }

func (s scrapeOnly) Describe(ch chan<- *prometheus.Desc) { ch <- s.d }
func (s scrapeOnly) Collect(chan<- prometheus.Metric)    {}
func (s scrapeOnly) Families() []metric.Family           { return []metric.Family{computed} }

func declare(f metric.Family, c prometheus.Collector) metric.Declared { return metric.Declare(c, f) }

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	a := metric.Family{Name: "a_total", Type: metric.Counter, Help: `counts "things" | more`, Labels: []string{"x", "y"}}
	b := metric.Family{Name: "b_seconds", Type: metric.Histogram, Help: "latency"}
	g := metric.Family{Name: "b_gauge", Type: metric.Gauge, Help: "a plain gauge"}
	info := metric.Family{Name: "c_info", Type: metric.Gauge, Help: "info", ConstLabels: prometheus.Labels{"v": "1"}}
	r.MustRegister(
		declare(a, a.NewCounterVec()),
		declare(b, b.NewHistogram(prometheus.HistogramOpts{})),
		declare(g, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b_gauge", Help: "a plain gauge"})),
		declare(info, info.NewGaugeFunc(func() float64 { return 1 })),
		scrapeOnly{computed.Desc()},
	)
	got := r.Metrics()
	want := []Metric{
		{Name: "a_total", Type: "counter", Help: `counts "things" | more`, Labels: []string{"x", "y"}},
		{Name: "b_gauge", Type: "gauge", Help: "a plain gauge"},
		{Name: "b_seconds", Type: "histogram", Help: "latency"},
		{Name: "c_info", Type: "gauge", Help: "info"},
		{Name: "d_seconds", Type: "gauge", Help: "computed", Labels: []string{"name"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Type != want[i].Type || got[i].Help != want[i].Help || strings.Join(got[i].Labels, ",") != strings.Join(want[i].Labels, ",") {
			t.Errorf("metric %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if md := Markdown(got); !strings.Contains(md, "| `a_total` | counter | `x`, `y` | counts \"things\" \\| more |") {
		t.Errorf("markdown:\n%s", md)
	}
	again := metric.Family{Name: "a_total", Type: metric.Counter, Help: "again"}
	if err := r.Register(declare(again, again.NewCounter())); err == nil {
		t.Errorf("duplicate registration accepted")
	}
}

// What the reference cannot trust is refused: a collector without
// declarations, and one whose declarations are not what it describes.
func TestRecorderRefusesUndeclaredCollectors(t *testing.T) {
	r := NewRecorder()
	if err := r.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})); err == nil {
		t.Error("a collector without declarations was accepted")
	}
	a := metric.Family{Name: "a_total", Type: metric.Counter, Help: "a"}
	other := metric.Family{Name: "a_total", Type: metric.Counter, Help: "another help"}
	if err := r.Register(declare(other, a.NewCounter())); err == nil {
		t.Error("a declaration that is not the collector's descriptor was accepted")
	}
	if err := r.Register(metric.Declare(a.NewCounter(), a, other)); err == nil {
		t.Error("more declarations than descriptors were accepted")
	}
	if len(r.Metrics()) != 0 {
		t.Errorf("recorded %v", r.Metrics())
	}
}

func TestMarkdownLinksTheDetail(t *testing.T) {
	md := Markdown([]Metric{{Name: "a_total", Type: "counter", Help: "Things.", Doc: "docs/metrics.md#a_total"}})
	if !strings.Contains(md, "| `a_total` | counter | — | Things. [details](docs/metrics.md#a_total) |") {
		t.Errorf("markdown:\n%s", md)
	}
}
