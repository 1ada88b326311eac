package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

func handlerOptions(path string, alive, ready bool) HandlerOptions {
	reg := prometheus.NewRegistry()
	return HandlerOptions{
		TelemetryPath: path,
		Gatherer:      reg,
		Registerer:    reg,
		Liveness: func() (bool, string) {
			return alive, map[bool]string{true: "ok\n", false: "wedged: collector pods\n"}[alive]
		},
		Readiness: func() (bool, string) { return ready, map[bool]string{true: "ready\n", false: "not ready\n"}[ready] },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
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
	return resp.StatusCode, string(b)
}

// Handler returns an error, not a ServeMux panic, for every path that
// ValidateTelemetryPath rejects; the accepted ones serve metrics.
func TestHandlerTelemetryPath(t *testing.T) {
	for _, bad := range []string{"", "metrics", "/", "/healthz", "/readyz", "/metrics/", "//metrics", "/a/../metrics", "/m/{x}", "GET /metrics", "/%41", "/debug/pprof", "/debug/pprof/heap"} {
		if _, err := Handler(handlerOptions(bad, true, true)); err == nil {
			t.Errorf("Handler(%q): no error", bad)
		}
	}
	for _, good := range []string{"/metrics", "/-/metrics", "/healthz2", "/readyz/metrics", "/v1.0/metrics_x~"} {
		h, err := Handler(handlerOptions(good, true, true))
		if err != nil {
			t.Errorf("Handler(%q): %v", good, err)
			continue
		}
		srv := httptest.NewServer(h)
		if code, _ := get(t, srv.URL+good); code != http.StatusOK {
			t.Errorf("GET %s = %d", good, code)
		}
		if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
			t.Errorf("telemetry %s: GET /healthz = %d", good, code)
		}
		srv.Close()
	}
}

