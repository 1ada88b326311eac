package metric

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every constructor builds what the family declares: the exposition's HELP,
// TYPE and labels are the declaration's.
func TestFamiliesBuildWhatTheyDeclare(t *testing.T) {
	vec := Family{Name: "a_total", Type: Counter, Help: "As.", Labels: []string{"x"}}
	fn := Family{Name: "b_info", Type: Gauge, Help: "Bs.", ConstLabels: prometheus.Labels{"version": "1"}}
	h := Family{Name: "c_seconds", Type: Histogram, Help: "Cs."}
	reg := prometheus.NewPedanticRegistry()
	c := vec.NewCounterVec()
	c.WithLabelValues("1").Inc()
	if err := Register(reg,
		Declare(c, vec),
		Declare(fn.NewGaugeFunc(func() float64 { return 1 }), fn),
		Declare(h.NewHistogram(prometheus.HistogramOpts{Name: "ignored", Help: "ignored", Buckets: []float64{1}}), h),
	); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP a_total As.
# TYPE a_total counter
a_total{x="1"} 1
# HELP b_info Bs.
# TYPE b_info gauge
b_info{version="1"} 1
# HELP c_seconds Cs.
# TYPE c_seconds histogram
c_seconds_bucket{le="1"} 0
c_seconds_bucket{le="+Inf"} 0
c_seconds_sum 0
c_seconds_count 0
`)); err != nil {
		t.Error(err)
	}
}

// A family built as another type than declared, or without the labels it
// declares, is a programming error caught at construction.
func TestFamilyBuiltAsAnotherTypePanics(t *testing.T) {
	for name, build := range map[string]func(){
		"gauge as counter":   func() { Family{Name: "g", Type: Gauge}.NewCounterVec() },
		"counter as gauge":   func() { Family{Name: "c_total", Type: Counter}.NewGaugeFunc(func() float64 { return 0 }) },
		"labels dropped":     func() { Family{Name: "c_total", Type: Counter, Labels: []string{"x"}}.NewCounter() },
		"histogram as gauge": func() { Family{Name: "h", Type: Histogram}.NewGaugeVec() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			build()
		}()
	}
}
