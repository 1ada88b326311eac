package web

import (
	"bytes"
	"cmp"
	"context"
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

// pageParams are the filters of /timelines: those its links set, and uid
// and trace_id, the targets of exemplar links (deploy/grafana's datasource
// sends an exemplar's uid to <external-url>/timelines?uid=...).
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
	Filters *filters // the list page's
	Error   string   // a bad filter or kind, or what was not found
	// The list page's sections, or the object page's Object.
	Sections []section
	Object   *objectView
}

// filters are the list page's filters as links: the page has no form (the
// Content-Security-Policy's form-action 'none'), every filter is a link
// that sets or clears one parameter and keeps the others; a namespace is
// picked from an episode's.
type filters struct {
	Active                  []filterLink // each set filter, its link clearing it
	States, Outcomes, Kinds []filterLink
}

type filterLink struct {
	Name, Value, Link string
	Current           bool
}

type section struct {
	ID, Title, Empty string
	Episodes         []episodeView
}

type objectView struct {
	Kind, Namespace, Name string
	APILink               string
	Episodes              []episodeView
	// Shown and Total count the episodes; Next links to the older ones.
	Shown, Total int
	Next         string
}

type episodeView struct {
	timeline.Episode
	Link, APILink string
	NamespaceLink string // the list page filtered on its namespace
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
	v, perr := queryOf(r, pageParams)
	var q timeline.Query
	if perr == nil {
		q, perr = h.parseList(v)
	}
	if perr != nil {
		d.Error, d.Filters = perr.Error(), h.filters(nil)
		h.render(w, http.StatusBadRequest, d)
		return
	}
	d.Filters = h.filters(v)
	q.Limit, q.Sort = pageLimit, timeline.SortDuration
	if q.UID != "" || q.TraceID != "" {
		// One object's episodes (or one trace's), with their evidence, as
		// on the object's own page: an exemplar links here.
		q.Sort = timeline.SortStart
		title := "Episodes of uid " + q.UID + ", newest first"
		if q.UID == "" {
			title = "Episode of trace " + q.TraceID
		}
		eps, err := h.views(r.Context(), h.src.Select(q, now), true)
		if err != nil {
			return // the client went away
		}
		d.Sections = append(d.Sections, section{
			ID: "matching", Title: title, Empty: "No retained episode matches.",
			Episodes: eps,
		})
		h.render(w, http.StatusOK, d)
		return
	}
	if q.State == "" || q.State == timeline.StateStalled {
		stalled := q
		stalled.State = timeline.StateStalled
		eps, err := h.views(r.Context(), h.src.Select(stalled, now), false)
		if err != nil {
			return // the client went away
		}
		d.Sections = append(d.Sections, section{
			ID: "stalled", Title: "Stalled, longest first", Empty: "No stalled episode.",
			Episodes: eps,
		})
	}
	if q.State != timeline.StateStalled {
		// The slowest of the others: in progress and closed, longest first.
		var eps []episodeView
		for _, state := range []string{timeline.StateInProgress, timeline.StateClosed} {
			if q.State == "" || q.State == state {
				one := q
				one.State = state
				vs, err := h.views(r.Context(), h.src.Select(one, now), false)
				if err != nil {
					return // the client went away
				}
				eps = append(eps, vs...)
			}
		}
		slices.SortStableFunc(eps, func(a, b episodeView) int { return cmp.Compare(b.DurationSeconds, a.DurationSeconds) })
		if len(eps) > pageLimit {
			eps = eps[:pageLimit]
		}
		d.Sections = append(d.Sections, section{
			ID: "slowest", Title: "Slowest, in progress and closed", Empty: "No episode matches.",
			Episodes: eps,
		})
	}
	h.render(w, http.StatusOK, d)
}

