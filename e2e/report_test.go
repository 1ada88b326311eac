package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// The backfilled history of TestReportOnBackfilledHistory: 35 days of one
// sample a minute, ending at reportAt, with a scrape gap and a day without
// traffic, crossing the October/November boundary.
var (
	reportAt     = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	historyStart = reportAt.Add(-35 * 24 * time.Hour)
	// No sample at 03:00 ... 05:59 (Prometheus was down; the exporter's
	// counters kept counting).
	gapFrom, gapTo = time.Date(2026, 10, 20, 3, 0, 0, 0, time.UTC), time.Date(2026, 10, 20, 6, 0, 0, 0, time.UTC)
	// No event in (00:00, 24:00] of this day; the counters are scraped.
	idleFrom, idleTo = time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)
	// The last 2 hours, 10% of rollouts are slow: the strict SLO pages (100x),
	// the 99% one burns at 10x (no page at 14.4x) and its budget will run out.
	burstFrom = reportAt.Add(-2 * time.Hour)
)

// omSeries is one backfilled series and its samples (ms, value).
type omSeries struct {
	name   string
	labels map[string]string
	t      []int64
	v      []float64
}

func (s *omSeries) add(t time.Time, v float64) {
	s.t, s.v = append(s.t, t.UnixMilli()), append(s.v, v)
}

func (s *omSeries) line(i int) string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for j, k := range keys {
		parts[j] = fmt.Sprintf("%s=%q", k, s.labels[k])
	}
	// OpenMetrics timestamps are seconds.
	return fmt.Sprintf("%s{%s} %g %s", s.name, strings.Join(parts, ","), s.v[i], fmt.Sprintf("%.3f", float64(s.t[i])/1000))
}

// rolloutHistory generates the history: per (namespace, kind) of stage
// available / change template, the le="300.0" and le="+Inf" buckets and
// the threshold="300.0" counter (classic histogram, le in the form
// Prometheus 3 stores); plus a series of stage observed that every SLO
// must leave out (half of its rollouts are slow). Good and bad series of
// a labelset share every timestamp.
func rolloutHistory() (buckets, exceeded []*omSeries) {
	rng := rand.New(rand.NewPCG(16, 2026))
	type set struct {
		ns, kind, stage string
		slow            float64 // probability that a rollout is slow
		min             int     // rollouts per minute: min + [0, 3)
	}
	sets := []set{
		{"team-a", "Deployment", "available", 0.002, 1},
		{"team-a", "StatefulSet", "available", 0.002, 0},
		{"team-b", "Deployment", "available", 0.01, 0},
		{"team-b", "StatefulSet", "available", 0.012, 0},
		{"team-a", "Deployment", "observed", 0.5, 0},
	}
	type counters struct{ good, inf, bad float64 }
	c := make([]counters, len(sets))
	for i, s := range sets {
		l := func(extra ...string) map[string]string {
			m := map[string]string{"namespace": s.ns, "kind": s.kind, "stage": s.stage, "change": "template", "job": "kube-convergence-exporter"}
			for j := 0; j < len(extra); j += 2 {
				m[extra[j]] = extra[j+1]
			}
			return m
		}
		buckets = append(buckets,
			&omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "300.0")},
			&omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "+Inf")})
		exceeded = append(exceeded, &omSeries{name: "kube_convergence_rollout_threshold_exceeded_total", labels: l("threshold", "300.0")})
		// Series that existed long before the history: not zero at start.
		c[i] = counters{good: 1000, inf: 1010, bad: 10}
	}
	for t := historyStart; !t.After(reportAt); t = t.Add(time.Minute) {
		idle := t.After(idleFrom) && !t.After(idleTo)
		for i, s := range sets {
			if !idle {
				n := s.min + rng.IntN(3)
				p := s.slow
				if t.After(burstFrom) && s.stage == "available" {
					p = 0.10
				}
				for range n {
					if rng.Float64() < p {
						c[i].bad++
						c[i].inf++
					} else {
						c[i].good++
						c[i].inf++
					}
				}
			}
			if !t.Before(gapFrom) && t.Before(gapTo) {
				continue
			}
			buckets[2*i].add(t, c[i].good)
			buckets[2*i+1].add(t, c[i].inf)
			exceeded[i].add(t, c[i].bad)
		}
	}
	return buckets, exceeded
}

// writeOpenMetrics writes the families in OpenMetrics text: each family
// contiguous, each series' samples in time order, with timestamps, # EOF.
func writeOpenMetrics(path string, buckets, exceeded []*omSeries) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "# TYPE kube_convergence_rollout_duration_seconds histogram")
	// A histogram's MetricPoint is its buckets at one timestamp.
	for i := 0; i < len(buckets); i += 2 {
		for j := range buckets[i].t {
			fmt.Fprintln(w, buckets[i].line(j))
			fmt.Fprintln(w, buckets[i+1].line(j))
		}
	}
	fmt.Fprintln(w, "# TYPE kube_convergence_rollout_threshold_exceeded counter")
	for _, s := range exceeded {
		for j := range s.t {
			fmt.Fprintln(w, s.line(j))
		}
	}
	fmt.Fprintln(w, "# EOF")
	return errors.Join(w.Flush(), f.Close())
}

