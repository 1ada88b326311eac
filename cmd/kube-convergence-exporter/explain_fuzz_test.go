package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

// explainServer answers the first request of a run with (code, first),
// every later one (the next links explain follows) with 200 and next, and
// records the bodies it served.
type explainServer struct {
	mu          sync.Mutex
	code        int
	first, next []byte
	served      [][]byte
}

func (s *explainServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	code, body := s.code, s.first
	if len(s.served) > 0 {
		code, body = http.StatusOK, s.next
	}
	s.served = append(s.served, body)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (s *explainServer) set(code int, first, next []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code, s.first, s.next, s.served = code, first, next, nil
}

func (s *explainServer) bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// explainCodes are the statuses FuzzExplainAnswer's first answer takes.
var explainCodes = []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError, http.StatusServiceUnavailable}

// FuzzExplainAnswer runs `explain deploy/web -n shop`, text and JSON
// output, against an exporter whose first answer is (a status of
// explainCodes, first) and whose pages after it are next. Seeds
// (testdata/fuzz/FuzzExplainAnswer): the recorded answer of the text
// renderer's golden test (markup, ANSI escapes, a C1 CSI, a bidi
// override and a newline from the cluster), a page with a next link, the
// API's 404 and 400 answers, a proxy's HTML. It checks:
//
//   - the exit code is 0, 1, or 2 exactly when the API answered 400
//     (an unknown kind);
//   - a success prints something, and a failure nothing but its lines
//     on stderr, each "kube-convergence-exporter: explain: ...";
//   - whatever the answer holds, stdout and stderr hold only printable
//     runes and newlines (nothing a terminal interprets: web.Visible);
//   - explain reads at most maxExplainPages pages;
//   - the JSON output is JSON, holding the items of every page read, in
//     order, as the API wrote them.
func FuzzExplainAnswer(f *testing.F) {
	s := &explainServer{}
	// Without keep-alives: each run builds its own client (explainClient),
	// whose idle connections would otherwise pile up, two goroutines and
	// two descriptors each, until the worker runs out of descriptors
	// (after some 10,000 runs; explain runs once per process).
	srv := httptest.NewUnstartedServer(s)
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	defer srv.Close()
	f.Fuzz(func(t *testing.T, pick uint8, first, next []byte) {
		if len(first)+len(next) > 64<<10 {
			return
		}
		code := explainCodes[int(pick)%len(explainCodes)]
		for _, format := range []string{explainText, explainJSON} {
			s.set(code, first, next)
			var stdout, stderr bytes.Buffer
			exit := runMainAt([]string{"explain", "deploy/web", "-n", "shop", "--exporter.url", srv.URL, "-o", format, "--timeout", "10s"},
				&stdout, &stderr, func() time.Time { return explainNow })
			served := s.bodies()
			what := format + " output of a " + http.StatusText(code) + " answer"
			switch {
			case exit != explainOK && exit != explainFailed && exit != explainUsage:
				t.Fatalf("%s: exit %d", what, exit)
			case (exit == explainUsage) != (code == http.StatusBadRequest):
				t.Errorf("%s: exit %d", what, exit)
			case exit == explainOK && stdout.Len() == 0:
				t.Errorf("%s: exit 0 without output", what)
			case exit != explainOK && (stdout.Len() > 0 || !explainLines(stderr.String())):
				t.Errorf("%s: exit %d, stdout %q, stderr %q", what, exit, stdout.String(), stderr.String())
			case len(served) > maxExplainPages:
				t.Errorf("%s: %d pages read, over %d", what, len(served), maxExplainPages)
			}
			for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
				for _, r := range out {
					if r != '\n' && !web.VisibleRune(r) {
						t.Fatalf("%s: %s holds %U, which a terminal may interpret: %q", what, name, r, out)
					}
				}
			}
			if exit != explainOK || format != explainJSON {
				continue
			}
			checkExplainJSON(t, what, stdout.Bytes(), served)
		}
	})
}

// explainLines: s is lines of explain's, each its own message.
func explainLines(s string) bool {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "" {
		return false
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "kube-convergence-exporter: explain: ") {
			return false
		}
	}
	return true
}

// checkExplainJSON: out is JSON whose items are those of the pages served.
func checkExplainJSON(t *testing.T, what string, out []byte, served [][]byte) {
	t.Helper()
	var got struct{ Items []any }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
	var want []any
	for _, b := range served {
		var page struct{ Items []any }
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("%s: a page served is not JSON, yet explain succeeded: %v", what, err)
		}
		want = append(want, page.Items...)
	}
	if !reflect.DeepEqual(got.Items, want) {
		t.Errorf("%s: items %v, want those of the %d pages read, %v", what, got.Items, len(served), want)
	}
}
