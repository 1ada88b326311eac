package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

var update = flag.Bool("update", false, "rewrite the golden file in testdata/ (go test ./cmd/kube-convergence-exporter -run TestExplainGolden -update)")

// explainNow is the fixed clock of the golden files: 12.75 s after the
// recorded answer's stalled episode passed 10 minutes (its durationSeconds
// 612.5 was computed by the exporter at the same instant).
var explainNow = time.Date(2026, 11, 10, 12, 0, 12, 750_000_000, time.UTC)

// recordedAnswer is the API answer of the text renderer's golden test.
var recordedAnswer = filepath.Join("..", "..", "internal", "timeline", "web", "testdata", "explain", "quota-blocked.json")

func runExplain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = runMainAt(append([]string{"explain"}, args...), &out, &errs, func() time.Time { return explainNow })
	return code, out.String(), errs.String()
}

// recordedAPI serves the text renderer's recorded answer
// (internal/timeline/web/testdata/explain/quota-blocked.json) as the exporter's
// API does: decoded into the model and encoded again by encoding/json, so
// that the bytes are those of a real answer (U+009B and U+202E raw, ESC as
// \u001b). It records the escaped path of every request.
func recordedAPI(t *testing.T) (srv *httptest.Server, paths *[]string) {
	t.Helper()
	list := struct {
		Items []timeline.Episode `json:"items"`
	}{recordedEpisodes(t)}
	paths = new([]string)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*paths = append(*paths, r.URL.EscapedPath())
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(list); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, paths
}

// The golden file is the JSON output of a quota-blocked Deployment
// (generation 3 stalled on replica_failure with FailedCreate events) and
// its converged generation 2, with markup, ANSI escapes, a C1 CSI, a bidi
// override and a newline in a field manager and an Event note; the text
// output is the text renderer's (internal/timeline/web, whose golden test
// holds the same answer as text).
func TestExplainGolden(t *testing.T) {
	srv, paths := recordedAPI(t)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			code, out, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL, "-o", format)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if format == "text" {
				if want := renderText(t); out != want {
					t.Errorf("text output is not the text renderer's:\n%s\nwant:\n%s", out, want)
				}
				return
			}
			golden := filepath.Join("testdata", "explain", "quota-blocked."+format+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s (go test -run TestExplainGolden -update to rewrite it):\n%s", golden, out)
			}
			assertTerminalSafe(t, out)
			var back struct {
				Items []timeline.Episode `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &back); err != nil || len(back.Items) != 2 {
				t.Fatalf("-o json is not the API's answer: %v, %d items", err, len(back.Items))
			}
			// The escapes mean the same in JSON: the note decodes to
			// the exact bytes the cluster held.
			if got := back.Items[0].Entries[5].Message; !strings.Contains(got, "\x1b[31mred\x1b[0m \u009b2J \u202egnp.exe\nsecond") {
				t.Errorf("note decoded from -o json: %q", got)
			}
		})
	}
	for _, p := range *paths {
		if p != "/api/v1/timelines/deploy/shop/web" {
			t.Errorf("requested %s, want /api/v1/timelines/deploy/shop/web", p)
		}
	}
}

// renderText is the text renderer's output of the recorded answer at
// explainNow.
func renderText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	web.WriteText(&b, recordedEpisodes(t), explainNow)
	return b.String()
}

// recordedEpisodes decodes the recorded answer into the model.
func recordedEpisodes(t *testing.T) []timeline.Episode {
	t.Helper()
	raw, err := os.ReadFile(recordedAnswer)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []timeline.Episode `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// assertTerminalSafe fails on any byte or rune a terminal could interpret
// (C0 but newline, DEL, C1, bidi and other format runes).
func assertTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r == '\n' {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("output carries rune %U at byte %d: %q", r, i, out[max(0, i-20):min(len(out), i+20)])
		}
	}
}

// -o json keeps the API's answer (same JSON value) while escaping runes
// JSON leaves raw, astral ones as surrogate pairs.
func TestWriteJSONEscapesInvisibleRunes(t *testing.T) {
	in := "{\"m\":\"a\u009bb\u202ec\U000e0001d\U0001F600<\"}"
	var out bytes.Buffer
	if err := writeJSON(&out, []byte(in)); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"m\": \"a\\u009bb\\u202ec\\udb40\\udc01d\U0001F600<\"\n}\n"
	if out.String() != want {
		t.Errorf("writeJSON = %q, want %q", out.String(), want)
	}
	var a, b any
	if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal(out.Bytes(), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("the escaped JSON decodes to %v, the answer to %v", b, a)
	}
}

