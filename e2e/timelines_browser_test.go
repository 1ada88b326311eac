package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// xss is written into the cluster as a field manager, a Warning Event's
// note and a custom resource's condition message: the page must show it as
// text.
const xss = "<script>alert(1)</script>"

// waterfallAreaPx is the page's documented scale (docs/timelines.md): the
// longest of an episode's duration and its stages' durations spans 600 px.
const waterfallAreaPx = 600

// apiEpisode is what the test reads of the API's JSON: the expected
// geometry is computed from it, not from the page's code.
type apiEpisode struct {
	Kind            string  `json:"kind"`
	Namespace       string  `json:"namespace"`
	Name            string  `json:"name"`
	Generation      int64   `json:"generation"`
	State           string  `json:"state"`
	DurationSeconds float64 `json:"durationSeconds"`
	Stages          []struct {
		Stage           string   `json:"stage"`
		Reached         bool     `json:"reached"`
		DurationSeconds *float64 `json:"durationSeconds"`
	} `json:"stages"`
}

// pageBar is a waterfall bar as Chromium lays it out.
type pageBar struct {
	Stage string  `json:"stage"`
	Width float64 `json:"width"`
	X     float64 `json:"x"`
}

// pageReport is what the browser reports of a timeline page.
type pageReport struct {
	Bars     []pageBar `json:"bars"`     // of the first (newest) episode's waterfall
	Scripts  int       `json:"scripts"`  // script elements
	Text     string    `json:"text"`     // the body's text
	Managers []string  `json:"managers"` // the text of each field-manager list
	Messages []string  `json:"messages"` // the text of each Event note or condition message
}

const pageReportJS = `(() => {
  const svg = document.querySelector('article.episode svg.waterfall');
  const area = svg ? svg.querySelector('rect.track').getBoundingClientRect().left : 0;
  const bars = svg ? Array.from(svg.querySelectorAll('rect.bar')).map(r => {
    const b = r.getBoundingClientRect();
    return {stage: r.dataset.stage, width: b.width, x: b.left - area};
  }) : [];
  const texts = sel => Array.from(document.querySelectorAll(sel)).map(e => e.textContent);
  return {bars: bars, scripts: document.querySelectorAll('script').length, text: document.body.innerText,
    managers: texts('.managers'), messages: texts('.message')};
})()`

// openTimelinePage opens url in Chromium (openInBrowser) and returns what
// the page shows and every problem seen, a request to anything but origin
// included.
func openTimelinePage(ctx context.Context, t *testing.T, origin, url string) (rep pageReport, problems []string) {
	t.Helper()
	return openInBrowser[pageReport](ctx, t, url, pageReportJS,
		func(u string) bool { return strings.HasPrefix(u, origin+"/") }, chromedp.WindowSize(1280, 1024))
}

// getJSON GETs an API URL into v and returns the response's headers.
func getJSON(ctx context.Context, t *testing.T, url string, v any) http.Header {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.Header
}

// checkTimelinePage opens the page of one object in Chromium: its newest
// episode's waterfall has one bar per stage reached, each as wide as the
// API's durationSeconds say (± 1 px); every text in texts is shown as
// text, and so are managers and messages (if given) in a field-manager
// list and in an Event note or condition message; nothing runs, nothing is
// blocked, nothing leaves the exporter; the page carries the CSP header.
func checkTimelinePage(ctx context.Context, t *testing.T, base, kind, namespace, name string, texts, managers, messages []string) {
	t.Helper()
	path := "/" + url.PathEscape(kind) + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	var api struct {
		Items []apiEpisode `json:"items"`
	}
	getJSON(ctx, t, base+"/api/v1/timelines"+path, &api)
	if len(api.Items) == 0 {
		t.Fatalf("no episode of %s", path)
	}
	ep := api.Items[0]
	longest := ep.DurationSeconds
	want := map[string]float64{}
	for _, s := range ep.Stages {
		if s.Reached && s.DurationSeconds != nil {
			want[s.Stage] = *s.DurationSeconds
			longest = math.Max(longest, *s.DurationSeconds)
		}
	}
	for s, d := range want {
		want[s] = math.Max(d/longest*waterfallAreaPx, 1) // a bar is at least 1 px
	}

	rep, problems := openTimelinePage(ctx, t, base, base+"/timelines"+path)
	if len(problems) > 0 {
		t.Errorf("the timeline page of %s in chromium:\n%s", path, strings.Join(problems, "\n"))
	}
	if rep.Scripts != 0 {
		t.Errorf("%d script elements in the page", rep.Scripts)
	}
	if len(rep.Bars) != len(want) {
		t.Errorf("%d bars %+v, want one per stage reached: %v", len(rep.Bars), rep.Bars, want)
	}
	for _, b := range rep.Bars {
		w, ok := want[b.Stage]
		if !ok || math.Abs(b.Width-w) > 1 || math.Abs(b.X) > 1 {
			t.Errorf("bar %s: %.2f px wide at %.2f, want %.2f px (of %d for %.3f s) at 0", b.Stage, b.Width, b.X, w, waterfallAreaPx, longest)
		}
		t.Logf("bar %s: %.2f px, want %.2f", b.Stage, b.Width, w)
	}
	for _, s := range texts {
		if !strings.Contains(rep.Text, s) {
			t.Errorf("the page does not show %q as text", s)
		}
	}
	for _, c := range []struct {
		what       string
		want, have []string
	}{{"field managers", managers, rep.Managers}, {"messages", messages, rep.Messages}} {
		for _, s := range c.want {
			if !slices.ContainsFunc(c.have, func(h string) bool { return strings.Contains(h, s) }) {
				t.Errorf("no %s shown as the text %q: %q", c.what, s, c.have)
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/timelines"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const policy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	if csp, xfo := resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Frame-Options"); csp != policy || xfo != "DENY" {
		t.Errorf("Content-Security-Policy %q, X-Frame-Options %q; want %s, DENY", csp, xfo, policy)
	}
}

// The browser check catches what it must: an alert from an inline script
// (a dialog, and an exception thrown after it), a console error and a
// request to another origin, on a page served without the CSP.
func TestTimelineBrowserCheckCatchesProblems(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><html><head><title>bad</title></head><body>
<img src="http://127.0.0.2:9/x.png">
<script>alert(1); console.error("boom"); throw new Error("thrown");</script></body></html>`)
	}))
	defer srv.Close()
	_, problems := openTimelinePage(ctx, t, srv.URL, srv.URL+"/timelines")
	all := strings.Join(problems, "\n")
	for _, want := range []string{"Page.javascriptDialogOpening: alert \"1\"", "Runtime.exceptionThrown", "console error", "network request: http://127.0.0.2:9/x.png"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %q lack %q", problems, want)
		}
	}
	// Under the exporter's CSP an inline style is refused, and the refusal
	// is a problem too.
	csp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><html><head><title>styled</title><style>p{color:red}</style></head><body><p>x</p></body></html>`)
	}))
	defer csp.Close()
	_, problems = openTimelinePage(ctx, t, csp.URL, csp.URL+"/timelines")
	if all := strings.Join(problems, "\n"); !strings.Contains(all, "Content Security Policy") {
		t.Errorf("an inline style refused by the CSP is not reported: %q", problems)
	}
}
