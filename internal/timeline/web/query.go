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

// MaxQueryBytes bounds the query string of every timeline request: the
// longest valid one (every filter at its longest) is well under 1 KiB.
const MaxQueryBytes = 4096

// Bounds of the values the parameters take: a namespace is a DNS label, a
// kind Kind.group (a DNS subdomain group), a uid a UUID (36 characters;
// room for other forms).
const (
	maxNamespace = 63
	maxKind      = 63 + 1 + 253
	maxUID       = 128
)

// queryOf parses r's query string, refusing a malformed one:
// url.URL.Query drops the pairs it cannot parse (one with a ';', a bad
// '%' escape) and keeps the others, so a filter given that way would be
// ignored and the answer hold every episode. allowed are the parameters
// accepted: unknown parameters and parameters given twice are errors (a
// misspelt filter, ?namspace=, would otherwise answer everything).
func queryOf(r *http.Request, allowed []string) (url.Values, *paramError) {
	if len(r.URL.RawQuery) > MaxQueryBytes {
		return nil, &paramError{Parameter: "query", Message: fmt.Sprintf("%d bytes long, longer than the %d accepted", len(r.URL.RawQuery), MaxQueryBytes)}
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &paramError{Parameter: "query", Message: fmt.Sprintf("malformed (%v): pairs are name=value joined by &, with %%-escapes", err)}
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "" {
			// "?=x": no name to put in the answer's parameter field,
			// which would be left out (FuzzTimelineRequest).
			return nil, &paramError{Parameter: "query", Message: "a pair without a name (=value)", Accepted: allowed}
		}
		if !slices.Contains(allowed, k) {
			return nil, &paramError{Parameter: k, Message: "unknown parameter", Accepted: allowed}
		}
		if len(v[k]) > 1 {
			return nil, &paramError{Parameter: k, Message: fmt.Sprintf("given %d times, want at most once", len(v[k]))}
		}
	}
	return v, nil
}

// parseList reads the list parameters of v (queryOf's).
func (h *handler) parseList(v url.Values) (timeline.Query, *paramError) {
	q := timeline.Query{Sort: timeline.SortDuration, Limit: DefaultLimit}
	for _, b := range []struct {
		name string
		max  int
	}{{"namespace", maxNamespace}, {"kind", maxKind}, {"uid", maxUID}} {
		if s := v.Get(b.name); len(s) > b.max {
			return q, &paramError{Parameter: b.name, Message: fmt.Sprintf("%d bytes long, longer than any %s (%d)", len(s), b.name, b.max)}
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
		k, err := h.resolveKind(s)
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
	if n, err := limitOf(v, DefaultLimit, MaxLimit); err != nil {
		return q, err
	} else if n > 0 {
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

// limitOf reads the limit parameter: def when absent, an integer from 1
// to most.
func limitOf(v url.Values, def, most int) (int, *paramError) {
	s := v.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, &paramError{Parameter: "limit", Message: fmt.Sprintf("%q is not an integer from 1 to %d", cut(s), most), Accepted: []string{fmt.Sprintf("1-%d (default %d)", most, def)}}
	}
	return n, nil
}

// Pages of one object's episodes (the object endpoint and page).
const (
	DefaultObjectLimit = 20
	MaxObjectLimit     = 100
)

// objectParams are the parameters of one object's endpoint and page.
var objectParams = []string{"limit", "continue"}

// parseObject reads the object parameters of v (queryOf's) into q.
func parseObject(v url.Values, q *timeline.Query) *paramError {
	n, perr := limitOf(v, DefaultObjectLimit, MaxObjectLimit)
	if perr != nil {
		return perr
	}
	q.Limit = n
	if s := v.Get("continue"); s != "" {
		c, err := strconv.ParseUint(s, 10, 64)
		if err != nil || c == 0 {
			return &paramError{Parameter: "continue", Message: fmt.Sprintf("%q is not a continue token", cut(s)), Accepted: []string{"the continue value of the previous page's next link"}}
		}
		q.Before = c
	}
	return nil
}

// cut shortens a value quoted back in an error.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
