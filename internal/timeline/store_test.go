package timeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// t0 is the fixed clock of these tests: every time is t0 plus a literal.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

func deploy(uid string, gen int64, start time.Duration) tracker.Episode {
	return tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: "shop", Name: "web-" + uid,
		Generation: gen, Target: gen, Change: tracker.ChangeTemplate, Start: at(start), APIStart: at(start).Truncate(time.Second)}
}

func opened(ep tracker.Episode) tracker.Event {
	return tracker.Event{Type: tracker.EpisodeOpened, Episode: ep, At: ep.Start}
}

func reachedAfter(ep tracker.Episode, st tracker.Stage, d time.Duration) tracker.Event {
	return tracker.Event{Type: tracker.StageReached, Episode: ep, Stage: st, Duration: d, At: ep.Start.Add(d)}
}

func closedAt(ep tracker.Episode, out tracker.Outcome, d time.Duration) tracker.Event {
	return tracker.Event{Type: tracker.EpisodeClosed, Episode: ep, Outcome: out, At: at(d)}
}

func types(es []Entry) []EntryType {
	out := make([]EntryType, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

func uids(eps []Episode) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = fmt.Sprintf("%s/%d", e.UID, e.Generation)
	}
	return out
}

// One Deployment rollout from its write to convergence, read back as the
// API serves it.
func TestStoreEpisodeFromWriteToClose(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 2, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	if !s.Add("u1", Entry{Time: at(0), APITime: ptr(t0), Type: EntryWrite, Generation: 2, Managers: []string{"kubectl-client-side-apply"}}) {
		t.Fatal("Add found no open episode")
	}
	s.Block("u1", "observed", "not_observed", at(0))
	s.ObserveEpisodes([]tracker.Event{reachedAfter(ep, tracker.StageObserved, 250*time.Millisecond)})
	s.Block("u1", "updated", "other", at(250*time.Millisecond))
	s.Add("u1", Entry{Time: at(300 * time.Millisecond), Type: EntryObject, Object: &ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-u1-7d9", UID: "rs1"}, Reason: "created"})

	got := s.List(Query{}, at(2*time.Second))
	if len(got) != 1 {
		t.Fatalf("List = %d episodes, want 1", len(got))
	}
	e := got[0]
	if e.State != StateInProgress || e.Outcome != "" || e.End != nil || e.DurationSeconds != 2 || e.Stage != "updated" || e.Reason != "other" {
		t.Errorf("open episode = state %q outcome %q end %v duration %v stage %q reason %q, want in_progress, open, 2 s, held at updated/other",
			e.State, e.Outcome, e.End, e.DurationSeconds, e.Stage, e.Reason)
	}
	if e.TraceID != TraceID("u1", 2) || e.Kind != "Deployment" || e.Namespace != "shop" || e.Name != "web-u1" || e.Change != "template" {
		t.Errorf("identity = %+v", e)
	}

	s.ObserveEpisodes([]tracker.Event{
		reachedAfter(ep, tracker.StageUpdated, 1500*time.Millisecond),
		reachedAfter(ep, tracker.StageAvailable, 3*time.Second),
		reachedAfter(ep, tracker.StageEndpointsReady, 3250*time.Millisecond),
		closedAt(ep, tracker.OutcomeConverged, 3250*time.Millisecond),
	})
	// Closed: no more entries, and nothing holds it.
	if s.Add("u1", Entry{Time: at(4 * time.Second), Type: EntryReady}) {
		t.Error("Add to a closed episode was accepted")
	}
	s.Block("u1", "available", "other", at(4*time.Second))

	e = s.List(Query{}, at(time.Hour))[0]
	want := Episode{
		Kind: "Deployment", Namespace: "shop", Name: "web-u1", UID: "u1", Generation: 2, Target: 2, Change: "template",
		State: StateClosed, Outcome: "converged", Start: t0, APIStart: t0, End: ptr(at(3250 * time.Millisecond)),
		DurationSeconds: 3.25, TraceID: TraceID("u1", 2),
		Stages: []StageTiming{
			{Stage: "observed", Reached: true, At: ptr(at(250 * time.Millisecond)), DurationSeconds: ptr(0.25)},
			{Stage: "updated", Reached: true, At: ptr(at(1500 * time.Millisecond)), DurationSeconds: ptr(1.5)},
			{Stage: "available", Reached: true, At: ptr(at(3 * time.Second)), DurationSeconds: ptr(3.0)},
			{Stage: "endpoints_ready", Reached: true, At: ptr(at(3250 * time.Millisecond)), DurationSeconds: ptr(3.25)},
		},
		Entries: []Entry{
			{Time: t0, APITime: ptr(t0), Type: EntryWrite, Generation: 2, Managers: []string{"kubectl-client-side-apply"}},
			{Time: t0, Type: EntryBlocking, Stage: "observed", Reason: "not_observed"},
			{Time: at(250 * time.Millisecond), Type: EntryStage, Stage: "observed"},
			{Time: at(250 * time.Millisecond), Type: EntryBlocking, Stage: "updated", Reason: "other"},
			{Time: at(300 * time.Millisecond), Type: EntryObject, Object: &ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-u1-7d9", UID: "rs1"}, Reason: "created"},
			{Time: at(1500 * time.Millisecond), Type: EntryStage, Stage: "updated"},
			{Time: at(3 * time.Second), Type: EntryStage, Stage: "available"},
			{Time: at(3250 * time.Millisecond), Type: EntryStage, Stage: "endpoints_ready"},
			{Time: at(3250 * time.Millisecond), Type: EntryClosed, Reason: "converged"},
		},
	}
	if !reflect.DeepEqual(e, want) {
		g, _ := json.MarshalIndent(e, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("closed episode:\n%s\nwant:\n%s", g, w)
	}
}

// A stage's duration is the event's Duration as given, to the nanosecond:
// the value the histogram observed (and its exemplar), not At - Start.
func TestStoreStageDurationIsTheObservedValue(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	ev := reachedAfter(ep, tracker.StageObserved, 123456789*time.Nanosecond)
	ev.At = at(time.Second) // clamped by a crossing: later than Start + Duration
	s.ObserveEpisodes([]tracker.Event{ev})
	st := s.List(Query{}, at(time.Second))[0].Stages[0]
	if *st.DurationSeconds != 0.123456789 || !st.At.Equal(at(time.Second)) {
		t.Errorf("observed = %v at %v, want 0.123456789 at +1s", *st.DurationSeconds, *st.At)
	}
	// The stage entry carries the API-side time of the status write.
	ev2 := reachedAfter(ep, tracker.StageUpdated, 2*time.Second)
	ev2.APITime = t0.Add(2 * time.Second)
	s.ObserveEpisodes([]tracker.Event{ev2})
	es := s.List(Query{}, at(3*time.Second))[0].Entries
	last := es[len(es)-1]
	if last.Type != EntryStage || last.APITime == nil || !last.APITime.Equal(t0.Add(2*time.Second)) {
		t.Errorf("stage entry %+v, want apiTime t0+2s", last)
	}
	if prev := es[len(es)-2]; prev.Type != EntryStage || prev.APITime != nil {
		t.Errorf("stage entry without an API time %+v, want no apiTime", prev)
	}
}

// A recovered episode's stages passed before the exporter saw it are
// reached with no time; stalled is a state of its own until it closes.
func TestStoreRecoveredAndStalled(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 3, -10*time.Minute)
	ep.Recovered = true
	s.ObserveEpisodes([]tracker.Event{opened(ep), {Type: tracker.EpisodeRecovered, Episode: ep, At: t0}})
	s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeStalled, Episode: ep, Stage: tracker.StageAvailable, Reason: tracker.ReasonReplicaFailure, At: at(time.Second)}})
	e := s.List(Query{State: StateStalled}, at(20*time.Second))
	if len(e) != 1 || !e[0].Recovered || e[0].Stage != "available" || e[0].Reason != "replica_failure" || e[0].DurationSeconds != 620 {
		t.Fatalf("stalled = %+v, want the recovered episode held at available/replica_failure, 620 s old", e)
	}
	if n := len(s.List(Query{State: StateInProgress}, at(20*time.Second))); n != 0 {
		t.Errorf("in_progress lists %d episodes, want 0", n)
	}
	s.ObserveEpisodes([]tracker.Event{reachedAfter(ep, tracker.StageEndpointsReady, 11*time.Minute)})
	got := s.List(Query{}, at(time.Hour))[0].Stages
	want := []StageTiming{
		{Stage: "observed", Reached: true}, {Stage: "updated", Reached: true}, {Stage: "available", Reached: true},
		{Stage: "endpoints_ready", Reached: true, At: ptr(at(time.Minute)), DurationSeconds: ptr(660.0)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stages = %+v, want %+v", got, want)
	}
	if es := s.List(Query{}, at(time.Hour))[0].Entries; !reflect.DeepEqual(types(es), []EntryType{EntryStalled, EntryStage}) {
		t.Errorf("entries = %v", types(es))
	}
}

// Every Query field, on a literal population.
func TestStoreListQuery(t *testing.T) {
	s := NewStore(Config{})
	a := deploy("a", 1, 0)             // closed converged, 5 s
	b := deploy("b", 1, time.Second)   // stalled, open
	c := deploy("c", 4, 2*time.Second) // open, in progress
	d := tracker.Episode{Kind: "Certificate.cert-manager.io", UID: "d", Namespace: "certs", Name: "tls",
		Generation: 1, Target: 1, Change: tracker.ChangeCreate, Start: at(3 * time.Second)} // closed deleted, 1 s
	s.ObserveEpisodes([]tracker.Event{opened(a), opened(b), opened(c), opened(d),
		closedAt(a, tracker.OutcomeConverged, 5*time.Second),
		{Type: tracker.EpisodeStalled, Episode: b, Stage: tracker.StageUpdated, Reason: "replica_failure", At: at(4 * time.Second)},
		closedAt(d, tracker.OutcomeDeleted, 4*time.Second),
	})
	now := at(10 * time.Second) // b is 9 s old, c 8 s
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{}, []string{"b/1", "c/4", "a/1", "d/1"}},                   // longest first
		{Query{Sort: SortDuration}, []string{"b/1", "c/4", "a/1", "d/1"}}, // the default, spelled
		{Query{Sort: SortStart}, []string{"d/1", "c/4", "b/1", "a/1"}},    // newest first
		{Query{Limit: 2}, []string{"b/1", "c/4"}},
		{Query{Namespace: "certs"}, []string{"d/1"}},
		{Query{Kind: "Deployment", Sort: SortStart}, []string{"c/4", "b/1", "a/1"}},
		{Query{Kind: "deployment"}, nil}, // canonical only: the API resolves spellings
		{Query{Outcome: "converged"}, []string{"a/1"}},
		{Query{State: StateClosed}, []string{"a/1", "d/1"}},
		{Query{State: StateStalled}, []string{"b/1"}},
		{Query{State: StateInProgress}, []string{"c/4"}},
		{Query{UID: "c"}, []string{"c/4"}},
		{Query{UID: "c", State: StateClosed}, nil},
		{Query{TraceID: TraceID("d", 1)}, []string{"d/1"}},
		{Query{TraceID: TraceID("d", 2)}, nil},
		{Query{UID: "nope"}, nil},
	} {
		if got := uids(s.List(tc.q, now)); !reflect.DeepEqual(got, append([]string{}, tc.want...)) {
			t.Errorf("List(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// Object returns every retained generation of one object, newest first,
// including those of an earlier object of the same name.
func TestStoreObjectAllGenerations(t *testing.T) {
	s := NewStore(Config{})
	g1, g2, g3 := deploy("u1", 1, 0), deploy("u1", 2, time.Second), deploy("u1", 3, 2*time.Second)
	s.ObserveEpisodes([]tracker.Event{opened(g1), closedAt(g1, tracker.OutcomeConverged, 500*time.Millisecond),
		opened(g2), closedAt(g2, tracker.OutcomeSuperseded, 2*time.Second), opened(g3)})
	got := s.Object("Deployment", "shop", "web-u1", at(3*time.Second))
	if ids := uids(got); !reflect.DeepEqual(ids, []string{"u1/3", "u1/2", "u1/1"}) {
		t.Fatalf("Object = %v, want u1/3 u1/2 u1/1", ids)
	}
	if got[0].State != StateInProgress || got[1].Outcome != "superseded" || got[2].Outcome != "converged" {
		t.Errorf("states = %s %s %s", got[0].State, got[1].Outcome, got[2].Outcome)
	}
	if n := len(s.Object("Deployment", "shop", "other", at(0))); n != 0 {
		t.Errorf("unknown object: %d episodes", n)
	}
	if ids := uids(s.List(Query{UID: "u1"}, at(3*time.Second))); !reflect.DeepEqual(ids, []string{"u1/3", "u1/2", "u1/1"}) {
		t.Errorf("?uid= = %v (sorted by duration: 1 s open, 1 s, 0.5 s)", ids)
	}
}

// A full store evicts the oldest closed episode, never an open one, and
// forgets it in every index.
func TestStoreEvictsOldestClosedFirst(t *testing.T) {
	s := NewStore(Config{Retained: 2})
	var evs []tracker.Event
	for i := range 5 {
		ep := deploy(fmt.Sprintf("c%d", i), 1, time.Duration(i)*time.Second)
		evs = append(evs, opened(ep), closedAt(ep, tracker.OutcomeConverged, time.Duration(i)*time.Second+time.Millisecond))
	}
	for i := range 3 {
		evs = append(evs, opened(deploy(fmt.Sprintf("o%d", i), 1, 0)))
	}
	s.ObserveEpisodes(evs)
	if got := uids(s.List(Query{Sort: SortStart}, at(10*time.Second))); !reflect.DeepEqual(got, []string{"c4/1", "c3/1", "o2/1", "o1/1", "o0/1"}) {
		t.Errorf("retained = %v, want the last 2 closed and the 3 open", got)
	}
	if d, e := s.Stats(); d != 0 || e != 3 {
		t.Errorf("Stats = %d dropped, %d evicted, want 0, 3", d, e)
	}
	if len(s.List(Query{UID: "c0"}, t0)) != 0 || len(s.List(Query{TraceID: TraceID("c1", 1)}, t0)) != 0 || len(s.Object("Deployment", "shop", "web-c2", t0)) != 0 {
		t.Error("an evicted episode is still found by uid, trace id or name")
	}
	if len(s.byUID) != 5 || len(s.byTrace) != 5 || len(s.byName) != 5 {
		t.Errorf("indexes hold %d uids, %d trace ids, %d names, want 5 each", len(s.byUID), len(s.byTrace), len(s.byName))
	}
}

// MaxEntries keeps the first half (the write) and the last half (the
// close), drops the middle, counted per episode and in Stats.
func TestStoreEntryBounds(t *testing.T) {
	s := NewStore(Config{MaxEntries: 5}) // 3 first, 2 last
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	s.Add("u1", Entry{Time: t0, Type: EntryWrite, Generation: 1})
	for i := 1; i <= 10; i++ {
		s.Add("u1", Entry{Time: at(time.Duration(i) * time.Second), Type: EntryReady, Message: fmt.Sprint(i)})
	}
	s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeDeleted, 11*time.Second)})
	e := s.List(Query{}, at(time.Minute))[0]
	var got []string
	for _, en := range e.Entries {
		got = append(got, string(en.Type)+en.Message)
	}
	if want := []string{"write", "ready1", "ready2", "ready10", "closed"}; !reflect.DeepEqual(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
	if e.EntriesDropped != 7 {
		t.Errorf("EntriesDropped = %d, want 7 (12 entries, 5 kept)", e.EntriesDropped)
	}
	if d, _ := s.Stats(); d != 7 {
		t.Errorf("Stats dropped = %d, want 7", d)
	}
}

// Evidence about derived objects reaches the episode through the
// relations Add and Relate record, only while it is open.
func TestStoreAddRelated(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("w", 2, 0)
	if s.AddRelated("w", Entry{Time: t0, Type: EntryEvent}) {
		t.Error("AddRelated found an episode before it opened")
	}
	s.Relate("rs-old", "w") // no episode yet: ignored
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	s.Relate("rs-old", "w")
	s.Add("w", Entry{Time: at(time.Second), Type: EntryObject, Object: &ObjectRef{Kind: "Pod", Namespace: "shop", Name: "web-1", UID: "pod-1"}, Reason: "created"})
	for _, uid := range []string{"w", "rs-old", "pod-1"} {
		if !s.AddRelated(uid, Entry{Time: at(2 * time.Second), Type: EntryEvent, Reason: "FailedCreate", Message: uid, Count: 3}) {
			t.Errorf("AddRelated(%s) found no episode", uid)
		}
	}
	if s.AddRelated("pod-unknown", Entry{Time: at(2 * time.Second), Type: EntryEvent}) {
		t.Error("AddRelated of an unrelated uid was accepted")
	}
	var msgs []string
	for _, e := range s.List(Query{}, at(3*time.Second))[0].Entries {
		if e.Type == EntryEvent {
			msgs = append(msgs, e.Message)
		}
	}
	if !reflect.DeepEqual(msgs, []string{"w", "rs-old", "pod-1"}) {
		t.Errorf("events = %v", msgs)
	}
	s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeConverged, 5*time.Second)})
	if s.AddRelated("pod-1", Entry{Time: at(6 * time.Second), Type: EntryEvent}) {
		t.Error("AddRelated reached a closed episode")
	}
	if len(s.related) != 0 || len(s.relatedOf) != 0 {
		t.Errorf("relations kept after close: %v %v", s.related, s.relatedOf)
	}
}