// objectPage shows one object's episodes with their entries, newest
// first, a page at a time (DefaultObjectLimit).
func (h *handler) objectPage(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	d := h.pageData("Timeline", now)
	q, aerr := h.objectQuery(r)
	if aerr != nil {
		d.Error = aerr.Error
		h.render(w, aerr.Code, d)
		return
	}
	d.Title = fmt.Sprintf("Timeline of %s %s", q.Kind, objectName(q.Namespace, q.Name))
	path := objectPath(q.Kind, q.Namespace, q.Name)
	o := &objectView{Kind: q.Kind, Namespace: q.Namespace, Name: q.Name, APILink: h.prefix + APIPath + path}
	sel := h.src.Select(q, now)
	if sel.Total() == 0 {
		d.Error = fmt.Sprintf("No retained episode of %s %s.", q.Kind, objectName(q.Namespace, q.Name))
		if q.Before != 0 {
			d.Error = fmt.Sprintf("No older retained episode of %s %s.", q.Kind, objectName(q.Namespace, q.Name))
		}
		h.render(w, http.StatusNotFound, d)
		return
	}
	eps, err := h.views(r.Context(), sel, true)
	if err != nil {
		return // the client went away
	}
	o.Episodes, o.Shown, o.Total = eps, sel.Len(), sel.Total()
	if q.Before != 0 {
		// Past the first page, Total counts the episodes from this page on
		// (Query.Before applies before it): the page says how many the
		// object has, as its first page does. Limit 1: one snapshot taken.
		all := q
		all.Before, all.Limit = 0, 1
		o.Total = h.src.Select(all, now).Total()
	}
	if c := sel.Next(); c != 0 {
		o.Next = h.prefix + PagePath + path + "?" + nextQuery(q.Limit, c)
	}
	d.Object = o
	h.render(w, http.StatusOK, d)
}

func (h *handler) pageData(title string, now time.Time) pageData {
	return pageData{Title: title, Prefix: h.prefix, Now: now}
}

// filters are the list page's filter links for the parameters v.
func (h *handler) filters(v url.Values) *filters {
	link := func(name, value string) string {
		w := url.Values{}
		for k, vs := range v {
			if k != "uid" && k != "trace_id" {
				w[k] = vs
			}
		}
		if value == "" {
			w.Del(name)
		} else {
			w.Set(name, value)
		}
		if len(w) == 0 {
			return h.prefix + PagePath
		}
		return h.prefix + PagePath + "?" + w.Encode()
	}
	choices := func(name string, values []string) []filterLink {
		out := []filterLink{{Name: name, Value: "any", Link: link(name, ""), Current: v.Get(name) == ""}}
		for _, val := range values {
			out = append(out, filterLink{Name: name, Value: val, Link: link(name, val), Current: v.Get(name) == val})
		}
		return out
	}
	f := &filters{
		States:   choices("state", states),
		Outcomes: choices("outcome", outcomes),
		Kinds:    choices("kind", slices.Concat([]string{"Deployment", "StatefulSet", "DaemonSet"}, h.src.Kinds())),
	}
	f.Kinds = slices.CompactFunc(f.Kinds, func(a, b filterLink) bool { return a.Value == b.Value })
	for _, name := range []string{"namespace", "kind", "outcome", "state"} {
		if val := v.Get(name); val != "" {
			f.Active = append(f.Active, filterLink{Name: name, Value: val, Link: link(name, "")})
		}
	}
	return f
}

// views are the selection's episodes, with their entries or not, each
// copied holding an encoders token as the API's are (withEncoder); ctx's
// error once the client is gone.
func (h *handler) views(ctx context.Context, sel timeline.Selection, entries bool) ([]episodeView, error) {
	out := make([]episodeView, 0, sel.Len())
	for i := range sel.Len() {
		if err := withEncoder(ctx, func() { out = append(out, h.view(sel, i, entries)) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// view is the i-th episode of sel, with its entries or not.
func (h *handler) view(sel timeline.Selection, i int, entries bool) episodeView {
	var ep timeline.Episode
	if entries {
		ep = sel.Episode(i)
	} else {
		ep = sel.Header(i)
	}
	v := episodeView{
		Episode:     ep,
		Link:        h.prefix + PagePath + objectPath(ep.Kind, ep.Namespace, ep.Name),
		APILink:     h.prefix + APIPath + "?" + url.Values{"trace_id": {ep.TraceID}}.Encode(),
		Waterfall:   newWaterfall(ep),
		ShowEntries: entries,
	}
	if ep.Namespace != "" {
		v.NamespaceLink = h.prefix + PagePath + "?" + url.Values{"namespace": {ep.Namespace}}.Encode()
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
	return v
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
