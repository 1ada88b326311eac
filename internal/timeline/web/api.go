package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// items is the answer of both endpoints.
type items struct {
	Items []timeline.Episode `json:"items"`
}

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
	q, perr := h.parseList(r.URL.Query(), listParams, now)
	if perr != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: perr.Error(), Parameter: perr.Parameter, Accepted: perr.Accepted})
		return
	}
	writeJSON(w, http.StatusOK, items{Items: normalize(h.src.List(q, now))})
}

func (h *handler) object(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	if len(r.URL.Query()) > 0 {
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
	writeJSON(w, http.StatusOK, items{Items: normalize(eps)})
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	// An encoding error here is a client gone away: nothing to answer.
	_ = json.NewEncoder(w).Encode(v)
}
