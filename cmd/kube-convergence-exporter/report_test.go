package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closedURL is a loopback URL where nothing listens: the port was free a
// moment ago and is closed again.
func closedURL(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

const reportSLOFile = "service: shop\nslos:\n  - name: rollouts\n    objective: 0.99\n    period: 7d\n    sli:\n      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}\n"

func TestReportUsageErrorsExit2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	u := closedURL(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "-f", file}, "required flag(s) '--prometheus.url' not provided"},
		{[]string{"report", "--prometheus.url", u}, "required flag(s) '--file' not provided"},
		{[]string{"report", "--prometheus.url", "prometheus:9090", "-f", file}, `--prometheus.url "prometheus:9090": want an http or https URL`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--window", "1x"}, `--window "1x"`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--window", "1m"}, "at least 2m"},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--at", "yesterday"}, `--at "yesterday": want RFC 3339`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--at", "NaN"}, `--at "NaN": want RFC 3339`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--timeout", "0s"}, `--timeout 0s: want a positive duration`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--at", "Inf"}, `--at "Inf": want RFC 3339`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--at=-Inf"}, `--at "-Inf": want RFC 3339`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--at", "1e300"}, `--at "1e300": want RFC 3339`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--timezone", "Mars/Olympus"}, `--timezone "Mars/Olympus"`},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--format", "pdf"}, "enum value must be one of text,markdown,json,html"},
		{[]string{"report", "--prometheus.url", u, "-f", file, "--scrape-interval=-1m"}, "--scrape-interval -1m0s: want a positive duration"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args[1:], code, errs, c.want)
		}
	}
}

// An unreachable API: exit 1 naming the URL, the SLO and the query, and no
// file at -o (the report is written only once complete, through a
// temporary file renamed into place).
func TestReportUnreachableExit1NoHalfReport(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	u := closedURL(t)
	out := filepath.Join(dir, "report.html")
	code, stdout, errs := runCLI(t, "report", "--prometheus.url", u, "-f", file, "--format", "html", "-o", out, "--at", "1762776000")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errs)
	}
	for _, want := range []string{u, "slo shop-rollouts", `query "sum(max without (instance, pod) (increase(kube_convergence_rollout_duration_seconds_bucket{le=~\"300(\\\\.0)?\"}[1w])))"`, "connection refused"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the directory holds %v, want only the SLO file: no report, no temporary file", entries)
	}
}

// A bad SLO file fails exactly as slo validate does.
func TestReportBadSLOFileFailsAsValidate(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "service: shop\nslos:\n  - name: x\n    objective: 1.5\n    period: 30d\n    sli:\n      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 4}\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	vcode, _, verrs := runCLI(t, "slo", "validate", "-f", bad)
	code, _, errs := runCLI(t, "report", "--prometheus.url", closedURL(t), "-f", bad)
	if code != vcode || errs != verrs || code != 1 {
		t.Errorf("report: exit %d stderr %q; slo validate: exit %d stderr %q; want both 1 and the same", code, errs, vcode, verrs)
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2025, 11, 10, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"2025-11-10T12:00:00Z", "2025-11-10T13:00:00+01:00", "1762776000", "1762776000.000"} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if got, err := parseTime("1762776000.5"); err != nil || !got.Equal(want.Add(500*time.Millisecond)) {
		t.Errorf("fractional seconds: %v, %v", got, err)
	}
}

// emptyAPI answers every query with no series, after checking the basic
// auth that net/http sends from the URL's user info.
func emptyAPI(t *testing.T, user, password string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		typ := "vector"
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			typ = "matrix"
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":%q,"result":[]}}`, typ)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A password in --prometheus.url authenticates but is never printed: not
// in the header, the JSON source, the HTML title, nor any error.
func TestReportRedactsURLPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-pw"
	srv := emptyAPI(t, "report", secret)
	withPw := strings.Replace(srv.URL, "http://", "http://report:"+secret+"@", 1)
	redacted := strings.Replace(srv.URL, "http://", "http://report:xxxxx@", 1)
	for _, format := range []string{"text", "markdown", "json", "html"} {
		code, out, errs := runCLI(t, "report", "--prometheus.url", withPw, "-f", file, "--format", format, "--at", "1762776000")
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", format, code, errs)
		}
		if strings.Contains(out+errs, secret) {
			t.Errorf("%s: the password is printed: stdout %q stderr %q", format, out, errs)
		}
		if !strings.Contains(out, redacted) {
			t.Errorf("%s: the report does not name %s", format, redacted)
		}
		if format == "json" && !strings.Contains(out, `"source": "`+redacted+`"`) {
			t.Errorf("json: source is not %s", redacted)
		}
		if format == "html" && !strings.Contains(out, "<title>SLO report at 2025-11-10 12:00 UTC (UTC), from "+redacted+"</title>") {
			t.Errorf("html: the title does not name %s", redacted)
		}
	}
	// Errors: a wrong password (401), a closed port, a usage error.
	for _, c := range []struct {
		url  string
		code int
	}{
		{strings.Replace(srv.URL, "http://", "http://report:wrong-"+secret+"@", 1), 1},
		{strings.Replace(closedURL(t), "http://", "http://report:"+secret+"@", 1), 1},
		{"ftp://report:" + secret + "@prometheus:9090", 2},
		{"http://report:" + secret + "@[::1", 2},
	} {
		code, out, errs := runCLI(t, "report", "--prometheus.url", c.url, "-f", file, "--at", "1762776000")
		if code != c.code || strings.Contains(out+errs, secret) {
			t.Errorf("%s: exit %d, stderr %q; want %d and no password", c.url, code, errs, c.code)
		}
	}
}