// Block records what holds the episode when it changes, not every call.
func TestStoreBlockRecordsChangesOnly(t *testing.T) {
	s := NewStore(Config{})
	s.ObserveEpisodes([]tracker.Event{opened(deploy("u1", 1, 0))})
	s.Block("u1", "updated", "other", at(1*time.Second))
	s.Block("u1", "updated", "other", at(2*time.Second))
	s.Block("u1", "updated", "replica_failure", at(3*time.Second))
	s.Block("u1", "updated", "replica_failure", at(4*time.Second))
	var got []string
	for _, e := range s.List(Query{}, at(5*time.Second))[0].Entries {
		got = append(got, fmt.Sprintf("%s %s/%s @%v", e.Type, e.Stage, e.Reason, e.Time.Sub(t0)))
	}
	if want := []string{"blocking updated/other @1s", "blocking updated/replica_failure @3s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
}

// An open episode no Block reached yet is held at its next stage not reached.
func TestStoreOpenEpisodeStageDefaultsToNextNotReached(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep), reachedAfter(ep, tracker.StageObserved, time.Second)})
	if e := s.List(Query{}, at(2*time.Second))[0]; e.Stage != "updated" || e.Reason != "" {
		t.Errorf("stage/reason = %q/%q, want updated/\"\"", e.Stage, e.Reason)
	}
}

