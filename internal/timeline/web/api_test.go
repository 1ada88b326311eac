package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

func newServer(t *testing.T) (*httptest.Server, *fakeSource) {
	t.Helper()
	src := &fakeSource{eps: episodes()}
	mux := http.NewServeMux()
	Register(mux, Options{
		Source: src, Now: func() time.Time { return t0.Add(10 * time.Second) },
		CustomResources: []string{"certificates.cert-manager.io", "clusterissuers.cert-manager.io"},
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, src
}

// answer is a response, read and closed.
type answer struct {
	StatusCode int
	Header     http.Header
}

// fetch GETs path and returns the response and its body.
func fetch(t *testing.T, srv *httptest.Server, path string) (answer, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

// fetchJSON GETs an API path, checks the status and the headers every
// answer of the API carries, and decodes the body into v.
func fetchJSON(t *testing.T, srv *httptest.Server, path string, code int, v any) {
	t.Helper()
	resp, body := fetch(t, srv, path)
	if resp.StatusCode != code {
		t.Fatalf("GET %s = %d, want %d: %s", path, resp.StatusCode, code, body)
	}
	if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
		t.Errorf("GET %s: Content-Type %q, Cache-Control %q; want application/json, no-store", path, ct, cc)
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

type listAnswer struct {
	Items []timeline.Episode `json:"items"`
}

func names(items []timeline.Episode) []string {
	var out []string
	for _, e := range items {
		out = append(out, e.Kind+" "+objectName(e.Namespace, e.Name)+" "+timeline.TraceID(e.UID, e.Generation)[:4])
	}
	return out
}

// Every list parameter reaches the store's Query as the API documents it.
func TestListParameters(t *testing.T) {
	srv, src := newServer(t)
	def := timeline.Query{Sort: timeline.SortDuration, Limit: DefaultLimit}
	with := func(f func(*timeline.Query)) timeline.Query { q := def; f(&q); return q }
	for _, tc := range []struct {
		query string
		want  timeline.Query
		n     int // items
	}{
		{"", def, 5},
		{"?namespace=shop", with(func(q *timeline.Query) { q.Namespace = "shop" }), 3},
		{"?kind=deploy", with(func(q *timeline.Query) { q.Kind = "Deployment" }), 2},
		{"?kind=deployments.apps", with(func(q *timeline.Query) { q.Kind = "Deployment" }), 2},
		{"?kind=Deployment", with(func(q *timeline.Query) { q.Kind = "Deployment" }), 2},
		{"?kind=sts", with(func(q *timeline.Query) { q.Kind = "StatefulSet" }), 1},
		{"?kind=Certificate.cert-manager.io", with(func(q *timeline.Query) { q.Kind = "Certificate.cert-manager.io" }), 1},
		{"?kind=certificates.cert-manager.io", with(func(q *timeline.Query) { q.Kind = "Certificate.cert-manager.io" }), 1},
		{"?outcome=converged", with(func(q *timeline.Query) { q.Outcome = "converged" }), 2},
		{"?outcome=superseded", with(func(q *timeline.Query) { q.Outcome = "superseded" }), 1},
		{"?state=stalled", with(func(q *timeline.Query) { q.State = "stalled" }), 1},
		{"?state=in_progress", with(func(q *timeline.Query) { q.State = "in_progress" }), 1},
		{"?state=closed", with(func(q *timeline.Query) { q.State = "closed" }), 3},
		{"?sort=start", with(func(q *timeline.Query) { q.Sort = "start" }), 5},
		{"?sort=duration", def, 5},
		{"?limit=1", with(func(q *timeline.Query) { q.Limit = 1 }), 1},
		{"?limit=1000", with(func(q *timeline.Query) { q.Limit = 1000 }), 5},
		{"?uid=uid-web", with(func(q *timeline.Query) { q.UID = "uid-web" }), 2},
		{"?trace_id=" + timeline.TraceID("uid-web", 3), with(func(q *timeline.Query) { q.TraceID = timeline.TraceID("uid-web", 3) }), 1},
		{"?trace_id=" + strings.ToUpper(timeline.TraceID("uid-pg", 7)), with(func(q *timeline.Query) { q.TraceID = timeline.TraceID("uid-pg", 7) }), 1},
		{"?namespace=shop&kind=deploy&outcome=converged&state=closed&sort=start&limit=5", timeline.Query{
			Namespace: "shop", Kind: "Deployment", Outcome: "converged", State: "closed", Sort: "start", Limit: 5,
		}, 1},
		{"?namespace=&kind=&outcome=&state=", def, 5}, // an empty form field is no filter
	} {
		var got listAnswer
		fetchJSON(t, srv, APIPath+tc.query, http.StatusOK, &got)
		if q := src.lastQuery(); q != tc.want {
			t.Errorf("%s: Query %+v, want %+v", tc.query, q, tc.want)
		}
		if len(got.Items) != tc.n {
			t.Errorf("%s: %d items %q, want %d", tc.query, len(got.Items), names(got.Items), tc.n)
		}
	}
	// Sorted by the store, answered in its order.
	var got listAnswer
	fetchJSON(t, srv, APIPath, http.StatusOK, &got)
	if want := []string{"StatefulSet db/pg", "Deployment shop/web", "Certificate.cert-manager.io shop/tls", "ClusterIssuer.cert-manager.io ca", "Deployment shop/web"}; !slices.EqualFunc(names(got.Items), want, strings.HasPrefix) {
		t.Errorf("default order %q, want %q", names(got.Items), want)
	}
}

// A bad parameter is a 400 naming it and what it accepts.
func TestListBadParameters(t *testing.T) {
	srv, _ := newServer(t)
	for _, tc := range []struct {
		query, param string
		accepted     []string // each must appear in accepted
	}{
		{"?state=running", "state", []string{"in_progress", "stalled", "closed"}},
		{"?sort=name", "sort", []string{"duration", "start"}},
		{"?outcome=failed", "outcome", []string{"converged", "superseded", "deleted", "paused", "manual"}},
		{"?limit=0", "limit", []string{"1-1000 (default 100)"}},
		{"?limit=1001", "limit", []string{"1-1000 (default 100)"}},
		{"?limit=-1", "limit", []string{"1-1000 (default 100)"}},
		{"?limit=ten", "limit", []string{"1-1000 (default 100)"}},
		{"?kind=pod", "kind", []string{"Deployment (deployment, deploy, deployments, deployments.apps)", "Kind.cert-manager.io"}},
		{"?kind=issuers.cert-manager.io", "kind", []string{"Kind.cert-manager.io (Certificate.cert-manager.io, ClusterIssuer.cert-manager.io)"}},
		{"?kind=" + xss, "kind", nil},
		{"?trace_id=xyz", "trace_id", []string{"32 lower-case hex digits"}},
		{"?namspace=shop", "namspace", []string{"namespace", "kind", "outcome", "state", "sort", "limit", "uid", "trace_id"}},
		{"?state=closed&state=stalled", "state", nil},
		// Malformed pairs: url.URL.Query dropped them and kept the rest,
		// so the namespace filter was ignored and every episode came back.
		{"?namespace=shop;x", "query", nil},
		{"?namespace=%zz", "query", nil},
		{"?state=closed&namespace=sh%op", "query", nil},
		// Bounds: a query string of 5,000 pairs, values longer than any
		// namespace, kind or uid.
		{"?" + strings.Repeat("a=1&", 5000), "query", nil},
		{"?namespace=" + strings.Repeat("n", 64), "namespace", nil},
		{"?kind=" + strings.Repeat("K", 318), "kind", nil},
		{"?uid=" + strings.Repeat("u", 129), "uid", nil},
	} {
		var e apiError
		fetchJSON(t, srv, APIPath+tc.query, http.StatusBadRequest, &e)
		if e.Code != 400 || e.Parameter != tc.param || !strings.Contains(e.Error, tc.param) {
			t.Errorf("%s: %+v, want code 400 naming parameter %s", tc.query, e, tc.param)
		}
		for _, a := range tc.accepted {
			if !slices.Contains(e.Accepted, a) || !strings.Contains(e.Error, a) {
				t.Errorf("%s: accepted %q, error %q: want %q in both", tc.query, e.Accepted, e.Error, a)
			}
		}
	}
}

// The JSON fields the API documents, with their values, and [] for no item.
func TestListJSONFields(t *testing.T) {
	srv, _ := newServer(t)
	resp, body := fetch(t, srv, APIPath+"?uid=uid-web&sort=start&limit=1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var raw struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw.Items) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	for _, f := range []string{"kind", "namespace", "name", "uid", "generation", "change", "state", "outcome", "start", "apiStart", "durationSeconds", "stages", "entries", "traceId"} {
		if _, ok := raw.Items[0][f]; !ok {
			t.Errorf("item lacks %q: %s", f, body)
		}
	}
	e := raw.Items[0]
	if e["kind"] != "Deployment" || e["generation"] != 3.0 || e["durationSeconds"] != 5.0 || e["start"] != "2026-12-01T10:00:00Z" || e["apiStart"] != "2026-12-01T09:59:59Z" {
		t.Errorf("item %v", e)
	}
	// Field managers, notes and messages are data: JSON keeps them verbatim.
	var got listAnswer
	fetchJSON(t, srv, APIPath+"?uid=uid-web&limit=1", http.StatusOK, &got)
	if m := got.Items[0].Entries[0].Managers; !slices.Contains(m, xss) {
		t.Errorf("managers %q lack %q", m, xss)
	}
	_, body = fetch(t, srv, APIPath+"?namespace=nowhere")
	if body != "{\"items\":[]}\n" {
		t.Errorf("empty list: %q, want {\"items\":[]}", body)
	}
	// Nil stages and entries are [] too.
	_, body = fetch(t, srv, APIPath+"?uid=uid-ca")
	if !strings.Contains(body, `"entries":[]`) {
		t.Errorf("nil entries are not []: %s", body)
	}
}

// The one-object endpoint: every kind spelling, _ for cluster-scoped, 404
// and 400 as JSON.
func TestObjectEndpoint(t *testing.T) {
	srv, _ := newServer(t)
	for _, kind := range []string{"Deployment", "deployment", "deploy", "deployments", "deployments.apps", "DEPLOYMENT"} {
		var got listAnswer
		fetchJSON(t, srv, APIPath+"/"+kind+"/shop/web", http.StatusOK, &got)
		if len(got.Items) != 2 || got.Items[0].Generation != 3 || got.Items[1].Generation != 2 {
			t.Errorf("%s/shop/web: %q, want generations 3 and 2", kind, names(got.Items))
		}
	}
	for _, path := range []string{"/Certificate.cert-manager.io/shop/tls", "/certificate.cert-manager.io/shop/tls", "/certificates.cert-manager.io/shop/tls", "/ClusterIssuer.cert-manager.io/_/ca", "/clusterissuers.cert-manager.io/_/ca"} {
		var got listAnswer
		fetchJSON(t, srv, APIPath+path, http.StatusOK, &got)
		if len(got.Items) != 1 {
			t.Errorf("%s: %q, want one episode", path, names(got.Items))
		}
	}
	// The object endpoint takes limit and continue only; a malformed
	// query, which url.URL.Query read as empty, is refused.
	for q, param := range map[string]string{"?;": "query", "?%zz": "query", "?limit=0": "limit", "?limit=101": "limit",
		"?continue=x": "continue", "?continue=0": "continue", "?uid=x": "uid", "?limit=1&limit=2": "limit"} {
		var e apiError
		fetchJSON(t, srv, APIPath+"/deploy/shop/web"+q, http.StatusBadRequest, &e)
		if e.Code != 400 || e.Parameter != param {
			t.Errorf("%s: %+v, want a 400 naming %s", q, e, param)
		}
	}
	for _, path := range []string{"/deploy/shop/nothing", "/deploy/other/web", "/ClusterIssuer.cert-manager.io/shop/ca", "/statefulset/_/pg"} {
		var e apiError
		fetchJSON(t, srv, APIPath+path, http.StatusNotFound, &e)
		if e.Code != 404 || !strings.Contains(e.Error, "no retained episode") {
			t.Errorf("%s: %+v", path, e)
		}
	}
	for _, path := range []string{"/pods/shop/web", "/Issuer.example.com/shop/x", "/certificates/shop/tls", "/%3Cscript%3E/shop/web"} {
		var e apiError
		fetchJSON(t, srv, APIPath+path, http.StatusBadRequest, &e)
		if e.Code != 400 || e.Parameter != "kind" || !slices.Contains(e.Accepted, "DaemonSet (daemonset, ds, daemonsets, daemonsets.apps)") {
			t.Errorf("%s: %+v, want a 400 listing the accepted kinds", path, e)
		}
	}
	var e apiError
	for _, path := range []string{"/deploy/shop", "/deploy/shop/web/extra", "/"} {
		fetchJSON(t, srv, APIPath+path, http.StatusNotFound, &e)
	}
}
