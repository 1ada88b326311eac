// Package timeline keeps the evidence of recent rollout and custom-resource
// episodes: per episode, the write that opened it, the objects its
// controller created, scheduling, node and readiness changes, endpoint
// presence, Warning Events, the stages reached and what blocks it now. It is
// pure (no client-go, no Prometheus, every call takes its time) and bounded:
// the open episodes and the last Config.Retained closed ones, each with at
// most Config.MaxEntries entries.
//
// The JSON of Episode is the public API of /api/v1/timelines, read by the
// page, by `kube-convergence-exporter explain` and by users' scripts: add
// fields, never rename or remove them.
package timeline

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
)

// Episode states.
const (
	StateInProgress = "in_progress" // open, younger than its stall threshold
	StateStalled    = "stalled"     // open, past its stall threshold (or given up by its controller)
	StateClosed     = "closed"      // ended: Outcome says how
)

// EntryType says what an Entry records.
type EntryType string

// Entry types. Entries are recorded on change only: a pod's readiness
// entry when it turns Ready or not Ready, not at every status write.
const (
	// EntryWrite: a write of the object that moved its generation (the one
	// that opened the episode, and later ones that re-targeted it such as
	// an HPA's /scale write). Generation, Managers, APITime (the newest
	// managedFields time, 1 s precision); without Managers nor APITime
	// when the write left no stamp of its own (Message WriterUnknown).
	EntryWrite EntryType = "write"
	// EntryObject: a derived object appeared or went away (Object; Reason
	// "created" or "deleted"): a ReplicaSet, a Pod.
	EntryObject EntryType = "object"
	// EntryScheduled: a pod was bound (Node) or is unschedulable (Reason
	// "Unschedulable", Message the scheduler's message).
	EntryScheduled EntryType = "scheduled"
	// EntryNode: a node running a pod of the episode changed readiness
	// (Node, Reason: the Ready condition's reason, Message).
	EntryNode EntryType = "node"
	// EntryReady: a pod turned Ready or not Ready (Object, Reason "ready"
	// or the not-ready reason, Message).
	EntryReady EntryType = "ready"
	// EntryEndpoint: a pod became or stopped being a ready endpoint of a
	// Service selecting it (Object, Reason "ready" or "not_ready" or
	// "removed", Message the Service).
	EntryEndpoint EntryType = "endpoint"
	// EntryEvent: a Warning Event about the object or one of its derived
	// objects (Object the regarding object, Reason, Message the note,
	// Controller the reporting controller, Count the occurrences so far).
	EntryEvent EntryType = "event"
	// EntryCondition: a custom resource's readiness condition changed
	// (Reason: the condition type and status, Message its message).
	EntryCondition EntryType = "condition"
	// EntryStage: a stage was reached (Stage), from the tracker.
	EntryStage EntryType = "stage"
	// EntryBlocking: what holds the episode changed (Stage, Reason: the
	// stall reasons of the rollout tracker), at any age.
	EntryBlocking EntryType = "blocking"
	// EntryStalled: the episode passed its stall threshold (Stage, Reason).
	EntryStalled EntryType = "stalled"
	// EntryClosed: the episode ended (Reason: the outcome).
	EntryClosed EntryType = "closed"
)

// Write is what the informers tell of an object's write: the generation
// it left, and the field managers and API-side time of the newest
// managedFields stamp (one-second precision; informers.WriteOf).
type Write struct {
	Generation int64
	Managers   []string
	At         time.Time
	// MaybeScale: the change from the previous version could be a write
	// through /scale (only the replica count moved, or the feeder cannot
	// tell).
	MaybeScale bool
}

// WriterUnknown is the Message of an EntryWrite whose writer the object
// does not name (WriteEntry).
const WriterUnknown = "writer unknown: the write moved the generation but left no managedFields time (a write through /scale leaves none)"

// WriteEntry is the EntryWrite of cur, received at now; prev is the
// version the informer delivered before it (nil: none, an add or a list).
// When cur moved the generation but its newest managedFields stamp is
// still prev's, and the change could be a write through /scale (an HPA's,
// kubectl scale), the stamp is an earlier write's: /scale stamps no time
// (seen on v1.37), and naming the previous writer would blame the wrong
// controller for the rollout. The managers and API time are then left out
// and Message says why. Any other change with the stamp unmoved is a
// second write by the stamp's managers within its second: named.
func WriteEntry(prev *Write, cur Write, now time.Time) Entry {
	e := Entry{Time: now, Type: EntryWrite, Generation: cur.Generation}
	if prev != nil && cur.MaybeScale && prev.Generation < cur.Generation && prev.At.Equal(cur.At) && slices.Equal(prev.Managers, cur.Managers) {
		e.Message = WriterUnknown
		return e
	}
	e.Managers = cur.Managers
	if !cur.At.IsZero() {
		at := cur.At
		e.APITime = &at
	}
	return e
}