// A second EpisodeOpened for an object with an open episode (its feeder
// lost its tracker) supersedes the first instead of leaking it.
func TestStoreReopenSupersedes(t *testing.T) {
	s := NewStore(Config{})
	s.ObserveEpisodes([]tracker.Event{opened(deploy("u1", 1, 0)), opened(deploy("u1", 2, time.Second))})
	got := s.Object("Deployment", "shop", "web-u1", at(2*time.Second))
	if len(got) != 2 || got[0].State != StateInProgress || got[1].Outcome != "superseded" || !got[1].End.Equal(at(time.Second)) {
		t.Errorf("Object = %+v", got)
	}
}

// What a reader gets is a copy of the episode, its stages and its entry
// list: changing them changes nothing stored. (What entries point to is
// shared, immutable on both sides.)
func TestStoreReadsAreCopies(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep), reachedAfter(ep, tracker.StageObserved, time.Second)})
	s.Add("u1", Entry{Time: t0, Type: EntryWrite, Generation: 1, Managers: []string{"m"}})
	e := s.List(Query{}, at(time.Second))[0]
	*e.Stages[0].DurationSeconds = 99
	e.Stages[1].Reached = true
	e.Entries[0].Reason = "x"
	e.Entries[1] = Entry{}
	e.Reason = "x"
	again := s.List(Query{}, at(time.Second))[0]
	if *again.Stages[0].DurationSeconds != 1 || again.Stages[1].Reached || again.Entries[0].Reason != "" || again.Entries[1].Type != EntryStage || again.Reason != "" {
		t.Errorf("a reader's change leaked into the store: %+v", again)
	}
}

