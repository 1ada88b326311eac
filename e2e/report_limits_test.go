package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// wideHistory is 7 days and 10 minutes of 40 (namespace) label sets
// scraped every minute: many series per step.
func wideHistory() (buckets, exceeded []*omSeries) {
	for n := range 40 {
		l := func(k, v string) map[string]string {
			return map[string]string{"namespace": "ns-" + strconv.Itoa(n), "kind": "Deployment", "stage": "available", "change": "template", "job": "kube-convergence-exporter", k: v}
		}
		good := &omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "300.0")}
		inf := &omSeries{name: "kube_convergence_rollout_duration_seconds_bucket", labels: l("le", "+Inf")}
		bad := &omSeries{name: "kube_convergence_rollout_threshold_exceeded_total", labels: l("threshold", "300.0")}
		var g, b float64
		for i, t := 0, reportAt.Add(-7*24*time.Hour-10*time.Minute); !t.After(reportAt); i, t = i+1, t.Add(time.Minute) {
			g += 3
			if (i+n)%7 == 0 {
				b++
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

// A Prometheus with --query.max-samples=300000 refuses a 10,000-step range
// query over the 40 series (400,000 samples held at once); the report
// shrinks its minute-by-minute range queries until they fit (2,500 steps:
// 100,000) and writes the same report, byte for byte, as against the same
// history without the limit. (Instant increase() over 7d holds one
// series' 10,080 samples at a time and passes.)
func TestReportUnderQueryMaxSamples(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	buckets, exceeded := wideHistory()
	limited := startBackfilledPrometheus(ctx, t, t.TempDir(), buckets, exceeded, "--query.max-samples=300000")
	plain := startBackfilledPrometheus(ctx, t, t.TempDir(), buckets, exceeded)

	// The limit bites: the 7d window's 10,080 steps in pieces of 10,000.
	q := url.Values{
		"query": {`sum(kube_convergence_rollout_duration_seconds_bucket{le="300.0"})`},
		"start": {strconv.FormatInt(reportAt.Add(-7*24*time.Hour).Unix(), 10)},
		"end":   {strconv.FormatInt(reportAt.Add(-7*24*time.Hour+9999*time.Minute).Unix(), 10)},
		"step":  {"60"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, limited.URL()+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "query processing would load too many samples") {
		t.Fatalf("a 10,000-step range query over 40 series under --query.max-samples=300000: %s, want too many samples", body)
	}

	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOs), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(promURL string) []byte {
		cmd := exec.CommandContext(ctx, exporter, "report", "--prometheus.url", promURL, "-f", file, "--window", "7d", "--at", reportAt.Format(time.RFC3339), "--format", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("report against %s: %v\n%s", promURL, err, stderr.String())
		}
		return bytes.ReplaceAll(out, []byte(promURL), []byte("PROMETHEUS"))
	}
	got, want := run(limited.URL()), run(plain.URL())
	if !bytes.Equal(got, want) {
		t.Errorf("the report under --query.max-samples differs from the one without:\n%s", firstLineDiff(got, want))
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	// Not vacuous: 7d of minutes, 40 series counted, no gap.
	s := r.SLOs[0]
	if len(s.Chart.Points) != 917 || len(s.Gaps) != 0 || s.Events.Total < 40*10080*3 {
		t.Errorf("%s: %d chart points, %d gaps, %v events; want 917 (7d in steps of 11m), none, >= %d", s.ID, len(s.Chart.Points), len(s.Gaps), s.Events.Total, 40*10080*3)
	}
}

func firstLineDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + g[i] + "\nwant: " + w[i]
		}
	}
	return "lengths " + strconv.Itoa(len(g)) + " and " + strconv.Itoa(len(w))
}
