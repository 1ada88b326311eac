// Package web serves the timeline store over HTTP: the JSON API
// /api/v1/timelines (read by users' scripts, by `kube-convergence-exporter
// explain` and by Grafana's exemplar links) and the page /timelines (the
// slowest and stalled episodes, a waterfall of stages per episode, the
// entries of one object). It also renders the same episodes as text for a
// terminal, the output of `explain` (text.go; every string from the cluster
// through Visible).
//
// Everything shown comes from the cluster (names, field managers, Event
// notes, condition messages) and may hold any printable text: the page is
// rendered by html/template, which escapes by context, carries no script at
// all and loads nothing but its own stylesheet, embedded in the binary so
// that it works in air-gapped clusters. The exporter's HTTP handler sends
// `Content-Security-Policy: default-src 'self'` (and no framing, no <base>,
// no form submission) on every response (internal/serve), which also
// forbids inline styles: the page has none.
package web

import (
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// Paths the package serves.
const (
	APIPath   = "/api/v1/timelines"
	PagePath  = "/timelines"
	StylePath = "/timelines/style.css"
	IconPath  = "/timelines/favicon.svg"
)

// Options configure the handlers.
type Options struct {
	// Source is the timeline store. Without it nothing is mounted.
	Source timeline.Source
	// Now is the clock of open episodes' durations; nil: time.Now.
	Now func() time.Time
	// CustomResources are the custom resources the exporter is configured
	// to track, as plural.group (config.Resource.String()): the groups
	// whose Kind.group the API and the page accept (timeline.ResolveKind).
	CustomResources []string
	// ExternalURL is --web.external-url: its path prefixes the page's
	// links, as a reverse proxy that strips it serves them.
	ExternalURL string
	// MaxRequests bounds the requests served at once by the API and,
	// apart, by the page (--web.max-requests): one more gets 503 at once.
	// 0: no bound.
	MaxRequests int
}

// AnswerTimeout is the write deadline of every answer of the API and the
// page: a client that reads nothing (or too slowly) holds a request's
// memory and its place among Options.MaxRequests this long at most.
const AnswerTimeout = 30 * time.Second

//go:embed assets
var assets embed.FS

// Register mounts the API and the page on mux. Without o.Source it mounts
// nothing.
func Register(mux *http.ServeMux, o Options) {
	if o.Source == nil {
		return
	}
	h := newHandler(o)
	api := newLimiter(o.MaxRequests, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, apiError{Error: fmt.Sprintf("%d requests of the timeline API are being answered (--web.max-requests); retry later", o.MaxRequests)})
	})
	page := newLimiter(o.MaxRequests, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "%d requests of the timelines page are being answered (--web.max-requests); retry later\n", o.MaxRequests)
	})
	mux.HandleFunc("GET "+APIPath, api.wrap(h.list))
	mux.HandleFunc("GET "+APIPath+"/{kind}/{namespace}/{name}", api.wrap(h.object))
	// Any other path under the API is a JSON 404, not the landing page's.
	mux.HandleFunc(APIPath+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Error: "no such endpoint " + r.URL.Path + ": want " + APIPath + " or " + APIPath + "/{kind}/{namespace}/{name}"})
	})
	mux.HandleFunc("GET "+PagePath, page.wrap(h.listPage))
	mux.HandleFunc("GET "+PagePath+"/{kind}/{namespace}/{name}", page.wrap(h.objectPage))
	mux.HandleFunc("GET "+StylePath, asset("assets/timelines.css", "text/css; charset=utf-8"))
	// Without an icon of its own, a browser asks for /favicon.ico and logs
	// the 404 as an error.
	mux.HandleFunc("GET "+IconPath, asset("assets/favicon.svg", "image/svg+xml"))
}

// Reserved reports whether p is a path Register may mount, so that a
// --web.telemetry-path cannot collide with it (http.ServeMux panics on
// conflicting patterns).
func Reserved(p string) bool {
	for _, r := range []string{APIPath, PagePath} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

type handler struct {
	src    timeline.Source
	now    func() time.Time
	custom []string
	prefix string // path of the external URL, without its trailing slash
}

func newHandler(o Options) *handler {
	h := &handler{src: o.Source, now: o.Now, custom: o.CustomResources}
	if h.now == nil {
		h.now = time.Now
	}
	h.prefix = PathPrefix(o.ExternalURL)
	return h
}

// PathPrefix is the path of an external URL (--web.external-url), escaped
// and without its trailing slashes: "/kce" for http://host/kce/, "" for
// http://host/ or an unparsable URL. The exporter is served at the root
// by a reverse proxy that strips that path, so its pages prefix their
// links with it.
func PathPrefix(externalURL string) string {
	u, err := url.Parse(externalURL)
	if err != nil {
		return ""
	}
	return strings.TrimRight(u.EscapedPath(), "/")
}

// resolveKind resolves a kind as written. The Kind of a configured
// custom resource is only known from its CRD: when the configured plural
// (or a lower-case kind) of a configured group does not resolve, the kinds
// of the stored episodes are tried too (the store's kind index: no episode
// is read).
func (h *handler) resolveKind(s string) (string, error) {
	k, err := timeline.ResolveKind(s, h.custom)
	if err == nil || !h.configuredGroup(s) {
		return k, err
	}
	seen := append([]string(nil), h.custom...)
	for _, kind := range h.src.Kinds() {
		if strings.Contains(kind, ".") && !slices.Contains(seen, kind) {
			seen = append(seen, kind)
		}
	}
	return timeline.ResolveKind(s, seen)
}

// configuredGroup: s is name.group of a configured custom resource's group.
func (h *handler) configuredGroup(s string) bool {
	_, group, ok := strings.Cut(s, ".")
	if !ok {
		return false
	}
	for _, c := range h.custom {
		if _, g, _ := strings.Cut(c, "."); strings.EqualFold(g, group) {
			return true
		}
	}
	return false
}

// objectNamespace maps the path's namespace to the store's: "_" is
// cluster-scoped.
func objectNamespace(ns string) string {
	if ns == "_" {
		return ""
	}
	return ns
}

// pathNamespace is the inverse of objectNamespace.
func pathNamespace(ns string) string {
	if ns == "" {
		return "_"
	}
	return ns
}

// limiter answers busy beyond n requests at once (node_exporter's
// --web.max-requests: no queue, a 503 at once), and sets every answer's
// write deadline.
type limiter struct {
	slots chan struct{} // nil: no bound
	busy  func(http.ResponseWriter)
}

func newLimiter(n int, busy func(http.ResponseWriter)) *limiter {
	l := &limiter{busy: busy}
	if n > 0 {
		l.slots = make(chan struct{}, n)
	}
	return l
}

func (l *limiter) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
				defer func() { <-l.slots }()
			default:
				l.busy(w)
				return
			}
		}
		// Not every ResponseWriter has a deadline (tests' recorders).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(AnswerTimeout))
		h(w, r)
	}
}

// asset serves an embedded file.
func asset(name, contentType string) http.HandlerFunc {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded: only a typo in this file gets here
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	}
}
