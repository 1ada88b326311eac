package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// TestReportThroughReverseProxy: report through a plain
// net/http/httputil.ReverseProxy (what oauth2-proxy and prom-label-proxy
// are) in front of the real Prometheus.
//
// Go's HTTP/1 server closes a request's body as soon as the handler's
// response starts flowing (server.go, chunkWriter.writeHeader), while the
// proxy's Transport, having copied Content-Length bytes of that body
// upstream, reads it once more to check it is not longer (transfer.go,
// transferWriter.writeBody). When the upstream answers before that read,
// it fails ("http: invalid Read on closed Body"), persistConn.writeLoop
// closes the upstream connection mid-response, the proxy logs "read error
// during body copy: use of closed network connection" and aborts, and the
// client reads "unexpected EOF" (golang/go#40747, #15527). client_golang
// POSTs every query as a form; with the report's ~120 queries a run, 9 of
// 20 runs failed here. report.NewClient sends queries as GET: no body,
// nothing to race.
func TestReportThroughReverseProxy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	buckets, exceeded := rolloutHistory()
	prom := startBackfilledPrometheus(ctx, t, dir, buckets, exceeded)
	promURL, err := url.Parse(prom.URL())
	if err != nil {
		t.Fatal(err)
	}

	// The race forced (newRaceProxy): a POSTed query with an answer over
	// 4 KiB is cut every time; report.NewClient's GET is not.
	forced := newRaceProxy(t, promURL, true)
	rangeArgs := v1.Range{Start: reportAt.Add(-6 * 24 * time.Hour), End: reportAt, Step: time.Minute}
	const rangeQuery = `sum(kube_convergence_rollout_duration_seconds_bucket{le="300.0"})`
	// Uncompressed, as report asks (prometheus/common's HTTP client
	// disables compression): a gzipped answer can be read whole before the
	// connection is torn down.
	newClient := func(base string) api.Client {
		c, err := api.NewClient(api.Config{Address: base, RoundTripper: &http.Transport{DisableCompression: true}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	plainAPI := func(base string) v1.API { return v1.NewAPI(newClient(base)) }
	var retries atomic.Int64
	fixedAPI := func(base string) v1.API {
		return v1.NewAPI(report.NewClient(newClient(base), func(f string, a ...any) {
			retries.Add(1)
			t.Logf("retry: "+f, a...)
		}))
	}
	const tries = 5
	var cut, fixed int
	for range tries {
		if _, _, _, err := plainAPI(forced.URL).QueryRange(ctx, rangeQuery, rangeArgs); errors.Is(err, io.ErrUnexpectedEOF) {
			cut++
		} else if err != nil {
			t.Errorf("client_golang's POST through the forced race: %v, want unexpected EOF", err)
		}
		v, _, _, err := fixedAPI(forced.URL).QueryRange(ctx, rangeQuery, rangeArgs)
		if err != nil {
			t.Errorf("report.NewClient through the forced race: %v", err)
		} else if m, ok := v.(model.Matrix); ok && len(m) == 1 && len(m[0].Values) > 8000 {
			fixed++
		}
	}
	t.Logf("forced race: client_golang's POST cut %d of %d, report.NewClient answered %d of %d (%d GET, %d POST at the proxy)",
		cut, tries, fixed, tries, forced.gets.Load(), forced.posts.Load())
	if cut != tries || fixed != tries {
		t.Errorf("forced race: POST cut %d of %d (want all: the proxy must reproduce the race), report.NewClient answered %d of %d (want all)", cut, tries, fixed, tries)
	}

	// A query longer than report.MaxGetURL is still POSTed, and still
	// answered when the race is not forced.
	plain := newRaceProxy(t, promURL, false)
	long := rangeQuery + strings.Repeat(" ", report.MaxGetURL)
	posts := plain.posts.Load()
	if _, _, _, err := fixedAPI(plain.URL).QueryRange(ctx, long, rangeArgs); err != nil {
		t.Errorf("a query of %d bytes through the proxy: %v", len(long), err)
	}
	if plain.posts.Load() == posts {
		t.Errorf("a query of %d bytes went out as GET, want POST (URL over %d bytes)", len(long), report.MaxGetURL)
	}
	if retries.Load() != 0 {
		t.Errorf("%d retries, want none: GET must avoid the race, not the retry", retries.Load())
	}

	// The binary, run after run, through the plain proxy: every run
	// answers the same report as Prometheus itself, without a retry or a
	// proxy error.
	sloFile := filepath.Join(dir, "slos.yaml")
	if err := os.WriteFile(sloFile, []byte(reportSLOs), 0o644); err != nil {
		t.Fatal(err)
	}
	runReport := func(base string) (string, string, error) {
		cmd := exec.CommandContext(ctx, exporter, "report", "--prometheus.url", base, "-f", sloFile, "--at", reportAt.Format(time.RFC3339), "--format", "json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	direct, stderr, err := runReport(prom.URL())
	if err != nil {
		t.Fatalf("report from Prometheus: %v\n%s", err, stderr)
	}
	runs := 10
	if s := os.Getenv("KCE_PROXY_RUNS"); s != "" {
		if _, err := fmt.Sscan(s, &runs); err != nil {
			t.Fatalf("KCE_PROXY_RUNS=%q: %v", s, err)
		}
	}
	gets, posts := plain.gets.Load(), plain.posts.Load()
	failed := 0
	for i := range runs {
		out, stderr, err := runReport(plain.URL)
		switch {
		case err != nil:
			failed++
			t.Errorf("run %d through the proxy: %v\n%s", i, err, stderr)
		case strings.Contains(stderr, "once more"):
			t.Errorf("run %d retried a query: %s", i, stderr)
		case strings.Replace(out, plain.URL, prom.URL(), 1) != direct:
			t.Errorf("run %d through the proxy differs from the report from Prometheus", i)
		}
	}
	t.Logf("%d of %d runs through httputil.ReverseProxy failed; %d GET, %d POST; proxy errors: %v",
		failed, runs, plain.gets.Load()-gets, plain.posts.Load()-posts, plain.errors())
	if plain.posts.Load() != posts {
		t.Errorf("%d queries POSTed, want all as GET", plain.posts.Load()-posts)
	}
	if errs := plain.errors(); len(errs) != 0 {
		t.Errorf("the proxy logged %q", errs)
	}
}

// raceProxy is an httputil.ReverseProxy to a URL that counts the methods
// it sees and keeps its error log.
type raceProxy struct {
	*httptest.Server
	gets, posts atomic.Int64
	mu          sync.Mutex
	log         []string
}

func (p *raceProxy) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *raceProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, strings.TrimSpace(string(b)))
	return len(b), nil
}

type raceKey struct{}

// newRaceProxy starts the proxy. With force, a request with a body
// loses the race every time: the Transport's read past the body's end
// waits until the proxy has written 4 KiB of the response (the server's
// 2 KiB response buffer flushed, which closed the inbound body), and the
// rest of the response waits until the upstream connection is closed.
func newRaceProxy(t *testing.T, target *url.URL, force bool) *raceProxy {
	p := &raceProxy{}
	dialer := &net.Dialer{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			r, ok := pr.In.Context().Value(raceKey{}).(*race)
			if !ok || pr.Out.Body == nil || pr.Out.Body == http.NoBody {
				return
			}
			r.body = true
			pr.Out.Body = &lateBody{ReadCloser: pr.Out.Body, r: r, left: pr.Out.ContentLength}
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) {
					if c, ok := info.Conn.(*notifyConn); ok {
						r.conn = c
					}
				},
			}))
		},
		ErrorLog: log.New(p, "", 0),
	}
	if force {
		// Only to see the upstream connection closed; a plain proxy keeps
		// http.DefaultTransport.
		rp.Transport = &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &notifyConn{Conn: c, closed: make(chan struct{})}, nil
			},
		}
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodGet:
			p.gets.Add(1)
		case http.MethodPost:
			p.posts.Add(1)
		}
		if !force {
			rp.ServeHTTP(w, req)
			return
		}
		r := &race{ResponseWriter: w, begun: make(chan struct{}), read: make(chan struct{})}
		defer r.open()
		rp.ServeHTTP(r, req.WithContext(context.WithValue(req.Context(), raceKey{}, r)))
	}))
	t.Cleanup(p.Close)
	return p
}

