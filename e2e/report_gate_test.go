package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// The history of TestReportGateOn3mScrapes: one sample every 3 minutes,
// on the minutes divisible by 3 (reportAt is 12:00), from 31 days before
// reportAt, for the job gateJob, whose target the Prometheus scrapes
// every 3 minutes (so the targets API says 3m).
const (
	gateJob      = "kce-3m"
	gateInterval = 3 * time.Minute
)

// The "gap" namespace has no sample at 10:00 ... 11:57 of this day (40
// scrapes missed, the counters counting on); the last before is at
// 09:57, the next at 12:00.
var gateGapFrom, gateGapTo = time.Date(2026, 10, 20, 10, 0, 0, 0, time.UTC), time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)

// gateHistory: per namespace, events per 3-minute scrape (increments
// spread evenly, so that increase() over a range holding a whole number
// of scrapes is exact):
//
//   - steady: 10 events, 0.06 bad (0.6% of events; 0.6x at 99%);
//   - burst: 10 events, none bad, until the last day; in the last day 100
//     events, 0.125 bad (60 bad in the day: traffic ten times the
//     window's average). The bad counter is 0 until then, so increase()
//     does not extrapolate it before the window;
//   - clean: 10 events, none bad;
//   - gap: as clean, and the 2h gap.
func gateHistory() (buckets, exceeded []*omSeries) {
	start := reportAt.Add(-31 * 24 * time.Hour)
	burstFrom := reportAt.Add(-24 * time.Hour)
	for _, ns := range []string{"steady", "burst", "clean", "gap"} {
		l := func(k, v string) map[string]string {
			return map[string]string{"namespace": ns, "kind": "Deployment", "stage": "available", "change": "template", "job": gateJob, k: v}
		}
		good := &omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "300.0")}
		inf := &omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "+Inf")}
		bad := &omSeries{name: "kube_convergence_rollout_threshold_exceeded_total", labels: l("threshold", "300.0")}
		g, b := 1000.0, 0.0
		for t := start; !t.After(reportAt); t = t.Add(gateInterval) {
			total, slow := 10.0, 0.0
			switch {
			case ns == "steady":
				slow = 0.06
			case ns == "burst" && t.After(burstFrom):
				total, slow = 100, 0.125
			}
			g, b = g+total-slow, b+slow
			if ns == "gap" && !t.Before(gateGapFrom) && t.Before(gateGapTo) {
				continue
			}
			good.add(t, g)
			inf.add(t, g+b)
			bad.add(t, b)
		}
		buckets = append(buckets, good, inf)
		exceeded = append(exceeded, bad)
	}
	return buckets, exceeded
}

const gateSLOs = `service: gate
slos:
  - name: steady
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300, match: {namespace: steady}}
  - name: burst
    objective: 0.9995
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300, match: {namespace: burst}}
  - name: clean
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300, match: {namespace: clean}}
  - name: gap
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300, match: {namespace: gap}}
`