// promIncrease is Prometheus's increase() over (start, end], written from
// its documented semantics (promql/functions.go extrapolatedRate), not
// from the code under test: samples in the left-open range; the increase
// between the first and the last; extrapolated to each edge when the edge
// is within 1.1 average sample intervals, else by half an interval; toward
// the start never below where the counter would reach zero. No result with
// fewer than two samples.
func promIncrease(s *omSeries, start, end time.Time) (float64, bool) {
	lo, hi := start.UnixMilli(), end.UnixMilli()
	var ts []int64
	var vs []float64
	for i, t := range s.t {
		if t > lo && t <= hi {
			ts, vs = append(ts, t), append(vs, s.v[i])
		}
	}
	if len(ts) < 2 {
		return 0, false
	}
	inc := vs[len(vs)-1] - vs[0]
	for i := 1; i < len(vs); i++ {
		if vs[i] < vs[i-1] {
			inc += vs[i-1]
		}
	}
	toStart := float64(ts[0]-lo) / 1000
	toEnd := float64(hi-ts[len(ts)-1]) / 1000
	sampled := float64(ts[len(ts)-1]-ts[0]) / 1000
	avg := sampled / float64(len(ts)-1)
	if toStart >= avg*1.1 {
		toStart = avg / 2
	}
	if inc > 0 && vs[0] >= 0 {
		if toZero := sampled * vs[0] / inc; toZero < toStart {
			toStart = toZero
		}
	}
	if toEnd >= avg*1.1 {
		toEnd = avg / 2
	}
	return inc * (sampled + toStart + toEnd) / sampled, true
}

// expectExhaustion is the report's definition of exhaustion, from the
// test's own increase() numbers: B = (1 - objective) x the window's events
// - its bad events, r = the last day's bad events per day; exhausted when
// B <= 0; "not at this rate" when r is 0 or B / r is at least the window;
// else at + B / r.
func expectExhaustion(window, day expectation, windowLen time.Duration, budget float64) (string, time.Time) {
	remaining := budget*window.total() - window.bad
	if remaining <= 0 {
		return report.ExhaustionExhausted, time.Time{}
	}
	if !(day.bad > 0) {
		return report.ExhaustionNever, time.Time{}
	}
	d := time.Duration(remaining / day.bad * float64(24*time.Hour))
	if d >= windowLen {
		return report.ExhaustionNever, time.Time{}
	}
	return report.ExhaustionProjected, reportAt.Add(d)
}

// events sums the increases of the selected series.
type expectation struct{ good, bad float64 }

func expectEvents(buckets, exceeded []*omSeries, start, end time.Time, sel func(l map[string]string) bool) expectation {
	var e expectation
	for _, s := range buckets {
		if s.labels["le"] == "300.0" && sel(s.labels) {
			v, _ := promIncrease(s, start, end)
			e.good += v
		}
	}
	for _, s := range exceeded {
		if sel(s.labels) {
			v, _ := promIncrease(s, start, end)
			e.bad += v
		}
	}
	return e
}

func (e expectation) total() float64 { return e.good + e.bad }

const reportSLOs = `service: backfill
slos:
  - name: rollouts
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {stage: available, change: template}
  - name: rollouts-ratio
    objective: 0.99
    period: 30d
    sli:
      ratio:
        errorQuery: sum(rate(kube_convergence_rollout_threshold_exceeded_total{stage="available", change="template", threshold="300.0"}[{{.window}}]))
        totalQuery: sum(rate(kube_convergence_rollout_duration_seconds_bucket{stage="available", change="template", le="300.0"}[{{.window}}])) + sum(rate(kube_convergence_rollout_threshold_exceeded_total{stage="available", change="template", threshold="300.0"}[{{.window}}]))
  - name: nowhere
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {namespace: nowhere, stage: available}
`

const reportStrictSLO = `  - name: rollouts-strict
    objective: 0.999
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {stage: available, change: template}
`

// startBackfilledPrometheus writes the history as OpenMetrics, backfills
// it with promtool into dir/prometheus and starts the real Prometheus on
// it; the test's cleanup stops it.
func startBackfilledPrometheus(ctx context.Context, t *testing.T, dir string, buckets, exceeded []*omSeries, extraArgs ...string) *sandbox.Prometheus {
	t.Helper()
	return startBackfilledPrometheusScraping(ctx, t, dir, buckets, exceeded, nil, extraArgs...)
}

