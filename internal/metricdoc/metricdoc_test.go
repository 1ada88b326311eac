package metricdoc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type scrapeOnly struct{ d *prometheus.Desc }

func (s scrapeOnly) Describe(ch chan<- *prometheus.Desc) { ch <- s.d }
func (s scrapeOnly) Collect(chan<- prometheus.Metric)    {}
func (s scrapeOnly) MetricType(string) string            { return "gauge" }

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	r.MustRegister(
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "a_total", Help: `counts "things" | more`}, []string{"x", "y"}),
		prometheus.NewHistogram(prometheus.HistogramOpts{Name: "b_seconds", Help: "latency"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "b_gauge", Help: "a plain gauge"}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "c_info", Help: "info", ConstLabels: prometheus.Labels{"v": "1"}}, func() float64 { return 1 }),
		scrapeOnly{prometheus.NewDesc("d_seconds", "computed", []string{"name"}, nil)},
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
	if err := r.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "again"})); err == nil {
		t.Errorf("duplicate registration accepted")
	}
}
