package rules

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metricdoc"
	"github.com/kube-convergence/kube-convergence-exporter/internal/serve"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// registered returns every metric the exporter registers, by name, the way
// internal/gen builds the README's metric reference.
func registered(t *testing.T) map[string]metricdoc.Metric {
	t.Helper()
	rec := metricdoc.NewRecorder()
	if _, err := serve.Register(rec, serve.RegisterOptions{Watch: true}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if _, err := serve.New(nil, "", nil, all.Collectors(all.Options{Logger: logger}), rec, logger); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdoc.Metric{}
	for _, m := range rec.Metrics() {
		out[m.Name] = m
	}
	return out
}

// The latency SLIs' catalogue (slo.LatencyMetrics) names what the
// collectors register: the histogram with its labels, and the threshold
// counter with the same labels plus threshold. A renamed metric or label
// fails here, not as an SLI that matches nothing in production.
func TestLatencyCatalogueMatchesTheExporter(t *testing.T) {
	reg := registered(t)
	for _, lm := range slo.LatencyMetrics() {
		var labels []string
		for _, l := range lm.Labels {
			labels = append(labels, l.Name)
		}
		h, ok := reg[lm.Histogram]
		switch {
		case !ok:
			t.Errorf("%s: not registered by the exporter", lm.Histogram)
		case h.Type != "histogram" || !sameSet(h.Labels, labels):
			t.Errorf("%s: registered as %s with labels %v, the SLO catalogue says histogram with %v", lm.Histogram, h.Type, h.Labels, labels)
		}
		c, ok := reg[lm.Exceeded]
		switch {
		case !ok:
			t.Errorf("%s: not registered by the exporter", lm.Exceeded)
		case c.Type != "counter" || !sameSet(c.Labels, append(slices.Clone(labels), "threshold")):
			t.Errorf("%s: registered as %s with labels %v, want a counter with %v and threshold", lm.Exceeded, c.Type, c.Labels, labels)
		}
	}
}

var exporterMetric = regexp.MustCompile(`\bkube_convergence_[a-z_]+`)

// Every exporter metric the bundled rules and SLOs read exists.
func TestRulesReadRegisteredMetrics(t *testing.T) {
	reg := registered(t)
	for _, f := range append(glob(t, "*.rules.yml"), "slos.yaml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range exporterMetric.FindAllString(string(b), -1) {
			base := strings.TrimSuffix(name, "_bucket")
			if _, ok := reg[base]; !ok {
				t.Errorf("%s reads %s, which the exporter does not register", filepath.Base(f), name)
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