// startBackfilledPrometheusScraping is startBackfilledPrometheus with
// scrape targets, which the targets API lists.
func startBackfilledPrometheusScraping(ctx context.Context, t *testing.T, dir string, buckets, exceeded []*omSeries, targets []sandbox.ScrapeTarget, extraArgs ...string) *sandbox.Prometheus {
	t.Helper()
	om := filepath.Join(dir, "history.om")
	if err := writeOpenMetrics(om, buckets, exceeded); err != nil {
		t.Fatal(err)
	}
	binDir := os.Getenv("KCE_BIN_DIR")
	if binDir == "" {
		binDir = "../.bin"
	}
	promDir := filepath.Join(dir, "prometheus")
	// 720h: promtool rounds down to its block ranges (486h), so the 35
	// days take 3 blocks, and each block parses the input once.
	start := time.Now()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "promtool"), "tsdb", "create-blocks-from", "openmetrics",
		"--max-block-duration=720h", om, filepath.Join(promDir, "data")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	t.Logf("backfilled %d series in %v", len(buckets)+len(exceeded), time.Since(start).Round(time.Millisecond))
	prom, err := sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{
		Dir:     promDir,
		Targets: targets,
		// Far longer than the history, which ends weeks before now.
		ExtraArgs: append([]string{"--storage.tsdb.retention.time=3650d"}, extraArgs...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	return prom
}

// The report issue's end-to-end acceptance: 35 days of history backfilled
// with promtool into the TSDB of a real Prometheus, then `report` against
// it, every number compared with increase() computed here from the
// injected samples.
func TestReportOnBackfilledHistory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()

	buckets, exceeded := rolloutHistory()
	prom := startBackfilledPrometheus(ctx, t, dir, buckets, exceeded)

	sloFile := filepath.Join(dir, "slos.yaml")
	strictFile := filepath.Join(dir, "slos-strict.yaml")
	if err := os.WriteFile(sloFile, []byte(reportSLOs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strictFile, []byte(reportSLOs+reportStrictSLO), 0o644); err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, exporter, append([]string{"report", "--prometheus.url", prom.URL(), "--at", reportAt.Format(time.RFC3339)}, args...)...)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("report %s: exit %d in %v; stderr: %s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), errb.String())
		return string(out), errb.String(), code
	}

	// --fail-on-breach exits 3 exactly for the file with the SLO built to
	// miss, and names that SLO only.
	jsonOut := filepath.Join(dir, "report.json")
	_, stderr, code := run("-f", strictFile, "--format", "json", "-o", jsonOut, "--timezone", "Europe/Berlin", "--fail-on-breach")
	if code != 3 {
		t.Fatalf("report --fail-on-breach with the strict SLO: exit %d, want 3", code)
	}
	if !strings.Contains(stderr, "backfill-rollouts-strict:") || strings.Count(stderr, "below the objective") != 1 {
		t.Errorf("stderr %q should name backfill-rollouts-strict, and only it, as below its objective", stderr)
	}
	// (--allow-no-data: the file's nowhere SLO has no data, exit 4
	// otherwise; TestReportGateOn3mScrapes.)
	text, _, code := run("-f", sloFile, "--format", "text", "--fail-on-breach", "--allow-no-data")
	if code != 0 {
		t.Errorf("report --fail-on-breach --allow-no-data without the strict SLO: exit %d, want 0", code)
	}
	t.Logf("the text report:\n%s", text)
	if _, _, code := run("-f", strictFile, "--format", "markdown"); code != 0 {
		t.Errorf("report without --fail-on-breach: exit %d, want 0", code)
	}

	htmlOut := filepath.Join(dir, "report.html")
	if _, _, code := run("-f", strictFile, "--format", "html", "-o", htmlOut, "--timezone", "Europe/Berlin"); code != 0 {
		t.Errorf("report --format html: exit %d, want 0", code)
	}

	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	validateReportJSON(t, b)
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.At.Equal(reportAt) || r.Timezone != "Europe/Berlin" || len(r.SLOs) != 4 {
		t.Fatalf("report at %v in %s with %d SLOs, want at %v in Europe/Berlin with 4", r.At, r.Timezone, len(r.SLOs), reportAt)
	}
	windowStart := reportAt.Add(-30 * 24 * time.Hour)
	available := func(l map[string]string) bool { return l["stage"] == "available" && l["change"] == "template" }
	want := expectEvents(buckets, exceeded, windowStart, reportAt, available)
	t.Logf("expected over 30d: good %.3f, bad %.3f, attainment %.6f", want.good, want.bad, 1-want.bad/want.total())

	const tol = 1e-4
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %.6f, want %.6f", what, got, want)
		}
	}
	nearPtr := func(what string, got *float64, want float64) {
		t.Helper()
		if got == nil {
			t.Errorf("%s = null, want %.6f", what, want)
			return
		}
		near(what, *got, want)
	}
	for _, s := range []report.SLO{r.SLOs[0], r.SLOs[1], r.SLOs[3]} {
		obj := map[string]float64{"backfill-rollouts": 0.99, "backfill-rollouts-ratio": 0.99, "backfill-rollouts-strict": 0.999}[s.ID]
		if s.Objective != obj || s.Window != "30d" || !s.Start.Equal(windowStart) {
			t.Errorf("%s: objective %v window %s from %v, want %v 30d from %v", s.ID, s.Objective, s.Window, s.Start, obj, windowStart)
		}
		near(s.ID+" good", s.Events.Good, want.good)
		near(s.ID+" bad", s.Events.Bad, want.bad)
		near(s.ID+" total", s.Events.Total, want.total())
		nearPtr(s.ID+" attainment", s.Attainment, 1-want.bad/want.total())
		near(s.ID+" budget total", s.Budget.Total, (1-obj)*want.total())
		near(s.ID+" budget consumed", s.Budget.Consumed, want.bad)
		near(s.ID+" budget remaining", s.Budget.Remaining, (1-obj)*want.total()-want.bad)
		nearPtr(s.ID+" budget remaining ratio", s.Budget.RemainingRatio, 1-want.bad/((1-obj)*want.total()))
		wantStatus := report.StatusMet
		if 1-want.bad/want.total() < obj {
			wantStatus = report.StatusBreached
		}
		if s.Status != wantStatus {
			t.Errorf("%s: status %q, want %q", s.ID, s.Status, wantStatus)
		}

		// Months in Europe/Berlin: November starts at 23:00 UTC on 31 October.
		nov := time.Date(2026, 11, 1, 0, 0, 0, 0, berlin)
		wantMonths := []struct {
			label      string
			start, end time.Time
		}{{"2026-10", windowStart, nov}, {"2026-11", nov, reportAt}}
		if len(s.Months) != len(wantMonths) {
			t.Errorf("%s: %d months, want 2: %+v", s.ID, len(s.Months), s.Months)
		} else {
			for i, wm := range wantMonths {
				m := s.Months[i]
				if m.Month != wm.label || !m.Start.Equal(wm.start) || !m.End.Equal(wm.end) {
					t.Errorf("%s: month %s %v..%v, want %s %v..%v", s.ID, m.Month, m.Start, m.End, wm.label, wm.start, wm.end)
				}
				me := expectEvents(buckets, exceeded, wm.start, wm.end, available)
				near(s.ID+" "+wm.label+" total", m.Events.Total, me.total())
				nearPtr(s.ID+" "+wm.label+" attainment", m.Attainment, 1-me.bad/me.total())
			}
		}

		// Burn rates and the tier that would fire, from the raw series,
		// against the pairs docs/slo.md gives a 30d period by default
		// (page 1h/5m at 14.4x and 6h/30m at 6x with minEvents 10,
		// ticket 1d/2h at 3x and 3d/6h at 1x without a guard), written
		// out here rather than read from the report.
		wantPairs := []struct {
			tier          string
			long, short   time.Duration
			longS, shortS string
			factor        float64
			minEvents     float64
		}{
			{"page", time.Hour, 5 * time.Minute, "1h", "5m", 14.4, 10},
			{"page", 6 * time.Hour, 30 * time.Minute, "6h", "30m", 6, 10},
			{"ticket", 24 * time.Hour, 2 * time.Hour, "1d", "2h", 3, 0},
			{"ticket", 72 * time.Hour, 6 * time.Hour, "3d", "6h", 1, 0},
		}
		if len(s.BurnRates) != len(wantPairs) {
			t.Errorf("%s: %d burn rates, want the 4 default pairs of a 30d period: %+v", s.ID, len(s.BurnRates), s.BurnRates)
		}
		wantTier := ""
		for i, wp := range wantPairs {
			l := expectEvents(buckets, exceeded, reportAt.Add(-wp.long), reportAt, available)
			sh := expectEvents(buckets, exceeded, reportAt.Add(-wp.short), reportAt, available)
			lr, sr := l.bad/l.total()/(1-obj), sh.bad/sh.total()/(1-obj)
			fires := lr > wp.factor && sr > wp.factor && l.total() >= wp.minEvents
			if fires && (wantTier == "" || wp.tier == "page") {
				wantTier = wp.tier
			}
			if i >= len(s.BurnRates) {
				continue
			}
			br := s.BurnRates[i]
			if br.Tier != wp.tier || br.Long != wp.longS || br.Short != wp.shortS || br.Factor != wp.factor || float64(br.MinEvents) != wp.minEvents {
				t.Errorf("%s: pair %d is %s %s/%s %vx minEvents %d, want %s %s/%s %vx minEvents %v", s.ID, i, br.Tier, br.Long, br.Short, br.Factor, br.MinEvents, wp.tier, wp.longS, wp.shortS, wp.factor, wp.minEvents)
			}
			nearPtr(fmt.Sprintf("%s %s %s/%s long burn rate", s.ID, wp.tier, wp.longS, wp.shortS), br.LongRate, lr)
			nearPtr(fmt.Sprintf("%s %s %s/%s short burn rate", s.ID, wp.tier, wp.longS, wp.shortS), br.ShortRate, sr)
			near(fmt.Sprintf("%s %s %s/%s long events", s.ID, wp.tier, wp.longS, wp.shortS), br.LongEvents, l.total())
			if br.Firing != fires {
				t.Errorf("%s: %s %s/%s at %vx firing %v, want %v (long %.3fx short %.3fx)", s.ID, wp.tier, wp.longS, wp.shortS, wp.factor, br.Firing, fires, lr, sr)
			}
		}
		gotTier := ""
		if s.FiringTier != nil {
			gotTier = *s.FiringTier
		}
		if gotTier != wantTier {
			t.Errorf("%s: firing tier %q, want %q", s.ID, gotTier, wantTier)
		}
		if s.ID == "backfill-rollouts-strict" && gotTier != "page" {
			t.Errorf("the strict SLO burns at 50x in the last hour: want the page tier firing, got %q", gotTier)
		}
		if s.ID == "backfill-rollouts" && gotTier != "" {
			t.Errorf("the 99%% SLO burns at 10x in the last hour: want no tier firing, got %q", gotTier)
		}

		// Exhaustion at the last day's bad events: at + B / r, within the
		// 1e-4 the event counts are held to.
		day := expectEvents(buckets, exceeded, reportAt.Add(-24*time.Hour), reportAt, available)
		nearPtr(s.ID+" 1d burn rate", s.Exhaustion.BurnRate1d, day.bad/day.total()/(1-obj))
		wantState, wantAt := expectExhaustion(want, day, reportAt.Sub(windowStart), 1-obj)
		if s.Exhaustion.State != wantState || (wantState == report.ExhaustionProjected && (s.Exhaustion.At == nil || s.Exhaustion.At.Sub(wantAt).Abs() > time.Second+time.Duration(tol*float64(wantAt.Sub(reportAt))))) {
			t.Errorf("%s: exhaustion %q at %v, want %q at %v", s.ID, s.Exhaustion.State, s.Exhaustion.At, wantState, wantAt)
		}
		if s.ID == "backfill-rollouts" && wantState != report.ExhaustionProjected {
			t.Errorf("the 99%% SLO keeps some budget and burns in the last day: want a projected date, got %q", wantState)
		}
		if wantState == report.ExhaustionExhausted && (s.Exhaustion.Since == nil || !s.Exhaustion.Since.After(windowStart) || s.Exhaustion.Since.After(reportAt)) {
			t.Errorf("%s: exhausted since %v, want a minute of the window", s.ID, s.Exhaustion.Since)
		}
		t.Logf("%s: budget runs out: %s at %v, since %v", s.ID, s.Exhaustion.State, s.Exhaustion.At, s.Exhaustion.Since)

		// The gap and the day without traffic, as such.
		if len(s.Gaps) != 1 || !s.Gaps[0].Start.Equal(gapFrom.Add(-time.Minute)) || !s.Gaps[0].End.Equal(gapTo.Add(-time.Minute)) || s.Gaps[0].Duration != "3h" {
			t.Errorf("%s: gaps %+v, want one of 3h: no sample in (%v, %v]", s.ID, s.Gaps, gapFrom.Add(-time.Minute), gapTo.Add(-time.Minute))
		}
		if len(s.ZeroTraffic) != 1 || !s.ZeroTraffic[0].Start.Equal(idleFrom) || !s.ZeroTraffic[0].End.Equal(idleTo) || s.ZeroTraffic[0].Duration != "1d" {
			t.Errorf("%s: zero traffic %+v, want (%v, %v]", s.ID, s.ZeroTraffic, idleFrom, idleTo)
		}
		// The chart: max(30d / 1000, 1m) = 43.2m, rounded up to 44m: 982
		// points. No point in the idle day claims an SLI.
		if s.Chart.Step != "44m" || len(s.Chart.Points) != 982 {
			t.Errorf("%s: chart step %s with %d points, want 44m with 982", s.ID, s.Chart.Step, len(s.Chart.Points))
		}
		for _, p := range s.Chart.Points {
			if p.T.After(idleFrom.Add(time.Hour)) && !p.T.After(idleTo) && p.SLI != nil {
				t.Errorf("%s: chart point at %v in the idle day has SLI %v, want none", s.ID, p.T, *p.SLI)
			}
		}
	}

	// The worst namespaces and kinds, by bad events.
	s := r.SLOs[0]
	for _, c := range []struct {
		what  string
		got   []report.Contributor
		label string
		order []string
	}{{"namespaces", s.Worst.Namespaces, "namespace", []string{"team-b", "team-a"}}, {"kinds", s.Worst.Kinds, "kind", nil}} {
		if len(c.got) != 2 {
			t.Errorf("worst %s %+v, want 2", c.what, c.got)
			continue
		}
		for i, got := range c.got {
			e := expectEvents(buckets, exceeded, windowStart, reportAt, func(l map[string]string) bool { return available(l) && l[c.label] == got.Value })
			near("bad events of "+c.label+" "+got.Value, got.Bad, e.bad)
			if len(c.order) > i && got.Value != c.order[i] {
				t.Errorf("worst %s %+v, want in the order %v", c.what, c.got, c.order)
			}
		}
	}
	if len(s.Worst.Stages) != 0 {
		t.Errorf("worst stages %+v of an SLO of one stage, want none", s.Worst.Stages)
	}

	checkReportHTML(ctx, t, htmlOut, &r)

	// --http.config.file in promtool's format, through a gateway in front
	// of the real Prometheus that wants a bearer token and a tenant header
	// under a path prefix, the way Mimir's is reached.
	const token, tenant = "t0ken", "tenant-1"
	var gatewayRequests atomic.Int64
	// A streaming httputil.ReverseProxy, as oauth2-proxy and
	// prom-label-proxy are (TestReportThroughReverseProxy: why that
	// matters).
	promURL, err := url.Parse(prom.URL())
	if err != nil {
		t.Fatal(err)
	}
	upstream := httputil.NewSingleHostReverseProxy(promURL)
	gateway := httptest.NewServer(http.StripPrefix("/prometheus", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+token || req.Header.Get("X-Scope-OrgID") != tenant {
			http.Error(w, "401 no tenant or token", http.StatusUnauthorized)
			return
		}
		gatewayRequests.Add(1)
		upstream.ServeHTTP(w, req)
	})))
	defer gateway.Close()
	tokenFile := filepath.Join(dir, "token")
	httpConfig := filepath.Join(dir, "http.yml")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(httpConfig, []byte("authorization:\n  credentials_file: "+tokenFile+"\nhttp_headers:\n  X-Scope-OrgID:\n    values: ["+tenant+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A ratio SLO whose query makes Prometheus warn (quantile outside
	// [0, 1]), as Thanos and Mimir warn of partial responses.
	warnedFile := filepath.Join(dir, "warned.yaml")
	firstTwo, _, _ := strings.Cut(reportSLOs, "  - name: nowhere")
	warned := strings.Replace(firstTwo, "  - name: rollouts\n", "  - name: skipped\n", 1)
	warned = strings.Replace(warned, `threshold="300.0"}[{{.window}}]))
        totalQuery`, `threshold="300.0"}[{{.window}}])) and on () quantile(1.5, vector(1))
        totalQuery`, 1)
	if err := os.WriteFile(warnedFile, []byte(warned), 0o644); err != nil {
		t.Fatal(err)
	}
	gatewayArgs := func(args ...string) []string {
		return append([]string{"--prometheus.url", gateway.URL + "/prometheus", "-f", warnedFile, "--at", reportAt.Format(time.RFC3339)}, args...)
	}
	cmd := exec.CommandContext(ctx, exporter, append([]string{"report"}, gatewayArgs("--format", "json", "--http.config.file", httpConfig)...)...)
	var gwErr strings.Builder
	cmd.Stderr = &gwErr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report through the gateway with --http.config.file: %v\n%s", err, gwErr.String())
	}
	var wr report.Report
	if err := json.Unmarshal(out, &wr); err != nil {
		t.Fatal(err)
	}
	validateReportJSON(t, out)
	const quantileWarning = "quantile value should be between 0 and 1"
	if len(wr.SLOs) != 2 || gatewayRequests.Load() == 0 {
		t.Fatalf("through the gateway: %d SLOs after %d requests", len(wr.SLOs), gatewayRequests.Load())
	}
	if ws := wr.SLOs[1].Warnings; len(ws) == 0 || !strings.Contains(ws[0], quantileWarning) || len(wr.Warnings) != len(ws) || !strings.HasPrefix(wr.Warnings[0], "backfill-rollouts-ratio: ") {
		t.Errorf("the warned SLO's warnings %q, the report's %q: want Prometheus's quantile warning, prefixed with the SLO in the report's", ws, wr.Warnings)
	}
	if len(wr.SLOs[0].Warnings) != 0 {
		t.Errorf("warnings %q on the SLO whose queries are fine", wr.SLOs[0].Warnings)
	}
	if !strings.Contains(gwErr.String(), "API warning: backfill-rollouts-ratio: ") || !strings.Contains(gwErr.String(), quantileWarning) {
		t.Errorf("stderr %q does not print the API warning", gwErr.String())
	}
	// The warning changes no number: the ratio SLO still matches.
	nearPtr("attainment through the gateway", wr.SLOs[1].Attainment, 1-want.bad/want.total())
	// Without the configuration the gateway refuses: exit 1 naming the URL.
	cmd = exec.CommandContext(ctx, exporter, append([]string{"report"}, gatewayArgs()...)...)
	gwErr.Reset()
	cmd.Stderr = &gwErr
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("report through the gateway without credentials: %v, want exit 1", err)
	}
	if !strings.Contains(gwErr.String(), gateway.URL+"/prometheus") || !strings.Contains(gwErr.String(), "401") {
		t.Errorf("stderr %q should name the URL and the 401", gwErr.String())
	}

	// An SLO over every stage ranks the stages too: the observed stage's
	// series (half its rollouts slow) burns most.
	stagesFile := filepath.Join(dir, "stages.yaml")
	firstOne, _, _ := strings.Cut(reportSLOs, "  - name: rollouts-ratio")
	stagesSLO := strings.Replace(firstOne, "match: {stage: available, change: template}", "match: {change: template}", 1)
	if err := os.WriteFile(stagesFile, []byte(stagesSLO), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.CommandContext(ctx, exporter, "report", "--prometheus.url", prom.URL(), "-f", stagesFile, "--at", reportAt.Format(time.RFC3339), "--format", "json")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("report over every stage: %v", err)
	}
	var sr report.Report
	if err := json.Unmarshal(out, &sr); err != nil {
		t.Fatal(err)
	}
	if st := sr.SLOs[0].Worst.Stages; len(st) != 2 || st[0].Value != "observed" || st[1].Value != "available" {
		t.Errorf("worst stages %+v, want observed then available", st)
	} else {
		for _, c := range st {
			e := expectEvents(buckets, exceeded, windowStart, reportAt, func(l map[string]string) bool { return l["change"] == "template" && l["stage"] == c.Value })
			near("bad events of stage "+c.Value, c.Bad, e.bad)
		}
	}

	// A good-minutes SLI: a minute is bad when team-a's Deployment counter
	// rose over the last minute, and counts while the counter has a sample
	// within the 5m lookback; it is present (not a gap) when the counter
	// has a sample within the minute. Its events are minutes, so the expectation
	// is exact: Prometheus 3's left-open lookback (t-5m, t] at every minute
	// of the window, computed here from the samples.
	const minutesSLO = `service: backfill
slos:
  - name: minutes
    objective: 0.99
    period: 30d
    sli:
      goodMinutes:
        badWhen: kube_convergence_rollout_threshold_exceeded_total{namespace="team-a", kind="Deployment", stage="available"} - kube_convergence_rollout_threshold_exceeded_total{namespace="team-a", kind="Deployment", stage="available"} offset 1m > 0
        countWhen: kube_convergence_rollout_threshold_exceeded_total{namespace="team-a", kind="Deployment", stage="available"}
`
	minutesFile := filepath.Join(dir, "minutes.yaml")
	if err := os.WriteFile(minutesFile, []byte(minutesSLO), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.CommandContext(ctx, exporter, "report", "--prometheus.url", prom.URL(), "-f", minutesFile, "--at", reportAt.Format(time.RFC3339), "--format", "json")
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("report of a good-minutes SLO: %v", err)
	}
	var mr report.Report
	if err := json.Unmarshal(out, &mr); err != nil {
		t.Fatal(err)
	}
	var teamA *omSeries
	for _, s := range exceeded {
		if s.labels["namespace"] == "team-a" && s.labels["kind"] == "Deployment" && s.labels["stage"] == "available" {
			teamA = s
		}
	}
	at := map[int64]float64{}
	for i, ts := range teamA.t {
		at[ts] = teamA.v[i]
	}
	lookup := func(t time.Time) (float64, bool) {
		for back := time.Duration(0); back < 5*time.Minute; back += time.Minute {
			if v, ok := at[t.Add(-back).UnixMilli()]; ok {
				return v, true
			}
		}
		return 0, false
	}
	// A sample of countWhen's series in (t-1m, t]: the minute is present.
	sampled := func(t time.Time) bool {
		for _, ts := range teamA.t {
			if ts > t.Add(-time.Minute).UnixMilli() && ts <= t.UnixMilli() {
				return true
			}
		}
		return false
	}
	var wantBad, wantTotal float64
	var wantGaps []report.Period
	gapStart := time.Time{}
	for t := windowStart.Add(time.Minute); !t.After(reportAt); t = t.Add(time.Minute) {
		v, ok := lookup(t)
		if ok {
			wantTotal++
			if prev, pok := lookup(t.Add(-time.Minute)); pok && v > prev {
				wantBad++
			}
		}
		present := sampled(t)
		switch {
		case !present && gapStart.IsZero():
			gapStart = t
		case present && !gapStart.IsZero():
			if d := t.Sub(gapStart); d >= 2*time.Minute {
				wantGaps = append(wantGaps, report.Period{Start: gapStart.Add(-time.Minute), End: t.Add(-time.Minute)})
			}
			gapStart = time.Time{}
		}
	}
	ms := mr.SLOs[0]
	if ms.Events.Total != wantTotal || ms.Events.Bad != wantBad {
		t.Errorf("good minutes: %v bad of %v counted, want %v of %v", ms.Events.Bad, ms.Events.Total, wantBad, wantTotal)
	}
	if len(ms.Gaps) != len(wantGaps) || len(wantGaps) != 1 || !ms.Gaps[0].Start.Equal(wantGaps[0].Start) || !ms.Gaps[0].End.Equal(wantGaps[0].End) {
		t.Errorf("good minutes: gaps %+v, want %+v", ms.Gaps, wantGaps)
	}
	// The samples' gap is the history's 3h one, as for the latency SLOs:
	// presence is a sample of the series, not a counted minute (whose 5m
	// lookback would shorten it by 4 minutes).
	if len(ms.Gaps) != 1 || !ms.Gaps[0].Start.Equal(gapFrom.Add(-time.Minute)) || !ms.Gaps[0].End.Equal(gapTo.Add(-time.Minute)) || ms.Gaps[0].Duration != "3h" {
		t.Errorf("good minutes: gaps %+v, want the 3h gap (%v, %v]", ms.Gaps, gapFrom.Add(-time.Minute), gapTo.Add(-time.Minute))
	}
	if len(ms.ZeroTraffic) != 0 {
		t.Errorf("good minutes: zero traffic %+v, want none (a counted minute is an event)", ms.ZeroTraffic)
	}
	t.Logf("good minutes: %v bad of %v counted, gaps %+v", ms.Events.Bad, ms.Events.Total, ms.Gaps)

	// Series that do not exist: no data, never 100%.
	nd := r.SLOs[2]
	if nd.Status != report.StatusNoData || nd.Attainment != nil || nd.Events.Total != 0 || nd.Exhaustion.State != report.ExhaustionNoEvents {
		t.Errorf("SLO without series: status %q attainment %v events %+v exhaustion %q, want no data, null, 0, no events", nd.Status, nd.Attainment, nd.Events, nd.Exhaustion.State)
	}
	for _, m := range nd.Months {
		if m.Status != report.StatusNoData || m.Attainment != nil {
			t.Errorf("SLO without series: month %s %q %v, want no data", m.Month, m.Status, m.Attainment)
		}
	}
}