// race is the response writer of one forced request.
type race struct {
	http.ResponseWriter
	n     int
	once  sync.Once
	begun chan struct{} // 4 KiB of the response written
	read  chan struct{} // the read past the body's end returned
	body  bool          // the request has a body
	conn  *notifyConn   // its upstream connection
}

func (r *race) Write(p []byte) (int, error) {
	n, err := r.ResponseWriter.Write(p)
	if r.n += n; r.n >= 4096 && r.body {
		r.open()
		// The Transport tears the connection down after the failed read.
		select {
		case <-r.read:
		case <-time.After(30 * time.Second):
		}
		if r.conn != nil {
			select {
			case <-r.conn.closed:
			case <-time.After(30 * time.Second):
			}
		}
	}
	return n, err
}

func (r *race) open() { r.once.Do(func() { close(r.begun) }) }

func (r *race) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// lateBody delays every read after the body's end (its Content-Length
// read, or EOF) until the response has begun.
type lateBody struct {
	io.ReadCloser
	r    *race
	left int64
	late sync.Once
}

func (b *lateBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		select {
		case <-b.r.begun:
		case <-time.After(30 * time.Second):
		}
		defer b.late.Do(func() { close(b.r.read) })
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); errors.Is(err, io.EOF) {
		b.left = 0
	}
	return n, err
}

// notifyConn closes closed when the connection is closed.
type notifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}
