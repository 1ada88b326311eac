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

// withStart is an exposition of a replica started at start.
func withStart(start float64, name string, calls []float64) string {
	return fmt.Sprintf("# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"+
		"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %g\n", start) + exposition(name, "validating", calls)
}

// Two API server replicas behind the kubernetes Service, read in turn: A
// has 100 calls, 10 slow, then 120, 14 slow; B 1,000, none slow, then
// 1,060. Compared read to read (the old way), B after A gives a ratio of
// (1000-100 - (1000-90))/900 < 0 and A after B a count that went down.
// Per replica: after A's second read, A's 20 calls, 4 slow: 0.2; after B's
// second, A's 20 and B's 60, 4 slow: 4/80 = 0.05. A replica not read for
// three intervals drops out.
func TestSlowRatiosPerReplica(t *testing.T) {
	k := hookKey{"w.example.com", admission.Validating}
	timeouts := map[hookKey]time.Duration{k: 10 * time.Second}
	calls := func(total, slow int) []float64 { return append(repeat(0.2, total-slow), repeat(3, slow)...) }
	read := func(start float64, c []float64) scrape {
		sc, err := parseScrape(strings.NewReader(withStart(start, "w.example.com", c)))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	const a, b = 1.7e9, 1.7e9 + 42.5
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var in instances
	steps := []struct {
		sc   scrape
		want float64 // NaN: none
	}{
		{read(a, calls(100, 10)), math.NaN()},
		{read(b, calls(1000, 0)), math.NaN()},
		{read(a, calls(120, 14)), 0.2},
		{read(b, calls(1060, 0)), 0.05},
	}
	for i, st := range steps {
		got, ok := in.add(st.sc, timeouts, t0.Add(time.Duration(i)*10*time.Second), 30*time.Second)[k]
		if math.IsNaN(st.want) {
			if ok {
				t.Errorf("read %d: ratio %v, want none yet", i+1, got)
			}
			continue
		}
		if !ok || math.Abs(got-st.want) > 1e-9 {
			t.Errorf("read %d: ratio %v (%v), want %v", i+1, got, ok, st.want)
		}
	}
	// 40 s later only B is read again (20 more calls, 10 slow): A's last
	// read is 70 s old, past the window of 30 s.
	got := in.add(read(b, calls(1080, 10)), timeouts, t0.Add(70*time.Second), 30*time.Second)[k]
	if got != 0.5 {
		t.Errorf("after A dropped out: ratio %v, want B's 10/20", got)
	}
	if len(in.byStart) != 1 {
		t.Errorf("%d replicas remembered, want 1", len(in.byStart))
	}
	// Reads of many replicas (restarts) keep at most maxInstances.
	for i := range 3 * maxInstances {
		in.add(read(float64(i), calls(10, 1)), timeouts, t0.Add(80*time.Second), 30*time.Second)
	}
	if len(in.byStart) > maxInstances {
		t.Errorf("%d replicas remembered, want at most %d", len(in.byStart), maxInstances)
	}
}

// Whatever the interleaving of two replicas' reads, and even without a
// process start time to tell them apart, every ratio is within [0, 1].
func TestSlowRatioBounded(t *testing.T) {
	k := hookKey{"w.example.com", admission.Validating}
	timeouts := map[hookKey]time.Duration{k: 10 * time.Second}
	var in instances
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	totals := [2]int{100, 5000}
	slows := [2]int{90, 0}
	for i := range 200 {
		r := (i * 7 / 3) % 2 // an irregular interleaving
		totals[r] += 10 + i%13
		slows[r] += (i % 5) * (1 - r)
		c := append(repeat(0.2, totals[r]-slows[r]), repeat(3, slows[r])...)
		sc, err := parseScrape(strings.NewReader(exposition("w.example.com", "validating", c)))
		if err != nil {
			t.Fatal(err)
		}
		for h, v := range in.add(sc, timeouts, t0.Add(time.Duration(i)*time.Second), 3*time.Second) {
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Fatalf("read %d: ratio of %v = %v", i, h, v)
			}
		}
	}
}
