package web

import (
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// getPage GETs a page path, checks its status and headers and that it is
// free of markup from the cluster and of anything a CSP default-src 'self'
// would block: no script, no inline style, nothing from another origin.
func getPage(t *testing.T, srv *httptest.Server, path string, code int) string {
	t.Helper()
	resp, body := fetch(t, srv, path)
	if resp.StatusCode != code {
		t.Fatalf("GET %s = %d, want %d:\n%s", path, resp.StatusCode, code, body)
	}
	if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/html; charset=utf-8" || cc != "no-store" {
		t.Errorf("GET %s: Content-Type %q, Cache-Control %q", path, ct, cc)
	}
	checkPageSafe(t, path, body)
	return body
}

var (
	scriptTag   = regexp.MustCompile(`(?i)<script|javascript:|\son[a-z]+\s*=`)
	inlineStyle = regexp.MustCompile(`(?i)<style|\sstyle\s*=`)
	foreignURL  = regexp.MustCompile(`(?i)(src|href|action)="(https?:)?//`)
)

func checkPageSafe(t *testing.T, path, body string) {
	t.Helper()
	for what, re := range map[string]*regexp.Regexp{"a script": scriptTag, "an inline style": inlineStyle, "another origin": foreignURL} {
		if m := re.FindString(body); m != "" {
			t.Errorf("GET %s: %s (%q) in the page", path, what, m)
		}
	}
}