// Run with -race: writers and readers at once.
func TestStoreConcurrentUse(t *testing.T) {
	s := NewStore(Config{Retained: 10, MaxEntries: 8})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				uid := fmt.Sprintf("w%d-%d", w, i)
				ep := deploy(uid, 1, time.Duration(i)*time.Millisecond)
				s.ObserveEpisodes([]tracker.Event{opened(ep)})
				s.Add(uid, Entry{Time: ep.Start, Type: EntryWrite, Generation: 1, Object: &ObjectRef{UID: uid + "-pod"}})
				s.AddRelated(uid+"-pod", Entry{Time: ep.Start, Type: EntryEvent})
				s.Block(uid, "updated", "other", ep.Start)
				s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeConverged, time.Second)})
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			s.List(Query{}, at(time.Minute))
			s.Object("Deployment", "shop", "web-w0-1", at(time.Minute))
		}
	})
	wg.Wait()
	if n := len(s.List(Query{}, at(time.Minute))); n != 10 {
		t.Errorf("retained %d, want 10", n)
	}
	if _, e := s.Stats(); e != 790 {
		t.Errorf("evicted %d, want 790", e)
	}
}

// Collectors pass every record: a write is kept once per generation,
// including the later ones that re-target the episode (an HPA's scale).
func TestStoreWriteOncePerGeneration(t *testing.T) {
	s := NewStore(Config{})
	s.ObserveEpisodes([]tracker.Event{opened(deploy("u1", 2, 0))})
	for i, g := range []int64{2, 2, 3, 2, 3, 4} {
		s.Add("u1", Entry{Time: at(time.Duration(i) * time.Second), Type: EntryWrite, Generation: g})
	}
	var got []string
	for _, e := range s.List(Query{}, at(time.Minute))[0].Entries {
		got = append(got, fmt.Sprintf("gen %d @%v", e.Generation, e.Time.Sub(t0)))
	}
	if want := []string{"gen 2 @0s", "gen 3 @2s", "gen 4 @5s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writes = %v, want %v", got, want)
	}
	if !s.Open("u1") || s.Open("u2") {
		t.Error("Open disagrees with the episodes")
	}
}