// Every spelling of the kind reaches the API as written, each path segment
// escaped, under the base URL's path; an empty -n is the cluster scope "_".
func TestExplainRequestPath(t *testing.T) {
	srv, paths := recordedAPI(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deployment/web", "-n", "shop"}, "/api/v1/timelines/deployment/shop/web"},
		{[]string{"deployments.apps/web", "-n", "shop"}, "/api/v1/timelines/deployments.apps/shop/web"},
		{[]string{"Deployment/web", "--namespace=shop"}, "/api/v1/timelines/Deployment/shop/web"},
		{[]string{"ClusterIssuer.cert-manager.io/letsencrypt"}, "/api/v1/timelines/ClusterIssuer.cert-manager.io/_/letsencrypt"},
		{[]string{"deploy/a b%c?d#e", "-n", "shop"}, "/api/v1/timelines/deploy/shop/a%20b%25c%3Fd%23e"},
	} {
		*paths = nil
		args := append(slices.Clone(c.args), "--exporter.url", srv.URL)
		if code, _, errs := runExplain(t, args...); code != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errs)
		}
		if len(*paths) != 1 || (*paths)[0] != c.want {
			t.Errorf("%v: requested %v, want %s", c.args, *paths, c.want)
		}
	}
	*paths = nil
	if code, _, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL+"/kce/?x=1"); code != 0 || len(*paths) != 1 || (*paths)[0] != "/kce/api/v1/timelines/deploy/shop/web" {
		t.Errorf("under a path prefix: exit %d (%s), requested %v", code, errs, *paths)
	}
}

