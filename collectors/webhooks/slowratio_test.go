package webhooks

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
)

// exposition renders the API server's webhook histogram the way it
// exposes it (name, type, operation, rejected; buckets 0.005 ... 25 s),
// for one webhook and type with calls of the given durations split over
// two operations.
func exposition(name, typ string, calls []float64) string {
	bounds := []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 25}
	var b strings.Builder
	b.WriteString("# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] Admission webhook latency histogram in seconds.\n")
	b.WriteString("# TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n")
	for i, op := range []string{"CREATE", "UPDATE"} {
		var mine []float64
		for j, c := range calls {
			if j%2 == i {
				mine = append(mine, c)
			}
		}
		sum := 0.0
		for _, c := range mine {
			sum += c
		}
		labels := fmt.Sprintf(`name=%q,operation=%q,rejected="false",type=%q`, name, op, typ)
		for _, le := range bounds {
			n := 0
			for _, c := range mine {
				if c <= le {
					n++
				}
			}
			fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_bucket{%s,le=\"%g\"} %d\n", labels, le, n)
		}
		fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_bucket{%s,le=\"+Inf\"} %d\n", labels, len(mine))
		fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_sum{%s} %g\n", labels, sum)
		fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_count{%s} %d\n", labels, len(mine))
	}
	return b.String()
}

func parse(t *testing.T, s string) map[hookKey]histogram {
	t.Helper()
	h, err := parseWebhookHistograms(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestSlowRatios(t *testing.T) {
	k := hookKey{"w.example.com", admission.Mutating}
	before := parse(t, exposition("w.example.com", "admit", repeat(0.2, 10)))
	if h := before[k]; h.Count != 10 || h.Buckets[0.5] != 10 {
		t.Fatalf("parsed %+v under %v, want 10 calls summed over operations, type admit read as mutating", before, k)
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		calls   []float64 // all calls so far, the first 10 at 0.2 s
		want    float64   // NaN: no ratio
	}{
		// timeout 10 s: bucket 2.5 s. 6 of the 20 new calls at 3 s.
		{"10s timeout, 6 of 20 slow", 10 * time.Second, append(repeat(0.2, 24), repeat(3, 6)...), 0.3},
		// The same calls against timeout 30 s (bucket 10 s): none slow.
		{"30s timeout, 3 s calls fast", 30 * time.Second, append(repeat(0.2, 24), repeat(3, 6)...), 0},
		// timeout 2 s: bucket 1 s; 1.5 s calls are slow.
		{"2s timeout, 1.5 s calls slow", 2 * time.Second, append(repeat(0.2, 10), repeat(1.5, 10)...), 1},
		// timeout 1 s: bucket 0.5 s; 0.2 s calls are fast.
		{"1s timeout, 0.2 s calls fast", time.Second, repeat(0.2, 20), 0},
		// No new calls: no ratio.
		{"no calls", 10 * time.Second, repeat(0.2, 10), math.NaN()},
		// The API server restarted: 4 calls since, 2 slow.
		{"reset", 10 * time.Second, []float64{3, 0.2, 3, 0.2}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := parse(t, exposition("w.example.com", "admit", tc.calls))
			got, ok := slowRatios(before, after, map[hookKey]time.Duration{k: tc.timeout})[k]
			if math.IsNaN(tc.want) {
				if ok {
					t.Errorf("ratio %v, want none", got)
				}
				return
			}
			if !ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("ratio %v (%v), want %v", got, ok, tc.want)
			}
		})
	}
	// A webhook the exporter has no timeout for is not judged.
	if r := slowRatios(before, parse(t, exposition("w.example.com", "admit", repeat(3, 20))), nil); len(r) != 0 {
		t.Errorf("ratios without timeouts: %v", r)
	}
}

// Only the webhook histogram's lines are parsed: other families, however
// many and even malformed, or with the histogram's name as a prefix, are
// skipped.
func TestParseWebhookHistogramsFilters(t *testing.T) {
	other := "# HELP apiserver_request_total Counter of apiserver requests.\n" +
		"# TYPE apiserver_request_total counter\n" +
		"apiserver_request_total{code=\"200\"} 12\n" +
		"apiserver_request_total{code=\"201\" 3 not a sample\n" +
		"# TYPE apiserver_admission_webhook_admission_duration_seconds_extra gauge\n" +
		"apiserver_admission_webhook_admission_duration_seconds_extra{name=\"x\"} 1\n"
	h := parse(t, other+exposition("w.example.com", "validating", repeat(0.2, 4))+other)
	k := hookKey{Webhook: "w.example.com", Type: admission.Validating}
	if len(h) != 1 || h[k].Count != 4 || h[k].Buckets[0.5] != 4 || h[k].Buckets[0.1] != 0 {
		t.Errorf("parsed %+v, want only %v with 4 calls at <= 0.5 s", h, k)
	}
}