// What a release gate reads from `report` (issue 26), against one real
// Prometheus holding 31 days of 3-minute scrapes: no false gap at 3m, one
// row for a real 2h gap, exhaustion dates from events, and
// --fail-on-breach refusing what was not measured.
func TestReportGateOn3mScrapes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	buckets, exceeded := gateHistory()
	// A target of the job that nothing answers: the targets API lists it
	// with its scrapeInterval all the same.
	prom := startBackfilledPrometheusScraping(ctx, t, dir, buckets, exceeded, []sandbox.ScrapeTarget{{
		Job: gateJob, Addr: "127.0.0.1:1", Extra: map[string]any{"scrape_interval": "3m", "scrape_timeout": "1s"},
	}})
	waitForTarget(ctx, t, prom.URL(), gateJob)

	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(file string, args ...string) (string, string, int) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, exporter, append([]string{"report", "--prometheus.url", prom.URL(), "-f", file, "--at", reportAt.Format(time.RFC3339)}, args...)...)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("report -f %s %s: exit %d in %v; stderr: %s", filepath.Base(file), strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), errb.String())
		return string(out), errb.String(), code
	}
	decode := func(out string) report.Report {
		t.Helper()
		validateReportJSON(t, []byte(out))
		var r report.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Every SLO met, none partial: --fail-on-breach passes.
	out, _, code := run(write("gate.yaml", gateSLOs), "--format", "json", "--fail-on-breach")
	if code != 0 {
		t.Fatalf("report --fail-on-breach: exit %d, want 0", code)
	}
	r := decode(out)
	if len(r.SLOs) != 4 {
		t.Fatalf("%d SLOs, want 4", len(r.SLOs))
	}
	slos := map[string]report.SLO{}
	for _, s := range r.SLOs {
		slos[s.Name] = s
		if want := (report.ScrapeInterval{Interval: "3m", Source: report.IntervalTargets, MinGap: "6m"}); s.ScrapeInterval != want {
			t.Errorf("%s: scrape interval %+v, want %+v", s.ID, s.ScrapeInterval, want)
		}
		if s.Status != report.StatusMet || s.Partial || len(s.ZeroTraffic) != 0 {
			t.Errorf("%s: status %q, partial %v, zero traffic %+v; want met, whole, none", s.ID, s.Status, s.Partial, s.ZeroTraffic)
		}
	}

	// Gaps. At 3m, two minutes of three have no sample: the healthy
	// months have no gap row (the 2-minute rule made 14,400 of each).
	for _, name := range []string{"steady", "burst", "clean"} {
		if s := slos[name]; len(s.Gaps) != 0 || s.GapsOmitted != 0 {
			t.Errorf("%s: gaps %+v and %d more, want none at a 3m scrape interval", s.ID, s.Gaps, s.GapsOmitted)
		}
	}
	// The 2h gap, one row: no sample after 09:57 until 12:00, so the
	// steps (09:57, 11:59] (docs/report.md: a row names the steps it
	// covers), 122 minutes.
	wantGap := report.Period{Start: time.Date(2026, 10, 20, 9, 57, 0, 0, time.UTC), End: time.Date(2026, 10, 20, 11, 59, 0, 0, time.UTC), Duration: "2h2m"}
	if g := slos["gap"]; len(g.Gaps) != 1 || g.GapsOmitted != 0 || !g.Gaps[0].Start.Equal(wantGap.Start) || !g.Gaps[0].End.Equal(wantGap.End) || g.Gaps[0].Duration != wantGap.Duration {
		t.Errorf("gap: gaps %+v and %d more, want exactly %+v", g.Gaps, g.GapsOmitted, wantGap)
	}

	// Exhaustion: at + B / r, B = (1 - objective) x the window's events -
	// its bad events, r = the last day's bad events per day.
	within := func(name string, got *time.Time, want time.Time) {
		t.Helper()
		// increase() extrapolates the burst's good counter over the
		// window by 3m at the average rate (2.16 s later, below).
		if got == nil || got.Sub(want).Abs() > time.Minute {
			t.Errorf("%s: budget runs out at %v, want %v", name, got, want)
		}
	}
	steady := slos["steady"]
	// steady: 14,400 scrapes in 30d: 144,000 events, 864 bad (0.06 x
	// 14,400); B = 0.01 x 144,000 - 864 = 576; r = 0.06 x 480 = 28.8 a
	// day; 576 / 28.8 = 20 days: 2026-11-10 12:00 + 20d.
	if steady.Exhaustion.State != report.ExhaustionProjected {
		t.Errorf("steady: exhaustion %+v, want projected", steady.Exhaustion)
	}
	within("steady", steady.Exhaustion.At, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	burst := slos["burst"]
	// burst: 29 days of 4,800 events and a last day of 48,000 with 60
	// bad: 187,200 events; B = 0.0005 x 187,200 - 60 = 93.6 - 60 = 33.6;
	// r = 60 a day; 33.6 / 60 = 0.56 days = 13h26m24s: 2026-11-11
	// 01:26:24. (The ratio formula said 33.6 / 93.6 x 30d / 2.5x, the
	// day's error ratio 60 / 48,000 over 0.0005: 4d7h23m. increase()
	// counts 187,203 events: the good counter's 187,130 between its first
	// and last samples x 30d / (30d - 3m); B = 33.6015, 2.16 s later.)
	if burst.Exhaustion.State != report.ExhaustionProjected || burst.Exhaustion.RecentBad < 59.999 || burst.Exhaustion.RecentBad > 60.001 {
		t.Errorf("burst: exhaustion %+v, want projected from 60 bad events in the last day", burst.Exhaustion)
	}
	within("burst", burst.Exhaustion.At, time.Date(2026, 11, 11, 1, 26, 24, 0, time.UTC))
	t.Logf("exhaustion: steady %s %v (B %.4f, r %.4f/1d); burst %s %v (B %.4f, r %.4f/1d, %.3f events)", steady.Exhaustion.State, steady.Exhaustion.At, steady.Budget.Remaining, steady.Exhaustion.RecentBad,
		burst.Exhaustion.State, burst.Exhaustion.At, burst.Budget.Remaining, burst.Exhaustion.RecentBad, burst.Events.Total)
	// clean: no bad event in the last day: not at this rate.
	if x := slos["clean"].Exhaustion; x.State != report.ExhaustionNever || x.At != nil || x.RecentBad != 0 {
		t.Errorf("clean: exhaustion %+v, want not at this rate", x)
	}

	// --scrape-interval wins over the targets API: judged at 1m, every
	// 2-minute hole is a gap, 14,400 - 41 + 1 of them (the 41 holes
	// between 09:57 and 12:00 are the 2h one); 10 rows, the 2h gap among
	// them, and the count of the others.
	_, gapSLO, _ := strings.Cut(gateSLOs, "  - name: gap\n")
	gapOnly := write("gap.yaml", "service: gate\nslos:\n  - name: gap\n"+gapSLO)
	out, _, code = run(gapOnly, "--format", "json", "--scrape-interval", "1m")
	if code != 0 {
		t.Fatalf("report --scrape-interval 1m: exit %d", code)
	}
	g := decode(out).SLOs[0]
	if want := (report.ScrapeInterval{Interval: "1m", Source: report.IntervalFlag, MinGap: "2m"}); g.ScrapeInterval != want {
		t.Errorf("--scrape-interval 1m: %+v, want %+v", g.ScrapeInterval, want)
	}
	if len(g.Gaps) != report.MaxGapRows || g.GapsOmitted != 14360-report.MaxGapRows {
		t.Errorf("judged at 1m: %d gap rows and %d more, want %d and %d", len(g.Gaps), g.GapsOmitted, report.MaxGapRows, 14360-report.MaxGapRows)
	}
	found := false
	for _, p := range g.Gaps {
		found = found || (p.Start.Equal(wantGap.Start) && p.End.Equal(wantGap.End))
	}
	if !found {
		t.Errorf("judged at 1m: the 2h gap is not among the rows %+v", g.Gaps)
	}
	text, _, _ := run(gapOnly, "--scrape-interval", "1m")
	if !strings.Contains(text, "and 14350 more, none longer than those listed") || strings.Count(text, "gap (no samples)") != report.MaxGapRows+1 {
		t.Errorf("the text report's gaps are not %d rows and an \"and 14350 more\":\n%s", report.MaxGapRows, text)
	}

	// --fail-on-breach on an SLO whose series do not exist: exit 4 (no
	// data is not a pass), 0 with --allow-no-data.
	steadyOnly, _, _ := strings.Cut(gateSLOs, "  - name: burst")
	noData := write("nodata.yaml", strings.Replace(steadyOnly, "namespace: steady", "namespace: nowhere", 1))
	if _, stderr, code := run(noData, "--fail-on-breach"); code != 4 || !strings.Contains(stderr, "gate-steady: no data: not measured") {
		t.Errorf("--fail-on-breach without data: exit %d, stderr %q; want 4 naming gate-steady", code, stderr)
	}
	if _, _, code := run(noData, "--fail-on-breach", "--allow-no-data"); code != 0 {
		t.Errorf("--fail-on-breach --allow-no-data without data: exit %d, want 0", code)
	}
}

// waitForTarget waits until the targets API lists an active target of job:
// the scrape manager applies a new server's targets a moment after it is
// ready.
func waitForTarget(ctx context.Context, t *testing.T, promURL, job string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/targets?state=active", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), `"job":"`+job+`"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no active target of job %s after 30s", job)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
