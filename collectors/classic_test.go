package collectors

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// histograms.classicBuckets: thresholds keeps the classic buckets and the
// crossing counters at the thresholds only, and the native histogram
// still resolves every observation.
func TestClassicThresholdsKeepNativeResolution(t *testing.T) {
	cfg, err := config.Parse([]byte("histograms: {classicBuckets: thresholds}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEpisodes(cfg, nil)
	if got, want := e.Duration.Buckets(), []float64{5, 30, 300}; !slices.Equal(got, want) {
		t.Fatalf("Buckets = %v, want %v", got, want)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := e.Duration.Register(reg); err != nil {
		t.Fatal(err)
	}
	lvs := []string{"Deployment", "prod", "available", "template"}
	e.Duration.Open(lvs...)
	e.Duration.Observe(7, nil, lvs...)
	e.Duration.Observe(7.5, nil, lvs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var thresholds []string
	for _, mf := range mfs {
		switch mf.GetName() {
		case "kube_convergence_rollout_duration_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			var bounds []float64
			var counts []uint64
			for _, b := range h.GetBucket() {
				bounds, counts = append(bounds, b.GetUpperBound()), append(counts, b.GetCumulativeCount())
			}
			if !slices.Equal(bounds, []float64{5, 30, 300}) || !slices.Equal(counts, []uint64{0, 2, 2}) {
				t.Errorf("classic buckets %v counts %v, want [5 30 300] [0 2 2]", bounds, counts)
			}
			// Factor 1.1 is schema 3: 7 and 7.5 fall in different native
			// buckets (7 < 2^(23/8) = 7.34 < 7.5), which no classic
			// bucket tells apart.
			n, count := 0, int64(0)
			for _, d := range h.GetPositiveDelta() { // counts, delta-encoded
				if count += d; count != 0 {
					n++
				}
			}
			if h.GetSchema() != 3 || n != 2 {
				t.Errorf("native histogram: schema %d, %d populated buckets (deltas %v), want schema 3 and 2", h.GetSchema(), n, h.GetPositiveDelta())
			}
		case "kube_convergence_rollout_threshold_exceeded_total":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "threshold" {
						thresholds = append(thresholds, l.GetValue())
					}
				}
			}
		}
	}
	slices.Sort(thresholds)
	if want := []string{"30.0", "300.0", "5.0"}; !slices.Equal(thresholds, want) {
		t.Errorf("crossing counter thresholds %v, want %v", thresholds, want)
	}
}
