package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// List limits of /api/v1/timelines.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// The values the list's parameters accept.
var (
	states   = []string{timeline.StateInProgress, timeline.StateStalled, timeline.StateClosed}
	sorts    = []string{timeline.SortDuration, timeline.SortStart}
	outcomes = []string{
		string(tracker.OutcomeConverged), string(tracker.OutcomeSuperseded), string(tracker.OutcomeDeleted),
		string(tracker.OutcomePaused), string(tracker.OutcomeManual),
	}
	traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// listParams are the parameters of the list endpoint, in the order the
// errors name them.
var listParams = []string{"namespace", "kind", "outcome", "state", "sort", "limit", "uid", "trace_id"}

// paramError is a bad query parameter: its name, what was wrong and what
// it accepts.
type paramError struct {
	Parameter string
	Message   string
	Accepted  []string
}

func (e *paramError) Error() string {
	if len(e.Accepted) == 0 {
		return fmt.Sprintf("parameter %s: %s", e.Parameter, e.Message)
	}
	return fmt.Sprintf("parameter %s: %s; accepted: %s", e.Parameter, e.Message, strings.Join(e.Accepted, ", "))
}

// parseList reads the list parameters. Unknown parameters and parameters
// given twice are errors: a misspelt filter (?namspace=) would otherwise
// silently answer everything. allowed are the parameters accepted (the
// page takes fewer than the API).
// queryOf parses r's query string, refusing a malformed one:
// url.URL.Query drops the pairs it cannot parse (one with a ';', a bad
// '%' escape) and keeps the others, so a filter given that way would be
// ignored and the answer hold every episode.
func queryOf(r *http.Request) (url.Values, *paramError) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &paramError{Parameter: "query", Message: fmt.Sprintf("malformed (%v): pairs are name=value joined by &, with %%-escapes", err)}
	}
	return v, nil
}

func (h *handler) parseList(v url.Values, allowed []string, now time.Time) (timeline.Query, *paramError) {
	q := timeline.Query{Sort: timeline.SortDuration, Limit: DefaultLimit}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return q, &paramError{Parameter: k, Message: "unknown parameter", Accepted: allowed}
		}
		if len(v[k]) > 1 {
			return q, &paramError{Parameter: k, Message: fmt.Sprintf("given %d times, want at most once", len(v[k]))}
		}
	}
	oneOf := func(name string, accepted []string, dst *string) *paramError {
		s := v.Get(name)
		if s == "" {
			return nil
		}
		if !slices.Contains(accepted, s) {
			return &paramError{Parameter: name, Message: fmt.Sprintf("unknown value %q", s), Accepted: accepted}
		}
		*dst = s
		return nil
	}
	q.Namespace = v.Get("namespace")
	if s := v.Get("kind"); s != "" {
		k, err := h.resolveKind(s, now)
		if err != nil {
			var uk *timeline.UnknownKindError
			if errors.As(err, &uk) {
				return q, &paramError{Parameter: "kind", Message: fmt.Sprintf("unknown kind %q", s), Accepted: uk.Accepted}
			}
			return q, &paramError{Parameter: "kind", Message: err.Error()}
		}
		q.Kind = k
	}
	if err := oneOf("outcome", outcomes, &q.Outcome); err != nil {
		return q, err
	}
	if err := oneOf("state", states, &q.State); err != nil {
		return q, err
	}
	if err := oneOf("sort", sorts, &q.Sort); err != nil {
		return q, err
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return q, &paramError{Parameter: "limit", Message: fmt.Sprintf("%q is not an integer from 1 to %d", s, MaxLimit), Accepted: []string{fmt.Sprintf("1-%d (default %d)", MaxLimit, DefaultLimit)}}
		}
		q.Limit = n
	}
	q.UID = v.Get("uid")
	if s := strings.ToLower(v.Get("trace_id")); s != "" {
		if !traceIDPattern.MatchString(s) {
			return q, &paramError{Parameter: "trace_id", Message: fmt.Sprintf("%q is not a trace id", s), Accepted: []string{"32 lower-case hex digits"}}
		}
		q.TraceID = s
	}
	return q, nil
}
