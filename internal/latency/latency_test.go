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

// The rune budget with a trace id: uid, generation and trace_id whole,
// the name truncated to what is left, never past client_golang's limit.
func TestTracedExemplarRuneBudget(t *testing.T) {
	h := prometheus.NewHistogram(HistogramOpts("x_seconds", "x", RolloutBuckets))
	uid := "0f8e4c1a-6a51-4b37-9f2c-3c6c0d3b1e2f"
	tid := "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		generation, name string
		wantName         int // runes of the name kept
	}{
		{"3", "web", 3},
		// 3+36 + 10+1 + 8+32 + 4 = 94: 34 runes left for the name.
		{"3", strings.Repeat("a", 253), 34},
		{"3", strings.Repeat("é", 253), 34},
		// The largest generation (int64, 19 digits): 16 runes left.
		{"9223372036854775807", strings.Repeat("n", 253), 16},
	} {
		l := TracedExemplar(uid, tc.generation, tid, tc.name)
		n := 0
		for k, v := range l {
			n += utf8.RuneCountInString(k) + utf8.RuneCountInString(v)
		}
		if n > MaxExemplarRunes {
			t.Fatalf("exemplar of %d runes > %d", n, MaxExemplarRunes)
		}
		if l["uid"] != uid || l["generation"] != tc.generation || l["trace_id"] != tid || utf8.RuneCountInString(l["name"]) != tc.wantName ||
			!strings.HasPrefix(tc.name, l["name"]) {
			t.Fatalf("exemplar %v: want uid, generation, trace_id whole and %d runes of the name", l, tc.wantName)
		}
		Observe(h, 1, l) // panics if over the limit
	}
	// Without tracing there is no trace_id label at all.
	if l := TracedExemplar(uid, "3", "", "web"); len(l) != 3 || l["trace_id"] != "" {
		t.Fatalf("no trace id: %v", l)
	}
	if _, ok := TracedExemplar(uid, "3", "", "web")["trace_id"]; ok {
		t.Fatal("empty trace_id label")
	}
}
