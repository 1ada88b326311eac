package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// chartBox is what the browser reports of one chart.
type chartBox struct {
	Section string  `json:"section"`
	Class   string  `json:"class"`
	Width   float64 `json:"width"`
	Height  float64 `json:"height"`
	Points  int     `json:"points"`    // data-points
	Segs    int     `json:"segs"`      // M and L commands of the path
	PathW   float64 `json:"pathWidth"` // the path's rendered bounding box
}

const chartsJS = `Array.from(document.querySelectorAll('svg.chart')).map(s => {
  const r = s.getBoundingClientRect();
  const p = s.querySelector('path.series');
  const d = p ? (p.getAttribute('d') || '') : '';
  return {section: s.closest('section').id, class: s.getAttribute('class'), width: r.width, height: r.height,
    points: Number(s.dataset.points), segs: (d.match(/[ML]/g) || []).length, pathWidth: p ? p.getBBox().width : 0};
})`

// openInChromium opens an HTML file in Chromium (openInBrowser) and
// returns its charts and every problem seen, a request for anything but
// the file itself included.
func openInChromium(ctx context.Context, t *testing.T, path string) (charts []chartBox, problems []string) {
	t.Helper()
	url := "file://" + path
	return openInBrowser[[]chartBox](ctx, t, url, chartsJS, func(u string) bool { return u == url })
}

// checkReportHTML opens the report in Chromium: no problem, and every
// chart of every SLO has a non-zero box and one path point (M or L) per
// point of the JSON report with a value.
func checkReportHTML(ctx context.Context, t *testing.T, path string, r *report.Report) {
	t.Helper()
	charts, problems := openInChromium(ctx, t, path)
	if len(problems) > 0 {
		t.Errorf("the HTML report in chromium:\n%s", strings.Join(problems, "\n"))
	}
	if len(charts) != 2*len(r.SLOs) {
		t.Fatalf("%d charts, want 2 per SLO (%d SLOs)", len(charts), len(r.SLOs))
	}
	for i := range r.SLOs {
		s := &r.SLOs[i]
		var sli, budget int
		for _, p := range s.Chart.Points {
			if p.SLI != nil {
				sli++
			}
			if p.BudgetRemaining != nil {
				budget++
			}
		}
		for j, want := range []int{sli, budget} {
			c := charts[2*i+j]
			if c.Section != s.ID || c.Width <= 0 || c.Height <= 0 || c.Segs != want || c.Points != want || (want > 1 && c.PathW <= 0) {
				t.Errorf("chart %q of %s: %+v, want a non-zero box and %d path points", c.Class, s.ID, c, want)
			}
		}
		t.Logf("%s: charts of %d and %d points in boxes of %.0fx%.0f px", s.ID, sli, budget, charts[2*i].Width, charts[2*i].Height)
	}
}

// The browser check itself catches what it must: a page with a script
// error, a console error and an external image fails it.
func TestChromiumCheckCatchesProblems(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "bad.html")
	page := `<!DOCTYPE html><html><head><title>bad</title></head><body>
<img src="http://127.0.0.1:9/x.png">
<script>console.error("boom"); throw new Error("thrown");</script></body></html>`
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	_, problems := openInChromium(ctx, t, path)
	all := strings.Join(problems, "\n")
	for _, want := range []string{"Runtime.exceptionThrown", "console error", "network request: http://127.0.0.1:9/x.png"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %q lack %q", problems, want)
		}
	}
}
