// Package metric declares the exporter's metric families as data: name,
// type, a one-sentence help and the label names, written once where the
// family is built. The exposition's HELP and TYPE, the generated metric
// reference (internal/metricdoc) and the SLO catalogue read the same
// declaration; the detail behind each one-sentence help is in
// docs/metrics.md, which the reference links to.
//
// Families are built into ordinary client_golang collectors, so the hot
// paths (WithLabelValues, Observe, Inc) are client_golang's own. What is
// registered carries its declarations (Declared), and internal/metricdoc
// refuses a collector that does not: no metric reaches /metrics without a
// declaration, and none is read back by parsing a Desc.
package metric

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Type is a family's Prometheus type, as the reference names it.
type Type string

// The types the exporter exposes.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// MaxHelp is the longest help in runes: one sentence that says what is
// counted or measured. The conditions, exceptions and label values go to
// the family's section in docs/metrics.md (the help texts averaged 326
// runes, up to 924, before they were cut to one sentence).
const MaxHelp = 150

// Family declares one metric family.
type Family struct {
	Name string
	Type Type
	// Help is one sentence of at most MaxHelp runes.
	Help string
	// Labels are the variable labels, in the order their values are given.
	Labels []string
	// ConstLabels are fixed labels of an info metric (build_info); the
	// reference does not list them.
	ConstLabels prometheus.Labels
}

// Desc is the family's descriptor, for collectors that build their samples
// at scrape time.
func (f Family) Desc() *prometheus.Desc {
	return prometheus.NewDesc(f.Name, f.Help, f.Labels, f.ConstLabels)
}

// NewCounterVec builds a counter family.
func (f Family) NewCounterVec() *prometheus.CounterVec {
	f.must(Counter)
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name, Help: f.Help, ConstLabels: f.ConstLabels}, f.Labels)
}

// NewGaugeVec builds a gauge family.
func (f Family) NewGaugeVec() *prometheus.GaugeVec {
	f.must(Gauge)
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.Name, Help: f.Help, ConstLabels: f.ConstLabels}, f.Labels)
}

// NewHistogramVec builds a histogram family; opts gives the buckets and
// the native histogram settings, the family the rest.
func (f Family) NewHistogramVec(opts prometheus.HistogramOpts) *prometheus.HistogramVec {
	f.must(Histogram)
	return prometheus.NewHistogramVec(f.histogramOpts(opts), f.Labels)
}

// NewCounter builds a counter without variable labels.
func (f Family) NewCounter() prometheus.Counter {
	f.must(Counter)
	f.mustNotHaveLabels()
	return prometheus.NewCounter(prometheus.CounterOpts{Name: f.Name, Help: f.Help, ConstLabels: f.ConstLabels})
}

// NewHistogram builds a histogram without variable labels.
func (f Family) NewHistogram(opts prometheus.HistogramOpts) prometheus.Histogram {
	f.must(Histogram)
	f.mustNotHaveLabels()
	return prometheus.NewHistogram(f.histogramOpts(opts))
}

// NewCounterFunc builds a counter read from fn at scrape time.
func (f Family) NewCounterFunc(fn func() float64) prometheus.CounterFunc {
	f.must(Counter)
	f.mustNotHaveLabels()
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: f.Name, Help: f.Help, ConstLabels: f.ConstLabels}, fn)
}

// NewGaugeFunc builds a gauge read from fn at scrape time.
func (f Family) NewGaugeFunc(fn func() float64) prometheus.GaugeFunc {
	f.must(Gauge)
	f.mustNotHaveLabels()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: f.Name, Help: f.Help, ConstLabels: f.ConstLabels}, fn)
}

func (f Family) histogramOpts(opts prometheus.HistogramOpts) prometheus.HistogramOpts {
	opts.Namespace, opts.Subsystem, opts.Name, opts.Help, opts.ConstLabels = "", "", f.Name, f.Help, f.ConstLabels
	return opts
}

// must panics when the family is built as another type than declared: a
// programming error that any test building the collector finds.
func (f Family) must(t Type) {
	if f.Type != t {
		panic(fmt.Sprintf("metric: %s is declared %q and built as a %s", f.Name, f.Type, t))
	}
}

func (f Family) mustNotHaveLabels() {
	if len(f.Labels) > 0 {
		panic(fmt.Sprintf("metric: %s declares labels %v and is built without", f.Name, f.Labels))
	}
}

// Declared is a collector that names the families it exposes, one per
// descriptor its Describe sends.
type Declared interface {
	prometheus.Collector
	Families() []Family
}

// Declare returns c, built from fs, as a Declared collector to register.
func Declare(c prometheus.Collector, fs ...Family) Declared { return declared{c, fs} }

type declared struct {
	prometheus.Collector
	families []Family
}

func (d declared) Families() []Family { return d.families }

// Register registers every collector on reg, stopping at the first error.
func Register(reg prometheus.Registerer, cs ...Declared) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
