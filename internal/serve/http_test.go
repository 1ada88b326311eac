package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	for _, bad := range []string{"", "metrics", "/", "/healthz", "/readyz", "/metrics/", "//metrics", "/a/../metrics", "/m/{x}", "GET /metrics", "/%41"} {
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
	if code, body := get(t, failing.URL+"/healthz"); code != 503 || body != "wedged: collector pods\n" {
		t.Errorf("wedged /healthz = %d %q", code, body)
	}
	if code, body := get(t, failing.URL+"/readyz"); code != 503 || body != "not ready\n" {
		t.Errorf("not ready /readyz = %d %q", code, body)
	}
}