// The http.config.file is promtool's format: here a bearer token from a
// file, relative to the configuration file.
func TestExplainHTTPConfigFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, "Unauthorized")
			return
		}
		fmt.Fprint(w, `{"items":[{"kind":"Deployment","namespace":"shop","name":"web","generation":1,"state":"in_progress","start":"2026-11-10T12:00:00Z","durationSeconds":12.75}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "http.yml")
	if err := os.WriteFile(cfg, []byte("authorization:\n  credentials_file: token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL, "--exporter.http.config.file", cfg); code != 0 || !strings.Contains(out, "in_progress for 12.75s") {
		t.Errorf("with the token: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL); code != 1 || !strings.Contains(errs, "Unauthorized") {
		t.Errorf("without: exit %d, stderr %q; want 1 and Unauthorized", code, errs)
	}
	if code, _, errs := runExplain(t, "deploy/web", "--exporter.url", srv.URL, "--exporter.http.config.file", filepath.Join(dir, "missing.yml")); code != 1 || !strings.Contains(errs, "--exporter.http.config.file") {
		t.Errorf("a missing config file: exit %d, stderr %q", code, errs)
	}
}

// The other halves of promtool's format that an exporter's
// --web.config.file asks for: a TLS listener whose CA is given by
// tls_config.ca_file, and basic auth with a password file.
func TestExplainHTTPConfigFileTLSAndBasicAuth(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "pa55" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, "Unauthorized")
			return
		}
		fmt.Fprint(w, `{"items":[{"kind":"Deployment","namespace":"shop","name":"web","generation":1,"state":"in_progress","start":"2026-11-10T12:00:00Z","durationSeconds":12.75}]}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused without the CA
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, content := range map[string][]byte{
		"ca.pem":     ca,
		"password":   []byte("pa55\n"),
		"tls.yml":    []byte("tls_config:\n  ca_file: ca.pem\n"),
		"tls+ba.yml": []byte("tls_config:\n  ca_file: ca.pem\nbasic_auth:\n  username: ops\n  password_file: password\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(cfg string) (int, string, string) {
		args := []string{"deploy/web", "-n", "shop", "--exporter.url", srv.URL}
		if cfg != "" {
			args = append(args, "--exporter.http.config.file", filepath.Join(dir, cfg))
		}
		return runExplain(t, args...)
	}
	if code, out, errs := run("tls+ba.yml"); code != 0 || !strings.Contains(out, "in_progress for 12.75s") {
		t.Errorf("with the CA and the password: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := run("tls.yml"); code != 1 || !strings.Contains(errs, "Unauthorized") {
		t.Errorf("with the CA only: exit %d, stderr %q; want 1 and Unauthorized", code, errs)
	}
	if code, _, errs := run(""); code != 1 || !strings.Contains(errs, "exporter unreachable") || !strings.Contains(errs, "certificate") {
		t.Errorf("without the CA: exit %d, stderr %q; want 1 and a certificate error", code, errs)
	}
}

// The credentials of --exporter.http.config.file go to the exporter only:
// prometheus/common's round tripper sets them on every request, a redirect
// to another host included (Go's client drops an Authorization header it
// copies, not one a round tripper adds), so explain follows redirects on
// the exporter's host only.
func TestExplainKeepsCredentialsOnTheExporterHost(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"items":[]}`)
	}))
	defer other.Close()
	answer := `{"items":[{"kind":"Deployment","namespace":"shop","name":"web","generation":1,"state":"in_progress","start":"2026-11-10T12:00:00Z","durationSeconds":12.75}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away/api/v1/timelines/deploy/shop/web":
			http.Redirect(w, r, other.URL+"/login", http.StatusFound)
		case "/moved/api/v1/timelines/deploy/shop/web":
			http.Redirect(w, r, "/api/v1/timelines/deploy/shop/web", http.StatusMovedPermanently)
		default:
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, answer)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "http.yml")
	if err := os.WriteFile(cfg, []byte("authorization:\n  credentials: s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL+"/away", "--exporter.http.config.file", cfg)
	if len(leaked) > 0 || code != 1 || !strings.Contains(errs, "redirected to another host") {
		t.Errorf("redirect to %s: it received Authorization %q; exit %d, stderr %q", other.URL, leaked, code, errs)
	}
	// A redirect on the exporter's host is followed, with the token.
	if code, out, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL+"/moved", "--exporter.http.config.file", cfg); code != 0 || !strings.Contains(out, "in_progress for 12.75s") {
		t.Errorf("redirect on the same host: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// A redirect's host is the server's choice: explain prints it escaped,
// as everything else it prints from a server, so a bidirectional override
// or a C1 control (CSI) cannot rewrite the terminal line.
func TestExplainEscapesARedirectHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "http://ev\u202eil\u009b31m.example/login")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	code, _, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL)
	if code != 1 || strings.ContainsAny(errs, "\u202e\u009b") || !strings.Contains(errs, `ev\u202eil\x9b31m.example`) {
		t.Errorf("exit %d, stderr %q: want 1 and the host escaped", code, errs)
	}
}

// Exit codes: 1 when the exporter has no timeline of the object (404, or
// an empty list), cannot be reached or answers another error; 2 on bad
// usage and on an unknown kind (the API's 400, whose accepted forms are
// printed as they came: the command line was wrong, as with any usage
// error).
func TestExplainExitCodes(t *testing.T) {
	answer := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	notFound := answer(http.StatusNotFound, `{"error":"no timeline of Deployment shop/gone"}`)
	unknownKind := answer(http.StatusBadRequest, `{"error":"unknown kind \"deplyment\": accepted Deployment (deployment, deploy, deployments, deployments.apps); StatefulSet (statefulset, sts, statefulsets, statefulsets.apps)"}`)
	empty := answer(http.StatusOK, `{"items":[]}`)
	broken := answer(http.StatusInternalServerError, "boom\x1b[2J")
	notJSON := answer(http.StatusOK, `<html>`)
	unreachable := closedURL(t)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"deploy/gone", "-n", "shop", "--exporter.url", notFound}, 1, []string{notFound + "/api/v1/timelines/deploy/shop/gone has no timeline of deploy/gone in namespace shop: no timeline of Deployment shop/gone"}},
		{[]string{"deploy/gone", "--exporter.url", notFound}, 1, []string{"in the cluster scope (a namespaced object needs -n NAMESPACE)"}},
		{[]string{"deploy/web", "-n", "shop", "--exporter.url", empty}, 1, []string{"has no timeline of deploy/web in namespace shop"}},
		{[]string{"deploy/web", "-n", "shop", "--exporter.url", unreachable}, 1, []string{"GET " + unreachable + "/api/v1/timelines/deploy/shop/web: exporter unreachable", "connection refused"}},
		{[]string{"deploy/web", "-n", "shop", "--exporter.url", broken}, 1, []string{"Internal Server Error: boom\\x1b[2J"}},
		{[]string{"deploy/web", "-n", "shop", "--exporter.url", notJSON}, 1, []string{"not a timeline answer"}},
		{[]string{"deplyment/web", "-n", "shop", "--exporter.url", unknownKind}, 2, []string{`explain: unknown kind "deplyment": accepted Deployment (deployment, deploy, deployments, deployments.apps)`}},
		{[]string{"deploy/web", "-n", "shop"}, 2, []string{"required flag(s) '--exporter.url' not provided"}},
		{[]string{"--exporter.url", notFound}, 2, []string{"required argument 'object' not provided"}},
		{[]string{"web", "--exporter.url", notFound}, 2, []string{"web: want KIND/NAME"}},
		{[]string{"deploy/", "--exporter.url", notFound}, 2, []string{"want KIND/NAME"}},
		{[]string{"deploy/a/b", "--exporter.url", notFound}, 2, []string{"want KIND/NAME"}},
		// A path segment . or .. is no Kubernetes name; the exporter's
		// router would clean it away and answer for another path.
		{[]string{"deploy/..", "-n", "shop", "--exporter.url", notFound}, 2, []string{`name "..": no Kubernetes object is named . or ..`}},
		{[]string{"../web", "-n", "shop", "--exporter.url", notFound}, 2, []string{`kind ".."`}},
		{[]string{"deploy/web", "-n", ".", "--exporter.url", notFound}, 2, []string{`namespace "."`}},
		{[]string{"deploy/web", "--exporter.url", "exporter:10329"}, 2, []string{`--exporter.url "exporter:10329": want an http or https URL`}},
		{[]string{"deploy/web", "--exporter.url", "http://user:pw@[::1"}, 2, []string{"--exporter.url: not a URL"}},
		{[]string{"deploy/web", "--exporter.url", notFound, "-o", "yaml"}, 2, []string{"enum value must be one of text,json"}},
		{[]string{"deploy/web", "--exporter.url", notFound, "--timeout", "0s"}, 2, []string{"--timeout 0s"}},
	} {
		code, out, errs := runExplain(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", c.args, code, c.code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", c.args, out)
		}
		if strings.Contains(errs, "pw") {
			t.Errorf("%v: stderr %q shows the password", c.args, errs)
		}
		assertTerminalSafe(t, strings.TrimSuffix(errs, "\n"))
	}
}