func TestPageEscapesClusterText(t *testing.T) {
	srv, _ := newServer(t)
	escaped := "&lt;script&gt;alert(1)&lt;/script&gt;"
	for _, path := range []string{
		PagePath, // the list: the condition message is not on it, the object's episodes are
		PagePath + "/deploy/shop/web",
		PagePath + "/Certificate.cert-manager.io/shop/tls",
	} {
		body := getPage(t, srv, path, http.StatusOK)
		if strings.Contains(body, xss) {
			t.Errorf("GET %s: %q is markup in the page", path, xss)
		}
		if path != PagePath && !strings.Contains(body, escaped) {
			t.Errorf("GET %s: the escaped text %q is missing", path, escaped)
		}
	}
	body := getPage(t, srv, PagePath+"/deploy/shop/web", http.StatusOK)
	for _, want := range []string{
		`<span class="managers">kubectl-client-side-apply, ` + escaped + `</span>`, // field managers
		`<span class="d message">` + escaped + `</span>`,                           // the Event's note
		"FailedCreate", "replicaset-controller", "ReplicaSet shop/web-7c9d",
		"Entries of generation 3", "Entries of generation 2",
		`href="/api/v1/timelines/Deployment/shop/web"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("object page lacks %q", want)
		}
	}
	// Filters reflected into the page are escaped too, in text and in
	// the links that clear or keep them.
	body = getPage(t, srv, PagePath+"?namespace=%22%3E%3Cscript%3Ealert(1)%3C/script%3E", http.StatusOK)
	if !strings.Contains(body, `>namespace &#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt; ×</a>`) ||
		!strings.Contains(body, `href="/timelines?namespace=%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E&amp;state=closed"`) {
		t.Errorf("namespace filter not escaped in its chip and links:\n%s", body)
	}
	body = getPage(t, srv, PagePath+"?kind=%3Cscript%3Ealert(1)%3C/script%3E", http.StatusBadRequest)
	if !strings.Contains(body, `class="error"`) || !strings.Contains(body, "unknown kind &#34;"+escaped) {
		t.Errorf("bad kind: no escaped error on the page:\n%s", body)
	}
}

// The list page: stalled and slowest sections, the filters as links (no
// form: the CSP's form-action 'none'), bad filters as a 400 page.
func TestListPage(t *testing.T) {
	srv, src := newServer(t)
	body := getPage(t, srv, PagePath, http.StatusOK)
	stalled := body[strings.Index(body, `<section id="stalled">`):strings.Index(body, `<section id="slowest">`)]
	if !strings.Contains(stalled, "StatefulSet db/pg") || strings.Contains(stalled, "shop/web") || !strings.Contains(stalled, "ready: replica_failure") {
		t.Errorf("stalled section:\n%s", stalled)
	}
	_, slowest, _ := strings.Cut(body, `<section id="slowest">`)
	order := []string{"Deployment shop/web</a> <span class=\"gen\">generation 3", "Certificate.cert-manager.io shop/tls", "ClusterIssuer.cert-manager.io ca", "Deployment shop/web</a> <span class=\"gen\">generation 2"}
	last := -1
	for _, s := range order {
		i := strings.Index(slowest, s)
		if i <= last {
			t.Errorf("slowest section: %q at %d, after %d: want longest first %q", s, i, last, order)
		}
		last = i
	}
	for _, want := range []string{
		`<nav class="filters" aria-label="filters">`,
		`<a href="/timelines?state=stalled">stalled</a>`, `<a href="/timelines?outcome=superseded">superseded</a>`,
		`<a href="/timelines?kind=StatefulSet">StatefulSet</a>`, `<a href="/timelines?kind=Certificate.cert-manager.io">Certificate.cert-manager.io</a>`,
		`<a href="/timelines" aria-current="true">any</a>`,
		`<a href="/timelines?namespace=shop" title="only this namespace">shop</a>`,
		`<link rel="stylesheet" href="/timelines/style.css">`,
		`href="/timelines/ClusterIssuer.cert-manager.io/_/ca"`,
		`href="/timelines/Deployment/shop/web"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("list page lacks %q", want)
		}
	}
	body = getPage(t, srv, PagePath+"?namespace=shop&kind=deploy&outcome=superseded&state=closed", http.StatusOK)
	if q := src.lastQuery(); q != (timeline.Query{Namespace: "shop", Kind: "Deployment", Outcome: "superseded", State: "closed", Sort: "duration", Limit: pageLimit}) {
		t.Errorf("filtered page queried %+v", q)
	}
	if strings.Contains(body, `id="stalled"`) || strings.Count(body, `<article class="episode`) != 1 ||
		!strings.Contains(body, `<a href="/timelines?kind=deploy&amp;namespace=shop&amp;outcome=superseded&amp;state=closed" aria-current="true">superseded</a>`) ||
		!strings.Contains(body, `<a class="chip" href="/timelines?kind=deploy&amp;namespace=shop&amp;state=closed" title="clear this filter">outcome superseded ×</a>`) {
		t.Errorf("filtered page: want only the slowest section with generation 2, the outcome current and clearable:\n%s", body)
	}
	body = getPage(t, srv, PagePath+"?state=stalled", http.StatusOK)
	if strings.Contains(body, `id="slowest"`) || !strings.Contains(body, `id="stalled"`) {
		t.Error("state=stalled: want the stalled section only")
	}
	for _, q := range []string{"?outcome=failed", "?state=x", "?limit=5", "?kind=pods", "?trace_id=nothex", "?namespace=shop;x", "?namespace=%zz"} {
		body := getPage(t, srv, PagePath+q, http.StatusBadRequest)
		if !strings.Contains(body, `<p class="error" role="alert">parameter `) || !strings.Contains(body, `<nav class="filters"`) {
			t.Errorf("%s: no error under the filters:\n%s", q, body)
		}
	}
	getPage(t, srv, PagePath+"?namespace=nowhere", http.StatusOK)
}

func TestObjectPage(t *testing.T) {
	srv, _ := newServer(t)
	body := getPage(t, srv, PagePath+"/deployments.apps/shop/web", http.StatusOK)
	if n := strings.Count(body, `<article class="episode`); n != 2 {
		t.Errorf("%d episodes, want both generations", n)
	}
	if !strings.Contains(body, "<title>Timeline of Deployment shop/web · kube-convergence-exporter</title>") {
		t.Error("no title naming the object")
	}
	getPage(t, srv, PagePath+"/clusterissuers.cert-manager.io/_/ca", http.StatusOK)
	body = getPage(t, srv, PagePath+"/deploy/shop/nothing", http.StatusNotFound)
	if !strings.Contains(body, "No retained episode of Deployment shop/nothing.") {
		t.Errorf("404 page:\n%s", body)
	}
	body = getPage(t, srv, PagePath+"/pods/shop/web", http.StatusBadRequest)
	if !strings.Contains(body, "unknown kind &#34;pods&#34;: accepted Deployment (deployment, deploy") {
		t.Errorf("400 page:\n%s", body)
	}
	resp, icon := fetch(t, srv, IconPath)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(icon, "<svg") {
		t.Errorf("GET %s = %d %s", IconPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, css := fetch(t, srv, StylePath)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(css, "svg.waterfall") {
		t.Errorf("GET %s = %d %s", StylePath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

var barRE = regexp.MustCompile(`<rect class="bar" data-stage="([a-z_]+)" x="(\d+)" y="\d+" width="([0-9.]+)"`)

// One bar per stage reached, from the start, d/longest*BarAreaPx wide.
func TestWaterfallBars(t *testing.T) {
	srv, _ := newServer(t)
	for _, tc := range []struct {
		path string
		want map[string]float64 // stage: px
	}{
		// Longest 5 s: 600 px are 5 s.
		{PagePath + "/deploy/shop/web", map[string]float64{"observed": 6, "updated": 144, "available": 420, "endpoints_ready": 600}},
		// Open, 2 s so far, only observed reached: the rest has no bar.
		{PagePath + "/Certificate.cert-manager.io/shop/tls", map[string]float64{"observed": 90}},
	} {
		body := getPage(t, srv, tc.path, http.StatusOK)
		first, _, _ := strings.Cut(body, "</svg>") // the newest generation's waterfall
		bars := barRE.FindAllStringSubmatch(first, -1)
		if len(bars) != len(tc.want) {
			t.Errorf("%s: %d bars, want %d", tc.path, len(bars), len(tc.want))
		}
		for _, b := range bars {
			w, _ := strconv.ParseFloat(b[3], 64)
			if want, ok := tc.want[b[1]]; !ok || math.Abs(w-want) > 0.01 || b[2] != strconv.Itoa(labelPx) {
				t.Errorf("%s: bar %s at x=%s width %.2f, want x=%d width %.2f", tc.path, b[1], b[2], w, labelPx, want)
			}
		}
	}
	body := getPage(t, srv, PagePath+"/sts/db/pg", http.StatusOK)
	if !strings.Contains(body, `<text class="note blocking" x="204" y="52">waiting: replica_failure</text>`) || !strings.Contains(body, ">not reached</text>") {
		t.Errorf("stalled waterfall lacks its blocking stage and unreached stage:\n%s", body)
	}
}

func TestNewWaterfallEdgeCases(t *testing.T) {
	// A recovered stage with no time, a stage longer than the episode's
	// duration (an open episode answered just before a stage's time), a
	// zero duration: no bar, the longest spans the area, one pixel.
	ep := timeline.Episode{State: timeline.StateInProgress, DurationSeconds: 1, Stage: "available",
		Stages: []timeline.StageTiming{{Stage: "observed", Reached: true}, reached("updated", 0), reached("x", 2), {Stage: "available"}}}
	w := newWaterfall(ep)
	if w.Rows[0].Bar || w.Rows[0].Note != "reached before the exporter saw the episode" {
		t.Errorf("recovered stage: %+v", w.Rows[0])
	}
	if !w.Rows[1].Bar || w.Rows[1].BarW != minBarPx || w.Rows[2].BarW != BarAreaPx || w.TrackW != BarAreaPx/2 {
		t.Errorf("rows %+v, track %v", w.Rows, w.TrackW)
	}
	if !w.Rows[3].Blocking || w.Rows[3].Note != "waiting" {
		t.Errorf("blocking row %+v", w.Rows[3])
	}
	if w := newWaterfall(timeline.Episode{}); w.TrackW != minBarPx || len(w.Rows) != 0 {
		t.Errorf("empty episode: %+v", w)
	}
	for d, want := range map[float64]string{0.0042: "0.004 s", 59.9996: "60.000 s", 61.25: "1 min 1.2 s", 600: "10 min 0.0 s"} {
		if got := formatSeconds(d); got != want {
			t.Errorf("formatSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// Behind a reverse proxy that strips the external URL's path, the page's
// links carry it.
func TestPageLinksUnderExternalURL(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Options{Source: &fakeSource{eps: episodes()}, Now: func() time.Time { return t0 }, ExternalURL: "https://ops.example.com/kce/"})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := getPage(t, srv, PagePath, http.StatusOK)
	for _, want := range []string{
		`<link rel="stylesheet" href="/kce/timelines/style.css">`, `href="/kce/timelines?state=closed"`,
		`href="/kce/timelines/Deployment/shop/web"`, `href="/kce/api/v1/timelines?trace_id=`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, `href="/timelines`) || strings.Contains(body, "ops.example.com") {
		t.Error("a link without the external URL's path, or with its host")
	}
}

// An exemplar's link, /timelines?uid=..., shows that object's episodes with
// their entries; ?trace_id= the one episode.
func TestListPageByUIDAndTrace(t *testing.T) {
	srv, src := newServer(t)
	body := getPage(t, srv, PagePath+"?uid=uid-web", http.StatusOK)
	if q := src.lastQuery(); q != (timeline.Query{UID: "uid-web", Sort: "start", Limit: pageLimit}) {
		t.Errorf("queried %+v", q)
	}
	if strings.Count(body, `<article class="episode`) != 2 || !strings.Contains(body, "Episodes of uid uid-web, newest first") ||
		!strings.Contains(body, "Entries of generation 3") || strings.Contains(body, `id="stalled"`) {
		t.Errorf("?uid=: want both generations of shop/web with their entries:\n%s", body)
	}
	body = getPage(t, srv, PagePath+"?trace_id="+timeline.TraceID("uid-pg", 7), http.StatusOK)
	if strings.Count(body, `<article class="episode`) != 1 || !strings.Contains(body, "StatefulSet db/pg") {
		t.Errorf("?trace_id=: want the StatefulSet's episode:\n%s", body)
	}
	body = getPage(t, srv, PagePath+"?uid=nothing", http.StatusOK)
	if !strings.Contains(body, "No retained episode matches.") {
		t.Errorf("?uid= of nothing:\n%s", body)
	}
}

// The external URL's path, as links carry it: escaped (a %3F stays one,
// not a query), without trailing slashes.
func TestPathPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "http://host": "", "http://host/": "", "https://ops.example.com/kce/": "/kce",
		"http://host/a/b//": "/a/b", "http://host/k%3Fce/": "/k%3Fce", "http://host/k%20ce": "/k%20ce", "http://[::1": "",
	} {
		if got := PathPrefix(in); got != want {
			t.Errorf("PathPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// objectStore is a store holding n closed episodes of Deployment shop/web,
// generations 1 to n.
func objectStore(n int) *timeline.Store {
	s := timeline.NewStore(timeline.Config{RetainedPerObject: n})
	for g := range int64(n) {
		start := t0.Add(time.Duration(g) * time.Minute)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: "uid-web", Namespace: "shop", Name: "web",
			Generation: g + 1, Target: g + 1, Change: tracker.ChangeTemplate, Start: start, APIStart: start}
		s.ObserveEpisodes([]tracker.Event{
			{Type: tracker.EpisodeOpened, Episode: ep, At: start},
			{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeSuperseded, At: start.Add(time.Second)},
		})
	}
	return s
}

var nextLink = regexp.MustCompile(`href="(/timelines/[^"]*continue=[^"]*)"`)

// Every page of an object counts the object's episodes, not those left
// from that page on.
func TestObjectPagesCountEveryEpisode(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Options{Source: objectStore(25), Now: func() time.Time { return t0.Add(time.Hour) }})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	body := getPage(t, srv, PagePath+"/deploy/shop/web", http.StatusOK)
	if !strings.Contains(body, "20 of 25 on this page") {
		t.Errorf("page 1 does not say 20 of 25:\n%s", body)
	}
	m := nextLink.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("page 1 has no next link:\n%s", body)
	}
	body = getPage(t, srv, html.UnescapeString(m[1]), http.StatusOK)
	if !strings.Contains(body, "newest first: 5 of 25.") {
		t.Errorf("page 2 does not say 5 of 25:\n%s", body)
	}
}
