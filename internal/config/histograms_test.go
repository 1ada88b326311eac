package config

import (
	"slices"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

func TestHistogramsErrorsNameLineAndKey(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"bad mode", "histograms:\n  classicBuckets: native\n", `line 2: histograms.classicBuckets: unknown mode "native" (want all or thresholds)`},
		{"thresholds without the mode", "histograms:\n  thresholds:\n    kube_convergence_pod_startup_seconds: [5]\n", `line 2: histograms.thresholds: only used with classicBuckets "thresholds"`},
		{"unknown histogram", "histograms:\n  classicBuckets: thresholds\n  thresholds:\n    kube_convergence_pod_startup: [5]\n",
			`line 4: histograms.thresholds: unknown histogram "kube_convergence_pod_startup" (want one of kube_convergence_endpoint_propagation_seconds, kube_convergence_endpoint_removal_seconds, kube_convergence_pod_stage_interval_seconds, kube_convergence_pod_startup_seconds, kube_convergence_rollout_duration_seconds, kube_convergence_rollout_recovered_duration_seconds)`},
		{"not a bucket", "histograms:\n  classicBuckets: thresholds\n  thresholds:\n    kube_convergence_endpoint_propagation_seconds: [5, 7]\n",
			`line 4: histograms.thresholds.kube_convergence_endpoint_propagation_seconds: 7 is not one of its buckets [0.05 0.1 0.25 0.5 1 2 3 5 10 15 30 60 120 300]`},
		{"empty", "histograms:\n  classicBuckets: thresholds\n  thresholds:\n    kube_convergence_endpoint_propagation_seconds: []\n",
			`line 4: histograms.thresholds.kube_convergence_endpoint_propagation_seconds: want at least one threshold (the bundled SLOs read [1 5])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	all := latency.PodStartupBuckets
	name := "kube_convergence_pod_startup_seconds"
	for _, tc := range []struct {
		doc  string
		want []float64
	}{
		{"", all},
		{"histograms: {classicBuckets: all}\n", all},
		{"histograms: {classicBuckets: thresholds}\n", []float64{5, 30, 300}},
		// In the layout's order, whatever the file's.
		{"histograms:\n  classicBuckets: thresholds\n  thresholds:\n    " + name + ": [600, 2]\n", []float64{2, 600}},
	} {
		c, err := Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Buckets(name, all); !slices.Equal(got, tc.want) {
			t.Errorf("%q: Buckets = %v, want %v", tc.doc, got, tc.want)
		}
		if got := c.Buckets("kube_convergence_controller_retry_interval_seconds", []float64{1, 2}); !slices.Equal(got, []float64{1, 2}) {
			t.Errorf("%q: a histogram the mode does not cut lost buckets: %v", tc.doc, got)
		}
	}
	for name, keep := range DefaultClassicThresholds {
		for _, k := range keep {
			if !slices.Contains(histogramBuckets[name], k) {
				t.Errorf("DefaultClassicThresholds[%s]: %v is not one of its buckets", name, k)
			}
		}
	}
}