// explain reads every page of the object's timeline, following the API's
// next links: 45 retained episodes are three pages of the real handler.
func TestExplainFollowsNextPages(t *testing.T) {
	const n = 45
	s := timeline.NewStore(timeline.Config{RetainedPerObject: n})
	for g := range int64(n) {
		start := explainNow.Add(time.Duration(g-n) * time.Minute)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: "uid-web", Namespace: "shop", Name: "web",
			Generation: g + 1, Target: g + 1, Change: tracker.ChangeTemplate, Start: start, APIStart: start}
		s.ObserveEpisodes([]tracker.Event{
			{Type: tracker.EpisodeOpened, Episode: ep, At: start},
			{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeSuperseded, At: start.Add(time.Second)},
		})
	}
	mux := http.NewServeMux()
	web.Register(mux, web.Options{Source: s, Now: func() time.Time { return explainNow }})
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	code, out, errs := runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var got struct {
		Items []timeline.Episode `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var gens []int64
	for _, e := range got.Items {
		gens = append(gens, e.Generation)
	}
	if len(gens) != n || gens[0] != n || gens[n-1] != 1 || requests != 3 {
		t.Errorf("%d requests gave generations %v, want 3 giving %d down to 1", requests, gens, n)
	}
	code, out, _ = runExplain(t, "deploy/web", "-n", "shop", "--exporter.url", srv.URL)
	if c := strings.Count(out, "superseded"); code != 0 || c < 2*n { // twice an episode
		t.Errorf("text: exit %d, superseded %d times, want twice for each of %d episodes", code, c, n)
	}
}
