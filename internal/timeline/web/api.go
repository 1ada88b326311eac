package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// apiError is the body of every error of the API.
type apiError struct {
	// Code repeats the HTTP status.
	Code int `json:"code"`
	// Error says what was wrong, in one sentence.
	Error string `json:"error"`
	// Parameter is the bad query or path parameter, Accepted what it
	// accepts.
	Parameter string   `json:"parameter,omitempty"`
	Accepted  []string `json:"accepted,omitempty"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	v, perr := queryOf(r, listParams)
	var q timeline.Query
	if perr == nil {
		q, perr = h.parseList(v)
	}
	if perr != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: perr.Error(), Parameter: perr.Parameter, Accepted: perr.Accepted})
		return
	}
	writeItems(r.Context(), w, h.src.Select(q, now), "")
}

// object answers one object's episodes, newest first, a page at a time:
// a next link (and a Link header) continues while older ones are left.
func (h *handler) object(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	q, aerr := h.objectQuery(r)
	if aerr != nil {
		writeError(w, aerr.Code, *aerr)
		return
	}
	sel := h.src.Select(q, now)
	if sel.Total() == 0 && q.Before == 0 {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no retained episode of %s %s", q.Kind, objectName(q.Namespace, q.Name))})
		return
	}
	next := ""
	if c := sel.Next(); c != 0 {
		next = h.prefix + APIPath + objectPath(q.Kind, q.Namespace, q.Name) + "?" + nextQuery(q.Limit, c)
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	writeItems(r.Context(), w, sel, next)
}

// nextQuery is the query of the page after the one cut at cursor c.
func nextQuery(limit int, c uint64) string {
	return url.Values{"limit": {strconv.Itoa(limit)}, "continue": {strconv.FormatUint(c, 10)}}.Encode()
}

// objectQuery reads {kind}/{namespace}/{name}, resolving the kind, and the
// page parameters.
func (h *handler) objectQuery(r *http.Request) (timeline.Query, *apiError) {
	v, perr := queryOf(r, objectParams)
	var q timeline.Query
	if perr == nil {
		perr = parseObject(v, &q)
	}
	if perr != nil {
		return q, &apiError{Code: http.StatusBadRequest, Error: perr.Error(), Parameter: perr.Parameter, Accepted: perr.Accepted}
	}
	kind, err := h.resolveKind(r.PathValue("kind"))
	if err != nil {
		e := &apiError{Code: http.StatusBadRequest, Error: err.Error(), Parameter: "kind"}
		var uk *timeline.UnknownKindError
		if errors.As(err, &uk) {
			e.Accepted = uk.Accepted
		}
		return q, e
	}
	q.Kind, q.Namespace, q.Name = kind, objectNamespace(r.PathValue("namespace")), r.PathValue("name")
	return q, nil
}

// objectName is namespace/name, or name when cluster-scoped.
func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// normalize makes nil lists empty, so that clients read [] and never null.
func normalize(ep *timeline.Episode) {
	if ep.Stages == nil {
		ep.Stages = []timeline.StageTiming{}
	}
	if ep.Entries == nil {
		ep.Entries = []timeline.Entry{}
	}
}

func writeError(w http.ResponseWriter, code int, e apiError) {
	e.Code = code
	writeJSON(w, code, e)
}

// encoders bounds the episodes copied and encoded at once, by every answer
// of the API and the page together, to one less than the cores Go runs on
// (at least one): however many clients read timelines, a core is left for
// the scrapes and the informers' handlers (BenchmarkMetricsWithAPIClients).
// An episode is a few hundred microseconds of work, so answers interleave
// finely.
var encoders = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// withEncoder runs f, the copying (and encoding or rendering) of one
// episode, holding an encoders token. It waits for the token only as long
// as ctx, the request's, lasts: a client gone gets ctx's error and nothing
// more. The token is released however f ends: with GOMAXPROCS 2 there is
// one, and a panic that kept it would hang every later answer.
func withEncoder(ctx context.Context, f func()) error {
	select {
	case encoders <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-encoders }()
	f()
	return nil
}

// writeItems answers {"items": [...]} (encode.go), with "next" when it is
// set, copying and encoding an episode at a time from the selection's
// snapshot through one 64 KiB buffer (withEncoder): a full answer of 1000
// episodes of 200 entries is 50 MB, which is never held. It stops, the
// answer cut, once ctx is done while it waits.
func writeItems(ctx context.Context, w http.ResponseWriter, sel timeline.Selection, next string) {
	setJSONHeaders(w)
	w.WriteHeader(http.StatusOK)
	b := append(make([]byte, 0, 64<<10), `{"items":[`...)
	for i := range sel.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		err := withEncoder(ctx, func() {
			ep := sel.Episode(i)
			normalize(&ep)
			b = appendEpisode(b, &ep)
		})
		if err != nil {
			return // the client went away
		}
		if len(b) >= 32<<10 {
			if _, err := w.Write(b); err != nil {
				return // the client went away
			}
			b = b[:0]
		}
	}
	b = append(b, ']')
	if next != "" {
		b = append(b, `,"next":`...)
		b = appendString(b, next)
	}
	_, _ = w.Write(append(b, "}\n"...))
}

func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	setJSONHeaders(w)
	w.WriteHeader(code)
	// An encoding error here is a client gone away: nothing to answer.
	_ = json.NewEncoder(w).Encode(v)
}