// The probe listener serves the two probes and nothing else; both answer
// 503 with the reason when they fail.
func TestProbeHandler(t *testing.T) {
	srv := httptest.NewServer(ProbeHandler(handlerOptions("/metrics", true, true)))
	defer srv.Close()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 404, "/": 404, "/healthz/x": 404} {
		if code, _ := get(t, srv.URL+path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
	failing := httptest.NewServer(ProbeHandler(handlerOptions("/metrics", false, false)))
	defer failing.Close()
	// The probe port carries no cluster data: the verdict only (the
	// checks' bodies name collectors, the API server and its error).
	if code, body := get(t, failing.URL+"/healthz"); code != 503 || body != "wedged: details on /healthz of the main listener\n" {
		t.Errorf("wedged /healthz = %d %q", code, body)
	}
	if code, body := get(t, failing.URL+"/readyz"); code != 503 || body != "not ready: details on /readyz of the main listener\n" {
		t.Errorf("not ready /readyz = %d %q", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("ready /readyz = %d %q", code, body)
	}
}

// What the README's scrape section says about created timestamps: the
// handler writes no _created lines in OpenMetrics text, and protobuf scrapes
// carry each counter's and histogram's created timestamp, which Prometheus'
// created-timestamp-zero-ingestion turns into a 0 sample.
func TestCreatedTimestampsOnlyInProtobuf(t *testing.T) {
	o := handlerOptions("/metrics", true, true)
	reg := prometheus.NewRegistry()
	o.Gatherer = reg
	born := time.Now()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kce_test_total", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kce_test_seconds", Help: "h"})
	reg.MustRegister(c, h)
	c.Inc()
	h.Observe(1)
	handler, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	scrape := func(accept string) (http.Header, []byte) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header, b
	}

	header, om := scrape("application/openmetrics-text;version=1.0.0")
	if !strings.HasPrefix(header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("OpenMetrics not negotiated: %s", header.Get("Content-Type"))
	}
	if strings.Contains(string(om), "_created") {
		t.Errorf("OpenMetrics text has _created lines:\n%s", om)
	}

	header, pb := scrape(`application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	dec := expfmt.NewDecoder(bytes.NewReader(pb), expfmt.ResponseFormat(header))
	created := map[string]time.Time{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter().GetCreatedTimestamp() != nil:
				created[mf.GetName()] = m.GetCounter().GetCreatedTimestamp().AsTime()
			case m.GetHistogram().GetCreatedTimestamp() != nil:
				created[mf.GetName()] = m.GetHistogram().GetCreatedTimestamp().AsTime()
			}
		}
	}
	for _, name := range []string{"kce_test_total", "kce_test_seconds"} {
		ts, ok := created[name]
		if !ok || ts.Before(born.Add(-time.Second)) || ts.After(time.Now()) {
			t.Errorf("%s: created timestamp %v (found %v), want about %v", name, ts, ok, born)
		}
	}
}

// stubSource is a timeline store with nothing in it.
type stubSource struct{}

func (stubSource) Select(timeline.Query, time.Time) timeline.Selection { return timeline.Literal(nil) }
func (stubSource) Kinds() []string                                     { return nil }

// Every response of the exporter carries the Content-Security-Policy: the
// metrics, the probes, the landing page and its stylesheet, the timelines
// page and API, their errors and a 404; the probe listener's too.
func TestContentSecurityPolicyOnEveryResponse(t *testing.T) {
	o := handlerOptions("/metrics", true, false)
	o.Timelines = timelineweb.Options{Source: stubSource{}}
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	probes := httptest.NewServer(ProbeHandler(o))
	defer probes.Close()
	for _, tc := range []struct {
		base, path string
		code       int
	}{
		{srv.URL, "/", 200}, {srv.URL, "/landing.css", 200}, {srv.URL, "/metrics", 200},
		{srv.URL, "/healthz", 200}, {srv.URL, "/readyz", 503}, {srv.URL, "/nothing", 404},
		{srv.URL, "/timelines", 200}, {srv.URL, "/timelines/style.css", 200},
		{srv.URL, "/timelines/deploy/ns/x", 404}, {srv.URL, "/timelines?state=x", 400},
		{srv.URL, "/api/v1/timelines", 200}, {srv.URL, "/api/v1/timelines?limit=0", 400},
		{srv.URL, "/api/v1/timelines/deploy/ns/x", 404}, {srv.URL, "/api/v1/timelines/pods/ns/x", 400},
		{srv.URL, "/api/v1/timelines/x", 404},
		{probes.URL, "/healthz", 200}, {probes.URL, "/metrics", 404},
	} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tc.base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		const want = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
		if csp, xfo := resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Frame-Options"); resp.StatusCode != tc.code || csp != want || xfo != "DENY" {
			t.Errorf("GET %s: %d with Content-Security-Policy %q, X-Frame-Options %q; want %d with %s, DENY", tc.path, resp.StatusCode, csp, xfo, tc.code, want)
		}
	}
	// POST to the page: the landing page's 404 carries it too.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/timelines", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("POST /timelines: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

// The landing page links the timelines when the store is there, and has
// no inline style left for the CSP to block: exporter-toolkit's CSS is
// served as /landing.css.
func TestLandingPage(t *testing.T) {
	o := handlerOptions("/metrics", true, true)
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	_, body := get(t, srv.URL+"/")
	srv.Close()
	if strings.Contains(body, "timelines") {
		t.Errorf("without a timeline store the landing page links the timelines:\n%s", body)
	}
	o.Timelines = timelineweb.Options{Source: stubSource{}}
	if h, err = Handler(o); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(h)
	defer srv.Close()
	code, body := get(t, srv.URL+"/")
	if code != 200 || !strings.Contains(body, `<a href="/timelines">Timelines`) || !strings.Contains(body, `<a href="/metrics">Metrics</a>`) {
		t.Errorf("landing page %d does not link /timelines:\n%s", code, body)
	}
	if strings.Contains(body, "<style") || !strings.Contains(body, `<link rel="stylesheet" href="/landing.css">`) {
		t.Errorf("landing page keeps an inline style or lacks its stylesheet:\n%s", body)
	}
	if strings.Contains(body, "pprof") {
		t.Errorf("landing page links /debug/pprof, which the exporter does not serve:\n%s", body)
	}
	if code, css := get(t, srv.URL+"/landing.css"); code != 200 || !strings.Contains(css, "header") {
		t.Errorf("/landing.css = %d %q", code, css)
	}
}

// Behind a reverse proxy that strips the path of --web.external-url, the
// landing page's links carry it, as the timelines page's do: /timelines
// would leave the proxy's prefix.
func TestLandingPageUnderExternalURL(t *testing.T) {
	o := handlerOptions("/metrics", true, true)
	o.Timelines = timelineweb.Options{Source: stubSource{}, ExternalURL: "https://ops.example.com/kce/"}
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, body := get(t, srv.URL+"/")
	for _, want := range []string{`<a href="/kce/metrics">`, `<a href="/kce/timelines">`, `<a href="/kce/healthz">`, `<link rel="stylesheet" href="/kce/landing.css">`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("landing page %d lacks %s:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, `href="/metrics"`) || strings.Contains(body, `href="/timelines"`) || strings.Contains(body, "ops.example.com") {
		t.Errorf("a link outside the external URL's path, or with its host:\n%s", body)
	}
	// An escaped path stays escaped (a %3F is no query).
	o.Timelines.ExternalURL = "https://ops.example.com/k%3Fce/"
	if h, err = Handler(o); err != nil {
		t.Fatalf("external URL with an escaped path: %v", err)
	}
	srv1 := httptest.NewServer(h)
	defer srv1.Close()
	if _, body := get(t, srv1.URL+"/"); !strings.Contains(body, `<a href="/k%3Fce/metrics">`) {
		t.Errorf("the landing page does not link /k%%3Fce/metrics:\n%s", body)
	}
	o.Timelines.ExternalURL = "https://ops.example.com/kce/"
	// Without a timeline store the prefix is still read.
	o.Timelines.Source = nil
	if h, err = Handler(o); err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(h)
	defer srv2.Close()
	if _, body := get(t, srv2.URL+"/"); !strings.Contains(body, `<a href="/kce/metrics">`) {
		t.Errorf("without timelines, the landing page does not link /kce/metrics:\n%s", body)
	}
}

// The telemetry path may not take a path of the timelines: ServeMux would
// panic on the conflicting patterns.
func TestTelemetryPathAvoidsTimelines(t *testing.T) {
	for _, bad := range []string{"/timelines", "/timelines/a/b/c", "/api/v1/timelines", "/api/v1/timelines/x", "/landing.css"} {
		if err := ValidateTelemetryPath(bad); err == nil {
			t.Errorf("ValidateTelemetryPath(%q): no error", bad)
		}
	}
	for _, good := range []string{"/timelines2", "/api/v1/metrics"} {
		if err := ValidateTelemetryPath(good); err != nil {
			t.Errorf("ValidateTelemetryPath(%q): %v", good, err)
		}
	}
}

// basic_auth_users of a web config: user "prometheus", password
// pprofTestPassword, bcrypt cost 10 (exporter-toolkit accepts only bcrypt;
// the hash of e2e/binary_test.go).
const (
	pprofTestUser     = "prometheus"
	pprofTestPassword = "probe-test-secret"
	pprofTestHash     = "$2a$10$6Cvkq62blutKKbLRKPkpQ.d79nzMZmKGP51HvImqfD9lVxRH9IWZa"
)

// --web.enable-pprof serves net/http/pprof on the main handler; without it
// every /debug/pprof path is 404 and the landing page does not link it.
func TestPprof(t *testing.T) {
	paths := []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/allocs", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/symbol"}
	o := handlerOptions("/metrics", true, true)
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	off := httptest.NewServer(h)
	defer off.Close()
	for _, p := range paths {
		if code, _ := get(t, off.URL+p); code != http.StatusNotFound {
			t.Errorf("pprof off: GET %s = %d, want 404", p, code)
		}
	}

	o.Pprof = true
	if h, err = Handler(o); err != nil {
		t.Fatal(err)
	}
	on := httptest.NewServer(h)
	defer on.Close()
	for _, p := range paths {
		if code, body := get(t, on.URL+p); code != http.StatusOK {
			t.Errorf("pprof on: GET %s = %d, want 200: %.200s", p, code, body)
		}
	}
	if _, body := get(t, on.URL+"/debug/pprof/"); !strings.Contains(body, "heap") || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index lists no heap or goroutine profile:\n%.500s", body)
	}
	// The heap profile is the gzipped protobuf of runtime/pprof.
	if _, body := get(t, on.URL+"/debug/pprof/heap"); !strings.HasPrefix(body, "\x1f\x8b") {
		t.Errorf("/debug/pprof/heap is not a gzipped profile: %q", body[:min(len(body), 40)])
	}
	if _, body := get(t, on.URL+"/"); !strings.Contains(body, "debug/pprof/heap") {
		t.Errorf("with pprof the landing page does not link the heap profile:\n%s", body)
	}
	if code, _ := get(t, on.URL+"/metrics"); code != http.StatusOK {
		t.Errorf("pprof on: GET /metrics = %d", code)
	}
}

// With a --web.config.file requiring basic auth, pprof is behind it like
// /metrics: 401 without credentials, 200 with them. The listener is the
// one exporter-toolkit's web.Serve runs, as serveMain's ListenAndServe.
func TestPprofBehindWebConfigBasicAuth(t *testing.T) {
	webConfig := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  "+pprofTestUser+": "+pprofTestHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := handlerOptions("/metrics", true, true)
	o.Pprof = true
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	systemd := false
	flags := &web.FlagConfig{WebSystemdSocket: &systemd, WebConfigFile: &webConfig, WebListenAddresses: &[]string{ln.Addr().String()}}
	done := make(chan error, 1)
	go func() { done <- web.Serve(ln, srv, flags, o.Logger) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("web.Serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	request := func(p string, auth bool) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth(pprofTestUser, pprofTestPassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/metrics"} {
		if code := request(p, false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials = %d, want 401", p, code)
		}
		if code := request(p, true); code != http.StatusOK {
			t.Errorf("GET %s with credentials = %d, want 200", p, code)
		}
	}
}
