package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

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
	v, perr := queryOf(r)
	var q timeline.Query
	if perr == nil {
		q, perr = h.parseList(v, listParams, now)
	}
	if perr != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: perr.Error(), Parameter: perr.Parameter, Accepted: perr.Accepted})
		return
	}
	writeItems(w, normalize(h.src.List(q, now)))
}

func (h *handler) object(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, apiError{Error: "the object endpoint takes no query parameters; filter with " + APIPath + "?..."})
		return
	}
	kind, ns, name, aerr := h.objectPath(r, now)
	if aerr != nil {
		writeError(w, aerr.Code, *aerr)
		return
	}
	eps := h.src.Object(kind, ns, name, now)
	if len(eps) == 0 {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no retained episode of %s %s", kind, objectName(ns, name))})
		return
	}
	writeItems(w, normalize(eps))
}

// objectPath reads {kind}/{namespace}/{name}, resolving the kind.
func (h *handler) objectPath(r *http.Request, now time.Time) (kind, ns, name string, _ *apiError) {
	kind, err := h.resolveKind(r.PathValue("kind"), now)
	if err != nil {
		e := &apiError{Code: http.StatusBadRequest, Error: err.Error(), Parameter: "kind"}
		var uk *timeline.UnknownKindError
		if errors.As(err, &uk) {
			e.Accepted = uk.Accepted
		}
		return "", "", "", e
	}
	return kind, objectNamespace(r.PathValue("namespace")), r.PathValue("name"), nil
}

// objectName is namespace/name, or name when cluster-scoped.
func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// normalize makes nil lists empty, so that clients read [] and never null.
func normalize(eps []timeline.Episode) []timeline.Episode {
	if eps == nil {
		return []timeline.Episode{}
	}
	for i := range eps {
		if eps[i].Stages == nil {
			eps[i].Stages = []timeline.StageTiming{}
		}
		if eps[i].Entries == nil {
			eps[i].Entries = []timeline.Entry{}
		}
	}
	return eps
}

func writeError(w http.ResponseWriter, code int, e apiError) {
	e.Code = code
	writeJSON(w, code, e)
}

// writeItems answers {"items": eps} (encode.go), an episode at a time
// through one 64 KiB buffer: a full answer of 100 episodes of 200 entries
// is 5 MB, which need not be held at once.
func writeItems(w http.ResponseWriter, eps []timeline.Episode) {
	setJSONHeaders(w)
	w.WriteHeader(http.StatusOK)
	n := 64
	for i := range eps {
		n += 600 + 300*len(eps[i].Entries) // about 250 bytes an entry
	}
	b := append(make([]byte, 0, min(n, 64<<10)), `{"items":[`...)
	for i := range eps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEpisode(b, &eps[i])
		if len(b) >= 32<<10 {
			if _, err := w.Write(b); err != nil {
				return // the client went away
			}
			b = b[:0]
		}
	}
	_, _ = w.Write(append(b, "]}\n"...))
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
