// Package web serves the timeline store over HTTP: the JSON API
// /api/v1/timelines (read by users' scripts, by `kube-convergence-exporter
// explain` and by Grafana's exemplar links) and the page /timelines (the
// slowest and stalled episodes, a waterfall of stages per episode, the
// entries of one object).
//
// Everything shown comes from the cluster (names, field managers, Event
// notes, condition messages) and may hold any printable text: the page is
// rendered by html/template, which escapes by context, carries no script at
// all and loads nothing but its own stylesheet, embedded in the binary so
// that it works in air-gapped clusters. The exporter's HTTP handler sends
// `Content-Security-Policy: default-src 'self'` on every response
// (internal/serve), which also forbids inline styles: the page has none.
package web

import (
	"embed"
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
}

//go:embed assets
var assets embed.FS

// Register mounts the API and the page on mux. Without o.Source it mounts
// nothing.
func Register(mux *http.ServeMux, o Options) {
	if o.Source == nil {
		return
	}
	h := newHandler(o)
	mux.HandleFunc("GET "+APIPath, h.list)
	mux.HandleFunc("GET "+APIPath+"/{kind}/{namespace}/{name}", h.object)
	// Any other path under the API is a JSON 404, not the landing page's.
	mux.HandleFunc(APIPath+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Error: "no such endpoint " + r.URL.Path + ": want " + APIPath + " or " + APIPath + "/{kind}/{namespace}/{name}"})
	})
	mux.HandleFunc("GET "+PagePath, h.listPage)
	mux.HandleFunc("GET "+PagePath+"/{kind}/{namespace}/{name}", h.objectPage)
	mux.HandleFunc("GET "+StylePath, h.serveStyle)
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
	css    []byte
}

func newHandler(o Options) *handler {
	h := &handler{src: o.Source, now: o.Now, custom: o.CustomResources}
	if h.now == nil {
		h.now = time.Now
	}
	if u, err := url.Parse(o.ExternalURL); err == nil {
		h.prefix = strings.TrimRight(u.Path, "/")
	}
	style, err := assets.ReadFile("assets/timelines.css")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	h.css = style
	return h
}

// resolveKind resolves a kind as written. The Kind of a configured
// custom resource is only known from its CRD: when the configured plural
// (or a lower-case kind) does not resolve, the kinds of the stored
// episodes are tried too, and the error lists them. That lists the store,
// which is rare enough (a custom resource's plural.group or kind.group
// form, or a bad kind) to be worth not wiring the CRD discovery of the
// resources collector here.
func (h *handler) resolveKind(s string, now time.Time) (string, error) {
	k, err := timeline.ResolveKind(s, h.custom)
	if err == nil || len(h.custom) == 0 {
		return k, err
	}
	seen := append([]string(nil), h.custom...)
	for _, e := range h.src.List(timeline.Query{}, now) {
		if strings.Contains(e.Kind, ".") && !slices.Contains(seen, e.Kind) {
			seen = append(seen, e.Kind)
		}
	}
	return timeline.ResolveKind(s, seen)
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

func (h *handler) serveStyle(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(h.css)
}
