// Package latency holds what every latency histogram of the exporter shares:
// bucket layouts, the `threshold` label of the *_threshold_exceeded_total
// counters, native-histogram settings and exemplars.
//
// The SLI of a latency threshold T is good = the le=T bucket (completions
// within T) and bad = crossings of T (episodes whose age passed T before
// completing, counted at that moment whether or not they ever complete), so
// stuck objects burn error budget while they are stuck.
package latency

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// RolloutBuckets: write -> stage, 0.1 s to 1 h. Every threshold used by the
// bundled SLOs must be one of these.
var RolloutBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600}

// PodStartupBuckets: pod creation -> condition. Sub-second buckets, then
// the kubelet's kubelet_pod_start_sli_duration_seconds layout up to 1 h.
var PodStartupBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// EndpointBuckets: pod Ready -> ready endpoint, and back out. Sub-second
// buckets, then up to kube-proxy's network-programming range (300 s).
var EndpointBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120, 300}

// OneSecondBuckets are for estimates built on API timestamps, which have
// one-second precision: finer buckets would only show truncation noise.
var OneSecondBuckets = []float64{0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300}

// Threshold formats a bucket boundary exactly as Prometheus stores its `le`
// label: Prometheus 3 normalises le="1" to "1.0" when it scrapes
// (labels.FormatOpenMetricsFloat), but leaves ordinary labels alone, so the
// threshold label must be written in the stored form to match le in rules.
func Threshold(b float64) string {
	s := strconv.FormatFloat(b, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // not 1e+06, NaN, Inf
		s += ".0"
	}
	return s
}

// HistogramOpts returns options for a latency histogram with classic buckets
// and native histogram settings side by side (controller-runtime's choice):
// the bundled rules read the classic `le` buckets, so scrapes must keep
// ingesting them when native histograms are enabled.
func HistogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	opts := BucketOpts(buckets)
	opts.Name, opts.Help = name, help
	return opts
}

// BucketOpts is HistogramOpts without a name and help, for a histogram
// built from a metric.Family (which gives them).
func BucketOpts(buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Buckets:                         buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: 1 << 60, // never reset: a reset would lose history
	}
}

// MaxExemplarRunes is client_golang's limit on the combined length of an
// exemplar's label names and values; ObserveWithExemplar panics beyond it.
const MaxExemplarRunes = prometheus.ExemplarMaxRunes

// Exemplar labels an observation with the object's identity, most useful
// first: uid and generation, then the name truncated to fit the limit.
func Exemplar(uid, generation, name string) prometheus.Labels {
	return TracedExemplar(uid, generation, "", name)
}

// TracedExemplar is Exemplar with the episode's trace id (when tracing is
// on, "" otherwise) in the priority uid, generation, trace_id, name: the
// name is what gets truncated to keep client_golang's 128-rune limit (a
// 36-rune uid, a generation of up to 19 digits and a 32-digit trace id
// leave it 16 runes at worst: 128 - (3+36) - (10+19) - (8+32) - 4, names
// and values counted).
func TracedExemplar(uid, generation, traceID, name string) prometheus.Labels {
	l := prometheus.Labels{"uid": uid}
	used := len("uid") + utf8.RuneCountInString(uid)
	add := func(k, v string) {
		if v == "" || used+len(k)+utf8.RuneCountInString(v) > MaxExemplarRunes {
			return
		}
		l[k] = v
		used += len(k) + utf8.RuneCountInString(v)
	}
	add("generation", generation)
	add("trace_id", traceID)
	room := MaxExemplarRunes - used - len("name")
	if room > 0 && name != "" {
		if utf8.RuneCountInString(name) > room {
			name = string([]rune(name)[:room])
		}
		l["name"] = name
	}
	return l
}

// Observe records v on o with an exemplar when o supports exemplars.
func Observe(o prometheus.Observer, v float64, exemplar prometheus.Labels) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && exemplar != nil {
		eo.ObserveWithExemplar(v, exemplar)
		return
	}
	o.Observe(v)
}