// --timeout bounds the run: an API that never answers fails after it,
// exit 1.
func TestReportTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	start := time.Now()
	code, _, errs := runCLI(t, "report", "--prometheus.url", srv.URL, "-f", file, "--timeout", "300ms")
	if code != 1 || !strings.Contains(errs, "context deadline exceeded") || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d after %v, stderr %q; want 1 after about 300ms with context deadline exceeded", code, time.Since(start), errs)
	}
}

// What the Prometheus API says (its warnings, its errors) is the server's
// text: report prints it escaped (web.Visible), so an ANSI escape in it
// cannot recolour or rewrite the terminal.
func TestReportEscapesAPIWarningsAndErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	warn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		typ := "vector"
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			typ = "matrix"
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":%q,"result":[]},"warnings":["\u001b[31mred\u001b[0m"]}`, typ)
	}))
	t.Cleanup(warn.Close)
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":"error","errorType":"execution","error":"\u001b[2Jcleared"}`)
	}))
	t.Cleanup(fail.Close)
	for _, c := range []struct {
		url, want string
		code      int
	}{
		{warn.URL, `API warning: shop-rollouts: \x1b[31mred\x1b[0m`, 0},
		{fail.URL, `\x1b[2Jcleared`, 1},
	} {
		code, _, errs := runCLI(t, "report", "--prometheus.url", c.url, "-f", file, "--at", "1762776000")
		if code != c.code || strings.Contains(errs, "\x1b") || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d, %s and no raw ESC", c.url, code, errs, c.code, c.want)
		}
	}
}

// answeringAPI answers every query with no series, with the warnings.
func answeringAPI(t *testing.T, warnings ...string) *httptest.Server {
	t.Helper()
	ws, _ := json.Marshal(append([]string{}, warnings...))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		typ := "vector"
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			typ = "matrix"
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":%q,"result":[]},"warnings":%s}`, typ, ws)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 1d period with the default tiers: slo validate refuses it (no ticket
// pair is left), report warns, on stderr and in the JSON, and reports.
func TestReportOneDayPeriodIsAWarning(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	doc := strings.Replace(reportSLOFile, "period: 7d", "period: 1d", 1)
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	vcode, _, verrs := runCLI(t, "slo", "validate", "-f", file)
	if vcode != 1 || !strings.Contains(verrs, "no window pair is left for a 1d period") {
		t.Fatalf("slo validate: exit %d, stderr %q; want 1 and the 1d period refused", vcode, verrs)
	}
	code, out, errs := runCLI(t, "report", "--prometheus.url", answeringAPI(t).URL, "-f", file, "--format", "json", "--at", "1762776000")
	if code != 0 {
		t.Fatalf("report: exit %d, stderr %q; want 0", code, errs)
	}
	want := strings.TrimSpace(verrs)
	if !strings.Contains(errs, "report: warning: "+want+"; a report needs no alert rules and goes on without the ticket tier's burn rates") {
		t.Errorf("stderr %q lacks the warning %q", errs, want)
	}
	var r struct {
		FileWarnings []string `json:"fileWarnings"`
		SLOs         []struct {
			BurnRates []struct{ Tier, Long string } `json:"burnRates"`
		} `json:"slos"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.FileWarnings) != 1 || !strings.HasPrefix(r.FileWarnings[0], want) {
		t.Errorf("fileWarnings %q, want %q", r.FileWarnings, want)
	}
	if len(r.SLOs) != 1 || len(r.SLOs[0].BurnRates) != 1 || r.SLOs[0].BurnRates[0].Tier != "page" || r.SLOs[0].BurnRates[0].Long != "1h" {
		t.Errorf("burn rates %+v, want the page's 1h/5m alone", r.SLOs)
	}
}

// --fail-on-breach does not pass what was not measured: exit 4 for no
// data (the empty API), 0 with --allow-no-data; a partial answer (API
// warnings) exits 4 with --allow-no-data too.
func TestReportFailOnBreachUnanswered(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(file, []byte(reportSLOFile), 0o600); err != nil {
		t.Fatal(err)
	}
	empty, partial := answeringAPI(t).URL, answeringAPI(t, "partial response: store down").URL
	for _, c := range []struct {
		url  string
		args []string
		code int
		want string
	}{
		{empty, nil, 0, ""},
		{empty, []string{"--fail-on-breach"}, 4, "shop-rollouts: no data: not measured"},
		{empty, []string{"--fail-on-breach", "--allow-no-data"}, 0, ""},
		{partial, []string{"--fail-on-breach", "--allow-no-data"}, 4, "shop-rollouts: partial answer: 1 API warning(s): not measured"},
	} {
		code, _, errs := runCLI(t, append([]string{"report", "--prometheus.url", c.url, "-f", file, "--at", "1762776000"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}