// ObjectRef names an object an entry is about.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Entry is one piece of evidence. Time is when the exporter received it;
// APITime the API-side time when the object carries one (an Event's
// eventTime, a condition's lastTransitionTime, a creationTimestamp): the
// two clocks differ by the watch delay and any clock skew. The store gives
// both back in UTC.
type Entry struct {
	Time       time.Time  `json:"time"`
	APITime    *time.Time `json:"apiTime,omitempty"`
	Type       EntryType  `json:"type"`
	Object     *ObjectRef `json:"object,omitempty"`
	Generation int64      `json:"generation,omitempty"`
	Managers   []string   `json:"managers,omitempty"`
	Stage      string     `json:"stage,omitempty"`
	Node       string     `json:"node,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	Controller string     `json:"controller,omitempty"`
	Count      int64      `json:"count,omitempty"`
}

// StageTiming is one stage of an episode.
type StageTiming struct {
	Stage string `json:"stage"`
	// Reached: the stage was reached at At, DurationSeconds after the
	// episode's start (the value observed in the duration histogram, and
	// its exemplar's). A recovered episode's stages reached before the
	// exporter saw it are reached with no time.
	Reached         bool       `json:"reached"`
	At              *time.Time `json:"at,omitempty"`
	DurationSeconds *float64   `json:"durationSeconds,omitempty"`
}

// Episode is one rollout of one object generation, as served by the API.
type Episode struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the generation of the write that opened the episode;
	// Target the newest it is judged against (an HPA's write re-targets).
	Generation int64  `json:"generation"`
	Target     int64  `json:"target"`
	Change     string `json:"change"`
	State      string `json:"state"`
	// Outcome is empty while the episode is open (the field is always
	// present, as Stage and Reason: scripts read them without a check).
	Outcome string `json:"outcome"`
	// Start is the exporter's receive time of the write (the API-side time
	// for a recovered episode); APIStart the API-side time.
	Start    time.Time  `json:"start"`
	APIStart time.Time  `json:"apiStart"`
	End      *time.Time `json:"end,omitempty"`
	// DurationSeconds runs to End, or to the time of the answer while open.
	DurationSeconds float64 `json:"durationSeconds"`
	// Stage and Reason say what holds an open episode: the next stage not
	// reached and the most specific reason; empty once closed.
	Stage     string `json:"stage"`
	Reason    string `json:"reason"`
	Recovered bool   `json:"recovered"`
	// TraceID is the episode's trace id (TraceID), set whatever the
	// tracing configuration, so that ?trace_id= always resolves.
	TraceID        string        `json:"traceId"`
	Stages         []StageTiming `json:"stages"`
	Entries        []Entry       `json:"entries"`
	EntriesDropped int           `json:"entriesDropped"`
}

// TraceID is the OpenTelemetry trace id of the episode of uid opened by
// generation, as 32 lowercase hex digits: the first 16 bytes of
// SHA-256("uid/generation"). Derived, not random, so that an exporter that
// restarts mid-rollout and recovers the episode keeps its trace.
func TraceID(uid string, generation int64) string {
	sum := sha256.Sum256([]byte(uid + "/" + strconv.FormatInt(generation, 10)))
	return hex.EncodeToString(sum[:16])
}

// Sort orders of Query.
const (
	SortDuration = "duration" // longest first (open episodes count their age)
	SortStart    = "start"    // newest start first
)

// Query selects episodes for the list API. Empty fields match everything.
// Kind is canonical (the tracker's kind: "Deployment",
// "Certificate.cert-manager.io"): the API resolves the accepted spellings
// first. UID or TraceID select the episodes of one object or one trace.
type Query struct {
	Namespace, Kind, Outcome, State string
	UID, TraceID                    string
	// Name, with Kind and Namespace, selects one object's episodes; unless
	// Sort is set they come in the order they opened, newest first.
	Name  string
	Sort  string // SortDuration (default) or SortStart
	Limit int    // at most this many; 0: no limit
	// Before selects the episodes opened before the one Selection.Next
	// named: the next page of a one object's episodes.
	Before uint64
}

// Source is what the API, the page and the tracer read: the store.
type Source interface {
	// Select returns the episodes matching q, open and retained closed
	// ones, as of now, without copying their entries yet.
	Select(q Query, now time.Time) Selection
	// Kinds returns the kinds of the retained episodes, sorted.
	Kinds() []string
}

// Selection is the answer of Source.Select: a snapshot of the episodes
// selected, whose entries are copied one episode at a time as they are
// read (an answer is encoded an episode at a time, never held whole).
type Selection interface {
	// Len is how many episodes were selected (at most Query.Limit).
	Len() int
	// Total is how many matched before Query.Limit cut them; Query.Before
	// applies first, so a later page's counts those from it on.
	Total() int
	// Episode returns the i-th episode with its entries, a copy.
	Episode(i int) Episode
	// Header returns the i-th episode without its entries (Entries
	// empty, EntriesDropped as Episode's).
	Header(i int) Episode
	// Next is the Query.Before of the next page, 0 when Limit cut none.
	Next() uint64
}

// All returns every episode of sel, with its entries.
func All(sel Selection) []Episode {
	out := make([]Episode, sel.Len())
	for i := range out {
		out[i] = sel.Episode(i)
	}
	return out
}

// Literal is a Selection of episodes already copied (a source that is not
// the store: the API read back over HTTP, tests).
func Literal(eps []Episode) Selection { return literal(eps) }

type literal []Episode

func (l literal) Len() int              { return len(l) }
func (l literal) Total() int            { return len(l) }
func (l literal) Episode(i int) Episode { return l[i] }
func (l literal) Next() uint64          { return 0 }

func (l literal) Header(i int) Episode {
	ep := l[i]
	ep.Entries = []Entry{}
	return ep
}
