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
// forms to itself only) on every response (internal/serve), which also
// forbids inline styles: the page has none.
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
// of the stored episodes are tried too. That lists the whole store (a few
// ms at 1000 episodes), so only for those forms: not wiring the CRD
// discovery of the resources collector here is worth it.
func (h *handler) resolveKind(s string, now time.Time) (string, error) {
	k, err := timeline.ResolveKind(s, h.custom)
	if err == nil || !h.configuredGroup(s) {
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
