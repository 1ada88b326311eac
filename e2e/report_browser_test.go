package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

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

// openInChromium opens an HTML file in Debian's headless Chromium through
// chromedp and returns its charts and every problem seen: an exception, a
// console error, a log error, a network request other than the file
// itself. Without chromium the test fails: CI installs it (.ci/run), a
// developer runs apt-get install chromium.
func openInChromium(ctx context.Context, t *testing.T, path string) (charts []chartBox, problems []string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): the HTML report test needs Debian's chromium (apt-get install -y chromium)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		// Root in CI containers: Chromium refuses to run sandboxed as root.
		chromedp.NoSandbox, chromedp.DisableGPU)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()

	url := "file://" + path
	var mu sync.Mutex
	// Listen attaches to the tab (starting the browser); the domains are
	// enabled before the navigation, so that nothing the page does is
	// missed.
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "Runtime.exceptionThrown: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, fmt.Sprintf("console error: %d arguments", len(ev.Args)))
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, "Log.entryAdded error: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if ev.Request.URL != url {
				problems = append(problems, "network request: "+ev.Request.URL)
			}
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	start := time.Now()
	for _, enable := range []func() error{
		func() error { _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); return err },
		func() error { _, err := chromedp.Call(bctx, log.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); return err },
	} {
		if err := enable(); err != nil {
			t.Fatalf("chromium: enabling a domain: %v", err)
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	charts, err = chromedp.Run(bctx, chromedp.Evaluate[[]chartBox](chartsJS))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	// Late events (a failed font or image fetch) arrive asynchronously:
	// a round trip to the browser after the evaluation lets them in.
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	t.Logf("chromium rendered %s (%q) with %d charts in %v", path, title, len(charts), time.Since(start).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	return charts, slices.Clone(problems)
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
