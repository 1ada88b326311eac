package web

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// pageLimit is how many episodes each section of /timelines shows: the
// page is for a person, the API for everything else.
const pageLimit = 50

// How the page writes times: UTC, receive times with milliseconds (they
// have nanoseconds), API-side times in whole seconds (all they have).
const (
	timeLayout    = "2006-01-02 15:04:05.000Z07:00"
	apiTimeLayout = "2006-01-02 15:04:05Z07:00"
)

// pageParams are the filters of /timelines: the fields of its form, and
// uid and trace_id, the targets of exemplar links (deploy/grafana's
// datasource sends an exemplar's uid to <external-url>/timelines?uid=...).
var pageParams = []string{"namespace", "kind", "outcome", "state", "uid", "trace_id"}

var pageTemplate = template.Must(template.New("timelines.html").Funcs(template.FuncMap{
	"px":      func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"time":    func(t time.Time) string { return t.UTC().Format(timeLayout) },
	"seconds": formatSeconds,
	"join":    strings.Join,
}).ParseFS(assets, "assets/timelines.html"))

type pageData struct {
	Title   string
	Prefix  string // the external URL's path
	Now     time.Time
	Filters filters
	Error   string // a bad filter or kind, or what was not found
	// The list page's sections, or the object page's Object.
	Sections []section
	Object   *objectView
}

type filters struct {
	Namespace, Kind, Outcome, State string
	Outcomes, States, Kinds         []string
}

type section struct {
	ID, Title, Empty string
	Episodes         []episodeView
}

type objectView struct {
	Kind, Namespace, Name string
	APILink               string
	Episodes              []episodeView
}

type episodeView struct {
	timeline.Episode
	Link, APILink string
	Waterfall     waterfall
	ShowEntries   bool // on the object page
	Entries       []entryView
}

type entryView struct {
	timeline.Entry
	Offset  string // since the episode's start
	Object  string // kind namespace/name of the entry's object
	APITime string
}

func (h *handler) listPage(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	d := h.pageData("Timelines", now)
	v, perr := queryOf(r)
	var q timeline.Query
	if perr == nil {
		d.Filters.Namespace, d.Filters.Kind, d.Filters.Outcome, d.Filters.State = v.Get("namespace"), v.Get("kind"), v.Get("outcome"), v.Get("state")
		q, perr = h.parseList(v, pageParams, now)
	}
	if perr != nil {
		d.Error = perr.Error()
		h.render(w, http.StatusBadRequest, d)
		return
	}
	q.Limit, q.Sort = pageLimit, timeline.SortDuration
	if q.UID != "" || q.TraceID != "" {
		// One object's episodes (or one trace's), with their evidence, as
		// on the object's own page: an exemplar links here.
		q.Sort = timeline.SortStart
		title := "Episodes of uid " + q.UID + ", newest first"
		if q.UID == "" {
			title = "Episode of trace " + q.TraceID
		}
		d.Sections = append(d.Sections, section{
			ID: "matching", Title: title, Empty: "No retained episode matches.",
			Episodes: h.views(h.src.List(q, now), true),
		})
		h.render(w, http.StatusOK, d)
		return
	}
	if q.State == "" || q.State == timeline.StateStalled {
		stalled := q
		stalled.State = timeline.StateStalled
		d.Sections = append(d.Sections, section{
			ID: "stalled", Title: "Stalled, longest first", Empty: "No stalled episode.",
			Episodes: h.views(h.src.List(stalled, now), false),
		})
	}
	if q.State != timeline.StateStalled {
		// The slowest of the others: in progress and closed, longest first.
		var eps []timeline.Episode
		for _, state := range []string{timeline.StateInProgress, timeline.StateClosed} {
			if q.State == "" || q.State == state {
				one := q
				one.State = state
				eps = append(eps, h.src.List(one, now)...)
			}
		}
		slices.SortStableFunc(eps, func(a, b timeline.Episode) int { return cmp.Compare(b.DurationSeconds, a.DurationSeconds) })
		if len(eps) > pageLimit {
			eps = eps[:pageLimit]
		}
		d.Sections = append(d.Sections, section{
			ID: "slowest", Title: "Slowest, in progress and closed", Empty: "No episode matches.",
			Episodes: h.views(eps, false),
		})
	}
	h.render(w, http.StatusOK, d)
}

func (h *handler) objectPage(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	d := h.pageData("Timeline", now)
	kind, ns, name, aerr := h.objectPath(r, now)
	if aerr != nil {
		d.Error = aerr.Error
		h.render(w, aerr.Code, d)
		return
	}
	d.Title = fmt.Sprintf("Timeline of %s %s", kind, objectName(ns, name))
	o := &objectView{Kind: kind, Namespace: ns, Name: name, APILink: h.prefix + APIPath + objectPath(kind, ns, name)}
	eps := h.src.Object(kind, ns, name, now)
	if len(eps) == 0 {
		d.Error = fmt.Sprintf("No retained episode of %s %s.", kind, objectName(ns, name))
		h.render(w, http.StatusNotFound, d)
		return
	}
	o.Episodes = h.views(eps, true)
	d.Object = o
	h.render(w, http.StatusOK, d)
}

func (h *handler) pageData(title string, now time.Time) pageData {
	d := pageData{Title: title, Prefix: h.prefix, Now: now}
	d.Filters.Outcomes, d.Filters.States = outcomes, states
	d.Filters.Kinds = []string{"Deployment", "StatefulSet", "DaemonSet"}
	d.Filters.Kinds = append(d.Filters.Kinds, h.custom...)
	return d
}

func (h *handler) views(eps []timeline.Episode, entries bool) []episodeView {
	out := make([]episodeView, 0, len(eps))
	for _, ep := range eps {
		v := episodeView{
			Episode:     ep,
			Link:        h.prefix + PagePath + objectPath(ep.Kind, ep.Namespace, ep.Name),
			APILink:     h.prefix + APIPath + "?" + url.Values{"trace_id": {ep.TraceID}}.Encode(),
			Waterfall:   newWaterfall(ep),
			ShowEntries: entries,
		}
		if entries {
			for _, e := range ep.Entries {
				ev := entryView{Entry: e, Offset: fmt.Sprintf("%+.3f s", e.Time.Sub(ep.Start).Seconds())}
				if e.Object != nil {
					ev.Object = e.Object.Kind + " " + objectName(e.Object.Namespace, e.Object.Name)
				}
				if e.APITime != nil {
					ev.APITime = e.APITime.UTC().Format(apiTimeLayout)
				}
				v.Entries = append(v.Entries, ev)
			}
		}
		out = append(out, v)
	}
	return out
}

// objectPath is /{kind}/{namespace}/{name}, escaped.
func objectPath(kind, ns, name string) string {
	return "/" + url.PathEscape(kind) + "/" + url.PathEscape(pathNamespace(ns)) + "/" + url.PathEscape(name)
}

func (h *handler) render(w http.ResponseWriter, code int, d pageData) {
	// Rendered into a buffer first, so that a template error is a 500 and
	// not half a page.
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, d); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "rendering the timeline page: %v\n", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}
