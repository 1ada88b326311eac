package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// FuzzTimelineRequest sends any path and query string under the API
// (/api/v1/timelines, the first byte even) or the page (/timelines, odd)
// to the handlers Register mounts, over the test episodes (fakeSource),
// as the server reads a request line (url.ParseRequestURI). Seeds
// (testdata/fuzz/FuzzTimelineRequest): the requests of the API's tests
// and docs/timelines.md, and malformed ones. It checks:
//
//   - an API answer is JSON with the API's headers: a list of episodes
//     (200), or an error whose code is the status and that names the bad
//     parameter when it is one (400); nothing else but the router's
//     redirects of unclean paths;
//   - the query the store is asked is valid: limit 1-1000 (object: 1-100),
//     a known state, outcome and sort or none, a trace id of 32 hex
//     digits, bounded namespace, kind and uid;
//   - the list's parameters are a fixed point: the query asked, written
//     back as parameters, asks the same query; an object's next link
//     asks for the next page of the same object;
//   - a page answer is HTML (200, 400 or 404) that holds no <script>,
//     whatever the query and the episodes (markup in field managers and
//     messages) hold.
func FuzzTimelineRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, which uint8, path, query string) {
		if len(path)+len(query) > 8<<10 {
			return
		}
		base := APIPath
		if which&1 == 1 {
			base = PagePath
		}
		target := base + path
		if query != "" {
			target += "?" + query
		}
		src := &fakeSource{eps: episodes()}
		mux := http.NewServeMux()
		Register(mux, Options{
			Source: src, Now: func() time.Time { return t0.Add(10 * time.Second) },
			CustomResources: []string{"certificates.cert-manager.io", "clusterissuers.cert-manager.io"},
		})
		serve := func(target string) (*httptest.ResponseRecorder, bool) {
			u, err := url.ParseRequestURI(target)
			if err != nil {
				return nil, false
			}
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
			req.URL, req.RequestURI = u, target
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			return w, true
		}
		w, ok := serve(target)
		if !ok {
			return
		}
		if w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect {
			return // the router cleans the path: a redirect, served again as any request
		}
		u, _ := url.ParseRequestURI(target)
		if base == PagePath {
			checkPage(t, target, w)
			return
		}
		if !strings.HasPrefix(u.Path, APIPath+"/") && u.Path != APIPath {
			return // another path (/api/v1/timelinesX): the router's 404
		}
		checkAPIAnswer(t, target, w)
		if w.Code != http.StatusOK {
			return
		}
		q := src.lastQuery()
		checkQuery(t, target, q)
		if u.Path == APIPath {
			// Fixed point: the query asked, as parameters, asks it again.
			v := url.Values{}
			for k, s := range map[string]string{"namespace": q.Namespace, "kind": q.Kind, "outcome": q.Outcome, "state": q.State,
				"sort": q.Sort, "limit": strconv.Itoa(q.Limit), "uid": q.UID, "trace_id": q.TraceID} {
				if s != "" {
					v.Set(k, s)
				}
			}
			again := APIPath + "?" + v.Encode()
			if w2, _ := serve(again); w2.Code != http.StatusOK {
				t.Errorf("%s asked %+v; asked again as %s: %d %s", target, q, again, w2.Code, w2.Body)
			} else if q2 := src.lastQuery(); q2 != q {
				t.Errorf("%s asked %+v; asked again as %s: %+v", target, q, again, q2)
			}
			return
		}
		var page struct {
			Next string `json:"next"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &page)
		if page.Next == "" {
			return
		}
		w2, ok := serve(page.Next)
		if !ok {
			t.Fatalf("%s: the next link %q is not a request URI", target, page.Next)
		}
		if q2 := src.lastQuery(); w2.Code != http.StatusOK || q2.Kind != q.Kind || q2.Namespace != q.Namespace || q2.Name != q.Name || q2.Before == 0 {
			t.Errorf("%s asked %+v; its next link %s: %d, asked %+v", target, q, page.Next, w2.Code, q2)
		}
	})
}

// checkAPIAnswer checks an answer of the API (see FuzzTimelineRequest).
func checkAPIAnswer(t *testing.T, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
		t.Errorf("GET %s: %d, Content-Type %q, Cache-Control %q", target, w.Code, ct, cc)
	}
	if !utf8.Valid(w.Body.Bytes()) {
		t.Errorf("GET %s: the answer is not UTF-8", target)
	}
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.DisallowUnknownFields()
	switch w.Code {
	case http.StatusOK:
		var list struct {
			Items []timeline.Episode `json:"items"`
			Next  string             `json:"next"`
		}
		if err := dec.Decode(&list); err != nil {
			t.Errorf("GET %s: 200 with %v: %s", target, err, w.Body)
		}
	case http.StatusBadRequest, http.StatusNotFound:
		var e apiError
		if err := dec.Decode(&e); err != nil || e.Code != w.Code || e.Error == "" {
			t.Errorf("GET %s: %d with %+v (%v): %s", target, w.Code, e, err, w.Body)
		}
		if w.Code == http.StatusBadRequest && e.Parameter == "" {
			t.Errorf("GET %s: 400 naming no parameter: %s", target, w.Body)
		}
	default:
		t.Errorf("GET %s: status %d: %s", target, w.Code, w.Body)
	}
}

// checkQuery checks the query the store was asked.
func checkQuery(t *testing.T, target string, q timeline.Query) {
	t.Helper()
	maxLimit := MaxLimit
	if q.Name != "" {
		maxLimit = MaxObjectLimit
	}
	bad := q.Limit < 1 || q.Limit > maxLimit ||
		(q.State != "" && !slices.Contains(states, q.State)) || (q.Outcome != "" && !slices.Contains(outcomes, q.Outcome)) ||
		(q.Sort != "" && !slices.Contains(sorts, q.Sort)) || (q.TraceID != "" && !traceIDPattern.MatchString(q.TraceID)) ||
		len(q.Namespace) > maxNamespace && q.Name == "" || len(q.Kind) > maxKind || len(q.UID) > maxUID
	if bad {
		t.Errorf("GET %s asked the store %+v", target, q)
	}
}

// checkPage checks an answer of the page.
func checkPage(t *testing.T, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	switch w.Code {
	case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
	default:
		t.Errorf("GET %s: status %d: %s", target, w.Code, w.Body)
	}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		return // the router's 404 of another path, the stylesheet's neighbours
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") && !strings.HasPrefix(ct, "text/css") && !strings.HasPrefix(ct, "image/svg") {
		t.Errorf("GET %s: Content-Type %q", target, ct)
	}
	if strings.Contains(strings.ToLower(w.Body.String()), "<script") {
		t.Errorf("GET %s: the page holds a script", target)
	}
}