// checkLiveReport runs `report --format json` over the bundled SLO file
// against the Prometheus of TestSLORulesOnRealPrometheus: the stuck
// rollout's threshold crossing is one bad event of rollout-available, in
// its namespace, and the fast rollout a good one.
func checkLiveReport(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, stuckNS, fastNS string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, exporter, "report", "--prometheus.url", prom.URL(), "-f", "../rules/slos.yaml", "--window", "1h", "--format", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report on live data: %v\n%s", err, stderr.String())
	}
	validateReportJSON(t, out)
	var r report.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	var s *report.SLO
	for i := range r.SLOs {
		if r.SLOs[i].ID == "kube-convergence-rollout-available" {
			s = &r.SLOs[i]
		}
	}
	if s == nil {
		t.Fatalf("no kube-convergence-rollout-available in the report: %s", out)
	}
	// One crossing: increase() of a counter from 0 to 1 over a range that
	// holds its creation extrapolates only to the end, by at most one 1 s
	// scrape interval over the minutes since the crossing.
	var stuck *report.Contributor
	for i, c := range s.Worst.Namespaces {
		if c.Value == stuckNS {
			stuck = &s.Worst.Namespaces[i]
		}
	}
	if stuck == nil || stuck.Bad < 1 || stuck.Bad > 1.05 {
		t.Fatalf("worst namespaces %+v: want %s with one bad event", s.Worst.Namespaces, stuckNS)
	}
	if s.Events.Bad < 1 || s.Events.Good < 1 || s.Attainment == nil || *s.Attainment >= 1 {
		t.Errorf("rollout-available over 1h: events %+v, attainment %v: want the bad event of %s and the good one of %s", s.Events, s.Attainment, stuckNS, fastNS)
	}
	t.Logf("report on live data: rollout-available events %+v, %s burnt %.3f", s.Events, stuckNS, stuck.Bad)
}
