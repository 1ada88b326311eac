package latency

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

func TestThresholdMatchesStoredLe(t *testing.T) {
	// What Prometheus 3 stores for each bucket boundary: its scrape parsers
	// rewrite le with labels.FormatOpenMetricsFloat (prometheus module
	// v0.316.0, model/textparse normalizeFloatsInLabelValues).
	for b, want := range map[float64]string{0.1: "0.1", 0.25: "0.25", 1: "1.0", 2.5: "2.5", 300: "300.0", 3600: "3600.0"} {
		if got := Threshold(b); got != want {
			t.Errorf("Threshold(%v) = %q, want %q", b, got, want)
		}
	}
}

func TestExemplarFitsWithLongNames(t *testing.T) {
	h := prometheus.NewHistogram(HistogramOpts("x_seconds", "x", RolloutBuckets))
	uid := "0f8e4c1a-6a51-4b37-9f2c-3c6c0d3b1e2f"
	for _, name := range []string{"web", strings.Repeat("a", 253), strings.Repeat("é", 253)} {
		l := Exemplar(uid, "123456789", name)
		n := 0
		for k, v := range l {
			n += utf8.RuneCountInString(k) + utf8.RuneCountInString(v)
		}
		if n > MaxExemplarRunes {
			t.Fatalf("exemplar of %d runes > %d", n, MaxExemplarRunes)
		}
		if l["uid"] != uid || l["generation"] != "123456789" || !strings.HasPrefix(name, l["name"]) || l["name"] == "" {
			t.Fatalf("exemplar lost identity: %v", l)
		}
		Observe(h, 1, l) // panics if over the limit
	}
}