// A rollout stuck while its pods are deleted and replaced keeps the
// relations of its live pods and of the last MaxGoneRelated deleted ones,
// not one per pod it ever had.
func TestStoreForgetsOldDeletedObjects(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("w", 2, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	s.Relate("pod-live", "w")
	const churned = 10 * MaxGoneRelated
	for i := range churned {
		uid := fmt.Sprintf("pod-%d", i)
		s.Add("w", Entry{Time: at(time.Duration(i) * time.Second), Type: EntryObject, Object: &ObjectRef{Kind: "Pod", Name: uid, UID: uid}, Reason: "created"})
		s.Gone(uid)
	}
	if n := len(s.related); n != MaxGoneRelated+1 {
		t.Errorf("%d relations after %d pods deleted, want %d deleted ones and the live pod", n, churned, MaxGoneRelated)
	}
	if n := len(s.relatedOf["w"]); n != MaxGoneRelated+1 {
		t.Errorf("reverse relations: %d, want %d", n, MaxGoneRelated+1)
	}
	newest, oldest := fmt.Sprintf("pod-%d", churned-1), "pod-0"
	for uid, want := range map[string]bool{"pod-live": true, newest: true, oldest: false} {
		if got := s.AddRelated(uid, Entry{Time: at(time.Hour), Type: EntryEndpoint, Reason: "removed"}); got != want {
			t.Errorf("AddRelated(%s) = %v, want %v", uid, got, want)
		}
	}
	s.Gone("pod-unrelated") // nothing to forget
	s.ObserveEpisodes([]tracker.Event{closedAt(ep, tracker.OutcomeConverged, 2*time.Hour)})
	if len(s.related) != 0 || len(s.relatedOf) != 0 || len(s.gone) != 0 {
		t.Errorf("relations kept after close: %d %d %d", len(s.related), len(s.relatedOf), len(s.gone))
	}
}

// The store keeps entries packed: every field of an Entry comes back as it
// went in (a type it does not know, a zero time, a nanosecond API time
// included), and the entries about one object share one reference.
func TestStoreEntriesComeBackAsTheyWentIn(t *testing.T) {
	s := NewStore(Config{})
	ep := deploy("u1", 1, 0)
	s.ObserveEpisodes([]tracker.Event{opened(ep)})
	api := t0.Add(1500 * time.Millisecond).Add(7 * time.Nanosecond)
	in := []Entry{
		{Time: t0.Add(time.Second), APITime: &api, Type: EntryWrite, Generation: 1, Managers: []string{"kubectl", "hpa"}, Message: WriterUnknown},
		{Time: t0.Add(2 * time.Second), Type: EntryEvent, Object: &ObjectRef{Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "p1"},
			Reason: "BackOff", Message: "Back-off restarting failed container", Controller: "kubelet", Count: 7},
		{Time: t0.Add(3 * time.Second), Type: EntryReady, Object: &ObjectRef{Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "p1"}, Reason: "ready", Node: "n1", Stage: "x"},
		{Type: EntryType("from-a-newer-collector"), Reason: "zero time", APITime: &time.Time{}},
	}
	for _, e := range in {
		if !s.Add("u1", e) {
			t.Fatal("no open episode")
		}
	}
	got := s.List(Query{UID: "u1"}, t0.Add(time.Minute))[0].Entries
	// The entry without a time sorts first; the opening write entry of
	// ObserveEpisodes is not among them (deploy has no write).
	var mine []Entry
	for _, e := range got {
		if e.Type != EntryStage {
			mine = append(mine, e)
		}
	}
	want := append([]Entry{in[3]}, in[:3]...)
	if len(mine) != len(want) {
		t.Fatalf("entries %+v, want %+v", mine, want)
	}
	for i := range want {
		w, g := want[i], mine[i]
		if !g.Time.Equal(w.Time) || (g.APITime == nil) != (w.APITime == nil) || g.APITime != nil && !g.APITime.Equal(*w.APITime) {
			t.Errorf("entry %d: times %v %v, want %v %v", i, g.Time, g.APITime, w.Time, w.APITime)
		}
		g.Time, g.APITime, w.Time, w.APITime = time.Time{}, nil, time.Time{}, nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	if mine[2].Object != mine[3].Object {
		t.Error("two entries about pod p1 hold two equal references")
	}
}

// The tracker's close after a Tick that came between a record's receipt
// (+5.05s) and its handling: the close entry sorts after the stages that
// caused it, and the episode lasts as long as its longest stage (issue 25:
// closed at the receive time, it sorted first and lasted 5.05 s for stages
// of 5.1 s).
func TestStoreCloseAfterATickBetweenReceiptAndHandling(t *testing.T) {
	s := NewStore(Config{})
	tr := tracker.NewRolloutTracker(tracker.RolloutConfig{Thresholds: []float64{1, 5}})
	w := tracker.Workload{Kind: tracker.Deployment, UID: "u1", Namespace: "shop", Name: "web", Generation: 1,
		Created: t0, SpecWritten: t0, TemplateHash: "t1", SpecReplicas: 2}
	s.ObserveEpisodes(tr.Observe(w, tracker.LiveAt(at(0))))
	s.ObserveEpisodes(tr.Tick(at(5100 * time.Millisecond)))
	w.ObservedGeneration, w.Status = 1, tracker.Status{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	s.ObserveEpisodes(tr.Observe(w, tracker.LiveAt(at(5050*time.Millisecond))))

	got := s.List(Query{}, at(time.Minute))
	if len(got) != 1 {
		t.Fatalf("List = %d episodes, want 1", len(got))
	}
	e := got[0]
	if want := []EntryType{EntryStage, EntryStage, EntryStage, EntryClosed}; !reflect.DeepEqual(types(e.Entries), want) {
		t.Errorf("entries %v, want %v", types(e.Entries), want)
	}
	for _, st := range e.Stages {
		if st.DurationSeconds != nil && *st.DurationSeconds > e.DurationSeconds {
			t.Errorf("stage %s took %v s, longer than its episode (%v s)", st.Stage, *st.DurationSeconds, e.DurationSeconds)
		}
	}
	if e.DurationSeconds != 5.1 {
		t.Errorf("episode lasted %v s, want 5.1", e.DurationSeconds)
	}
}
