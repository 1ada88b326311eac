package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// seen is one request as the server saw it.
type seen struct {
	method, path, query, body string
}

// recorder serves the query API's answer, recording each request; the
// first abort requests are cut after half the answer.
type recorder struct {
	mu    sync.Mutex
	reqs  []seen
	abort int
	code  int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, seen{req.Method, req.URL.Path, req.URL.RawQuery, string(body)})
	cut := r.abort > 0
	r.abort--
	r.mu.Unlock()
	answer := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}]}}`
	if r.code != 0 {
		w.WriteHeader(r.code)
		_, _ = io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"no"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
	if cut {
		_, _ = io.WriteString(w, answer[:len(answer)/2])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection is closed mid-answer
	}
	_, _ = io.WriteString(w, answer)
}

func (r *recorder) seen() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.reqs...)
}

func newTestAPI(t *testing.T, h http.Handler) (v1.API, *[]string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.Config{Address: srv.URL + "/prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	return v1.NewAPI(NewClient(c, func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) })), &logs
}

func TestClientSendsQueriesAsGet(t *testing.T) {
	rec := &recorder{}
	a, _ := newTestAPI(t, rec)
	ctx := context.Background()
	at := time.Unix(1700000000, 0)
	if _, _, _, err := a.Query(ctx, `sum(up{job="a b"})`, at); err != nil {
		t.Fatal(err)
	}
	r := v1.Range{Start: at.Add(-time.Hour), End: at, Step: time.Minute}
	_, _, _, _ = a.QueryRange(ctx, "up", r) // the recorder answers a vector: only the request counts
	long := "up" + strings.Repeat(" ", MaxGetURL)
	_, _, _, _ = a.Query(ctx, long, at)
	// Not a query: client_golang's own way (POST, GET on 405).
	_, _, _, _ = a.LabelNames(ctx, []string{"up"}, at.Add(-time.Hour), at)

	got := rec.seen()
	if len(got) != 4 {
		t.Fatalf("%d requests, want 4: %+v", len(got), got)
	}
	if g := got[0]; g.method != http.MethodGet || g.path != "/prometheus/api/v1/query" || g.body != "" ||
		!strings.Contains(g.query, "query=sum%28up%7Bjob%3D%22a+b%22%7D%29") || !strings.Contains(g.query, "time=1700000000") {
		t.Errorf("instant query: %+v, want a GET with the form in the URL", g)
	}
	if g := got[1]; g.method != http.MethodGet || g.path != "/prometheus/api/v1/query_range" || !strings.Contains(g.query, "step=60") {
		t.Errorf("range query: %+v, want a GET", g)
	}
	if g := got[2]; g.method != http.MethodPost || g.query != "" || !strings.Contains(g.body, "query=up+") {
		t.Errorf("a query of %d bytes: %s with URL query %d bytes, want a POST (over MaxGetURL)", len(long), g.method, len(g.query))
	}
	if g := got[3]; g.method != http.MethodPost || g.path != "/prometheus/api/v1/labels" {
		t.Errorf("labels: %+v, want client_golang's POST", g)
	}
}

func TestClientSendsOnceMoreAfterATransportError(t *testing.T) {
	ctx := context.Background()
	at := time.Unix(1700000000, 0)
	long := "up" + strings.Repeat(" ", MaxGetURL) // POSTed: the body is sent again
	for _, c := range []struct {
		name, query  string
		abort, code  int
		wantRequests int
		wantErr      string
		wantLogs     int
	}{
		{"cut once, GET", "up", 1, 0, 2, "", 1},
		{"cut once, POST", long, 1, 0, 2, "", 1},
		{"cut twice: the second error is returned", "up", 2, 0, 2, "unexpected EOF", 1},
		{"an HTTP error is an answer, not sent again", "up", 0, http.StatusBadRequest, 1, "bad_data", 0},
		{"a 503 likewise", "up", 0, http.StatusServiceUnavailable, 1, "server_error", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{abort: c.abort, code: c.code}
			a, logs := newTestAPI(t, rec)
			v, _, _, err := a.Query(ctx, c.query, at)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("error %v, want the answer", err)
			case c.wantErr == "" && v.String() != "{} => 2 @[1]":
				t.Errorf("answer %q", v.String())
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
			got := rec.seen()
			if len(got) != c.wantRequests {
				t.Errorf("%d requests, want %d", len(got), c.wantRequests)
			}
			for _, g := range got[1:] {
				if g != got[0] {
					t.Errorf("sent again as %+v, first as %+v", g, got[0])
				}
			}
			if len(*logs) != c.wantLogs || (c.wantLogs > 0 && !strings.Contains((*logs)[0], "/api/v1/query: unexpected EOF; sending it once more")) {
				t.Errorf("logged %q, want %d line(s) naming the path and the error", *logs, c.wantLogs)
			}
		})
	}

	// A done context is not retried.
	rec := &recorder{abort: 1}
	a, logs := newTestAPI(t, rec)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := a.Query(cctx, "up", at); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if n := len(rec.seen()); n != 0 || len(*logs) != 0 {
		t.Errorf("cancelled: %d requests, logs %q, want none", n, *logs)
	}
}
