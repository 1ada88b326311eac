package timeline

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Defaults of Config.
const (
	DefaultRetained   = 1000
	DefaultMaxEntries = 200
)

// Config bounds a Store.
type Config struct {
	// Retained is how many closed episodes are kept (the open ones are
	// always kept): when one more closes, the oldest closed is evicted.
	// 0: DefaultRetained.
	Retained int
	// MaxEntries bounds the entries of one episode: the first
	// ceil(MaxEntries/2) and the last floor(MaxEntries/2) are kept, the
	// ones in between dropped and counted (Episode.EntriesDropped). 0:
	// DefaultMaxEntries; at least 2, so that the write that opened the
	// episode (its first entry) and the closing entry (its last) survive.
	MaxEntries int
}

// Store keeps the timelines of the open rollout and custom-resource
// episodes and of the last Config.Retained closed ones. It is safe for
// concurrent use; every method takes only the store's own lock and never
// calls out, so collectors may call it (and Episodes may feed it as a
// collectors.EpisodeSink) with their own locks held.
//
// Entries reach an episode three ways: the tracker's events
// (ObserveEpisodes: stages, stall, close), Add for the workload's own
// evidence (writes, derived objects, scheduling, readiness...), and
// AddRelated for evidence named by another object's uid (Warning Events
// about a Pod or ReplicaSet), resolved through the relations Add and Relate
// record while the episode is open. Evidence for an object with no open
// episode is not kept: a timeline is the chronology of a rollout, not a
// log of the cluster.
//
// Cost: every write is O(1) amortized (map look-ups, a ring buffer per
// episode, a FIFO of closed episodes); List is O(n log n) in the retained
// episodes, and copies entries only for the episodes it returns.
type Store struct {
	cfg        Config
	head, tail int // entries kept from the start and from the end of an episode

	mu      sync.Mutex
	seq     uint64
	open    map[string]*record   // by workload uid: its open episode
	byUID   map[string][]*record // every retained episode, by uid, oldest first
	byTrace map[string][]*record // by trace id
	byName  map[objectKey][]*record
	closed  []*record // closed episodes, oldest closed first: closed[first:]
	first   int
	// related maps the uid of a derived object (a Pod, a ReplicaSet) to
	// the workload uid whose open episode it belongs to; relatedOf is the
	// reverse, to forget them when the episode closes.
	related   map[string]string
	relatedOf map[string]map[string]struct{}
	// gone lists, per workload uid, its related objects that were deleted,
	// oldest first: their relations outlive them (a pod's endpoint is
	// removed after the pod), but at most MaxGoneRelated per episode, or a
	// rollout stuck for days while its pods are evicted and replaced would
	// keep one relation per pod it ever had.
	gone map[string][]string

	dropped, evicted uint64
}

type objectKey struct{ kind, namespace, name string }

type record struct {
	seq     uint64
	ep      Episode // Entries, Stages, State, DurationSeconds are filled on read
	stages  []StageTiming
	open    bool
	stalled bool
	end     time.Time
	// entries: head holds the first entries (up to Store.head), ring the
	// last ones (up to Store.tail, oldest at ringStart once full).
	head      []entry
	ring      []entry
	ringStart int
	dropped   int
	// written is the newest generation an EntryWrite recorded.
	written int64
}

// NewStore returns an empty store.
func NewStore(cfg Config) *Store {
	if cfg.Retained <= 0 {
		cfg.Retained = DefaultRetained
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxEntries < 2 {
		cfg.MaxEntries = 2
	}
	head := (cfg.MaxEntries + 1) / 2
	return &Store{
		cfg:       cfg,
		head:      head,
		tail:      cfg.MaxEntries - head,
		open:      map[string]*record{},
		byUID:     map[string][]*record{},
		byTrace:   map[string][]*record{},
		byName:    map[objectKey][]*record{},
		related:   map[string]string{},
		relatedOf: map[string]map[string]struct{}{},
		gone:      map[string][]string{},
	}
}

// Stats returns how many entries were dropped from full episodes and how
// many closed episodes were evicted from the full store, since it was made.
func (s *Store) Stats() (entriesDropped, episodesEvicted uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped, s.evicted
}

// ObserveEpisodes implements collectors.EpisodeSink: EpisodeOpened opens a
// timeline (EpisodeRecovered marks it recovered), StageReached times a
// stage with the event's Duration (the value the duration histogram
// observed), EpisodeStalled marks it stalled, EpisodeClosed closes it with
// its outcome. ThresholdCrossed adds nothing: the stage timings show it.
func (s *Store) ObserveEpisodes(evs []tracker.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if ev.Type == tracker.EpisodeOpened {
			s.openEpisode(ev)
			continue
		}
		r := s.open[ev.Episode.UID]
		if r == nil || r.ep.Generation != ev.Episode.Generation {
			continue // an episode opened before the store was a sink
		}
		switch ev.Type {
		case tracker.EpisodeRecovered:
			r.ep.Recovered = true
		case tracker.StageReached:
			s.reach(r, ev)
		case tracker.EpisodeStalled:
			r.stalled = true
			r.ep.Stage, r.ep.Reason = string(ev.Stage), ev.Reason
			s.add(r, Entry{Time: ev.At, Type: EntryStalled, Stage: string(ev.Stage), Reason: ev.Reason})
		case tracker.EpisodeClosed:
			s.close(r, string(ev.Outcome), ev.At)
		}
	}
}

func (s *Store) openEpisode(ev *tracker.Event) {
	e := ev.Episode
	if old := s.open[e.UID]; old != nil {
		// The tracker closes an episode before it opens the next one of the
		// same object; a feeder that lost its tracker (a custom resource
		// whose CRD came back) may not have: the new write supersedes it.
		s.close(old, string(tracker.OutcomeSuperseded), ev.At)
	}
	s.seq++
	r := &record{seq: s.seq, open: true, ep: Episode{
		Kind: string(e.Kind), Namespace: e.Namespace, Name: e.Name, UID: e.UID,
		Generation: e.Generation, Target: e.Target, Change: string(e.Change),
		Start: e.Start, APIStart: e.APIStart, Recovered: e.Recovered,
		TraceID: TraceID(e.UID, e.Generation),
	}}
	stages := tracker.Stages(e.Kind)
	r.stages = make([]StageTiming, len(stages))
	for i, st := range stages {
		r.stages[i].Stage = string(st)
	}
	s.open[e.UID] = r
	s.byUID[e.UID] = append(s.byUID[e.UID], r)
	s.byTrace[r.ep.TraceID] = append(s.byTrace[r.ep.TraceID], r)
	k := objectKey{r.ep.Kind, r.ep.Namespace, r.ep.Name}
	s.byName[k] = append(s.byName[k], r)
}

// reach records a stage reached. Stages are reached in order: the earlier
// ones not timed yet were passed before the exporter saw the episode (a
// recovered one) or skipped by the tracker (no observedGeneration to time
// them on), and are reached with no time.
func (s *Store) reach(r *record, ev *tracker.Event) {
	r.ep.Target = ev.Episode.Target
	for i := range r.stages {
		if r.stages[i].Stage != string(ev.Stage) {
			continue
		}
		for j := range r.stages[:i] {
			r.stages[j].Reached = true
		}
		at, d := ev.At, ev.Duration.Seconds()
		r.stages[i].Reached, r.stages[i].At, r.stages[i].DurationSeconds = true, &at, &d
		break
	}
	e := Entry{Time: ev.At, Type: EntryStage, Stage: string(ev.Stage)}
	if !ev.APITime.IsZero() {
		t := ev.APITime
		e.APITime = &t
	}
	s.add(r, e)
}

// close ends r and makes room for it among the retained closed episodes.
func (s *Store) close(r *record, outcome string, at time.Time) {
	s.add(r, Entry{Time: at, Type: EntryClosed, Reason: outcome})
	// Retained closed episodes are the bulk of the store: no spare room.
	r.head, r.ring = slices.Clip(slices.Clone(r.head)), slices.Clip(slices.Clone(r.ring))
	r.open, r.ep.Outcome, r.end = false, outcome, at
	r.ep.Stage, r.ep.Reason = "", ""
	delete(s.open, r.ep.UID)
	for obj := range s.relatedOf[r.ep.UID] {
		delete(s.related, obj)
	}
	delete(s.relatedOf, r.ep.UID)
	delete(s.gone, r.ep.UID)
	s.closed = append(s.closed, r)
	for len(s.closed)-s.first > s.cfg.Retained {
		s.evict(s.closed[s.first])
		s.closed[s.first] = nil
		s.first++
	}
	// Compact the FIFO once half of it is evicted: amortized O(1).
	if s.first > 0 && s.first >= len(s.closed)/2 {
		n := copy(s.closed, s.closed[s.first:])
		clear(s.closed[n:])
		s.closed, s.first = s.closed[:n], 0
	}
}

// evict forgets a closed episode. It is the oldest closed one, so it is
// near the front of its index lists (first, unless an object of the same
// name and kind was recreated while it was open).
func (s *Store) evict(r *record) {
	s.evicted++
	drop := func(rs []*record) []*record {
		for i, x := range rs {
			if x == r {
				return append(rs[:i:i], rs[i+1:]...)
			}
		}
		return rs
	}
	if rs := drop(s.byUID[r.ep.UID]); len(rs) > 0 {
		s.byUID[r.ep.UID] = rs
	} else {
		delete(s.byUID, r.ep.UID)
	}
	if rs := drop(s.byTrace[r.ep.TraceID]); len(rs) > 0 {
		s.byTrace[r.ep.TraceID] = rs
	} else {
		delete(s.byTrace, r.ep.TraceID)
	}
	k := objectKey{r.ep.Kind, r.ep.Namespace, r.ep.Name}
	if rs := drop(s.byName[k]); len(rs) > 0 {
		s.byName[k] = rs
	} else {
		delete(s.byName, k)
	}
}

// entry is an Entry as the store keeps it; readers get Entries (see
// record.episode), their times in UTC without a monotonic reading (the
// same instants; an episode's own times keep the zone they came with). Times are packed as Unix nanoseconds (an Entry's Time is
// 24 bytes, its APITime a pointer to 24 more), the type is a byte, the
// fields only some types use are in an allocation of their own, made only
// when one is set, and the object reference is shared with a recent entry
// about the same object (a pod's entries come one event at a time, each
// with a reference of its own). A pod's entry is 104 bytes instead of 200.
// Retained closed episodes hold up to --timelines.max-entries of them each
// (BenchmarkStoreMemory).
type entry struct {
	at, api int64 // Unix ns; api only with hasAPI
	typ     uint8 // index in entryTypes; 0: more.typ
	flags   uint8
	obj     *ObjectRef
	reason  string
	node    string
	message string
	stage   string
	more    *entryMore
}

// entryMore holds what writes and Events add to an entry.
type entryMore struct {
	typ        EntryType // a type entryTypes does not list
	controller string
	managers   []string
	generation int64
	count      int64
}

const (
	hasAPI  uint8 = 1 << iota
	zeroAt        // Time was the zero time, which has no Unix ns
	zeroAPI       // APITime pointed at the zero time
)

// entryTypes are the types an entry stores as a byte (index 0 is none).
var entryTypes = []EntryType{"", EntryWrite, EntryObject, EntryScheduled, EntryNode, EntryReady, EntryEndpoint,
	EntryEvent, EntryCondition, EntryStage, EntryBlocking, EntryStalled, EntryClosed}

func typeIndex(t EntryType) uint8 {
	for i, k := range entryTypes[1:] {
		if k == t {
			return uint8(i + 1)
		}
	}
	return 0
}

// sameObjectWithin is how many preceding entries add looks through for a
// reference to the same object to share.
const sameObjectWithin = 8

func pack(e Entry) entry {
	c := entry{typ: typeIndex(e.Type), obj: e.Object, reason: e.Reason, node: e.Node, message: e.Message, stage: e.Stage}
	if c.typ == 0 || e.Controller != "" || e.Managers != nil || e.Generation != 0 || e.Count != 0 {
		c.more = &entryMore{controller: e.Controller, managers: e.Managers, generation: e.Generation, count: e.Count}
		if c.typ == 0 {
			c.more.typ = e.Type
		}
	}
	if e.Time.IsZero() {
		c.flags |= zeroAt
	} else {
		c.at = e.Time.UnixNano()
	}
	switch {
	case e.APITime == nil:
	case e.APITime.IsZero():
		c.flags |= hasAPI | zeroAPI
	default:
		c.flags |= hasAPI
		c.api = e.APITime.UnixNano()
	}
	return c
}

func (c *entry) unpack() Entry {
	e := Entry{Type: entryTypes[c.typ], Object: c.obj, Reason: c.reason, Node: c.node, Message: c.message, Stage: c.stage}
	if m := c.more; m != nil {
		e.Controller, e.Managers, e.Generation, e.Count = m.controller, m.managers, m.generation, m.count
		if c.typ == 0 {
			e.Type = m.typ
		}
	}
	if c.flags&zeroAt == 0 {
		e.Time = time.Unix(0, c.at).UTC()
	}
	switch {
	case c.flags&zeroAPI != 0:
		e.APITime = &time.Time{}
	case c.flags&hasAPI != 0:
		api := time.Unix(0, c.api).UTC()
		e.APITime = &api
	}
	return e
}

// shareObject points c at an equal reference of a recent entry of r.
func (r *record) shareObject(c *entry) {
	if c.obj == nil {
		return
	}
	// The newest entries: the ring's, from the slot before ringStart
	// backwards (it wraps once full), then the head's last ones.
	for k := 1; k <= sameObjectWithin; k++ {
		var e *entry
		switch n := len(r.ring); {
		case k <= n:
			e = &r.ring[(r.ringStart-k+n)%n]
		case k-n <= len(r.head):
			e = &r.head[len(r.head)-(k-n)]
		default:
			return
		}
		if o := e.obj; o != nil && o != c.obj && *o == *c.obj {
			c.obj = o
			return
		}
	}
}

// add appends e to r within the bounds.
func (s *Store) add(r *record, ev Entry) {
	e := pack(ev)
	r.shareObject(&e)
	switch {
	case len(r.head) < s.head:
		r.head = appendBounded(r.head, e, s.head)
	case len(r.ring) < s.tail:
		r.ring = appendBounded(r.ring, e, s.tail)
	default:
		r.ring[r.ringStart] = e
		r.ringStart = (r.ringStart + 1) % len(r.ring)
		r.dropped++
		s.dropped++
	}
}

// appendBounded appends like append, growing the capacity no further than
// limit: a full head or ring holds no spare room (append's doubling left
// 28% of a 100-entry half unused).
func appendBounded(es []entry, e entry, limit int) []entry {
	if len(es) == cap(es) {
		grown := make([]entry, len(es), min(max(2*cap(es), 4), limit))
		copy(grown, es)
		es = grown
	}
	return append(es, e)
}

// Add records an entry of the open episode of the workload episodeUID and
// reports whether it has one. An entry naming an object (e.Object.UID, a
// Pod or a ReplicaSet) relates that object to the episode, so that
// AddRelated finds it. An EntryWrite is recorded once per generation:
// collectors may pass every record of the workload, and only a write that
// moved the generation is kept.
func (s *Store) Add(episodeUID string, e Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.open[episodeUID]
	if r == nil {
		return false
	}
	if e.Type == EntryWrite {
		if e.Generation <= r.written {
			return true
		}
		r.written = e.Generation
	}
	if e.Object != nil && e.Object.UID != "" && e.Object.UID != episodeUID {
		s.relate(e.Object.UID, episodeUID)
	}
	s.add(r, e)
	return true
}

// Open reports whether the workload uid has an open episode: collectors
// skip building entries nobody keeps.
func (s *Store) Open(uid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[uid] != nil
}

// AddRelated records an entry about objectUID, a workload with an open
// episode or an object related to one (by Add or Relate), and reports
// whether it found the episode.
func (s *Store) AddRelated(objectUID string, e Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.open[objectUID]
	if r == nil {
		if w, ok := s.related[objectUID]; ok {
			r = s.open[w]
		}
	}
	if r == nil {
		return false
	}
	s.add(r, e)
	return true
}

// Relate relates objectUID (a Pod or ReplicaSet that existed before the
// episode opened) to the open episode of the workload episodeUID, until it
// closes. Nothing happens when it has none: relations are kept for open
// episodes only, so that they stay bounded by their live derived objects
// and the last MaxGoneRelated deleted ones (Gone).
func (s *Store) Relate(objectUID, episodeUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[episodeUID] != nil {
		s.relate(objectUID, episodeUID)
	}
}

// MaxGoneRelated bounds the relations an open episode keeps to deleted
// objects (Gone). Evidence about a deleted pod comes within seconds of its
// deletion (its endpoint's removal, a last Event), so the newest 256 of
// them are plenty; an episode's live objects are never forgotten.
const MaxGoneRelated = 256

// Gone says that objectUID, related to an open episode, was deleted. Its
// relation is kept, for the evidence that follows a deletion, until the
// episode closes or MaxGoneRelated newer deleted objects of the episode
// push it out.
func (s *Store) Gone(objectUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.related[objectUID]
	if !ok || s.open[w] == nil {
		return
	}
	s.gone[w] = append(s.gone[w], objectUID)
	if gone := s.gone[w]; len(gone) > MaxGoneRelated {
		old := gone[0]
		if s.related[old] == w {
			delete(s.related, old)
			delete(s.relatedOf[w], old)
		}
		s.gone[w] = slices.Delete(gone, 0, 1) // copies 255 strings: rare, bounded
	}
}

func (s *Store) relate(objectUID, episodeUID string) {
	if prev, ok := s.related[objectUID]; ok {
		if prev == episodeUID {
			return
		}
		delete(s.relatedOf[prev], objectUID)
	}
	s.related[objectUID] = episodeUID
	set := s.relatedOf[episodeUID]
	if set == nil {
		set = map[string]struct{}{}
		s.relatedOf[episodeUID] = set
	}
	set[objectUID] = struct{}{}
}

// Block records what holds the open episode of uid now (the tracker's
// Blocking: the next stage not reached and the most specific reason): an
// EntryBlocking when it differs from what was recorded last, nothing
// otherwise. Callers may call it after every record.
func (s *Store) Block(uid, stage, reason string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.open[uid]
	if r == nil || (r.ep.Stage == stage && r.ep.Reason == reason) {
		return
	}
	r.ep.Stage, r.ep.Reason = stage, reason
	s.add(r, Entry{Time: now, Type: EntryBlocking, Stage: stage, Reason: reason})
}

// List implements Source. The episodes, their stages and entry lists are
// the caller's; what entries point to (Object, Managers) is shared with
// the store and must not be modified (APITime is a copy).
func (s *Store) List(q Query, now time.Time) []Episode {
	s.mu.Lock()
	defer s.mu.Unlock()
	var candidates []*record
	switch {
	case q.UID != "":
		candidates = s.byUID[q.UID]
	case q.TraceID != "":
		candidates = s.byTrace[q.TraceID]
	default:
		candidates = make([]*record, 0, len(s.open)+len(s.closed)-s.first)
		for _, r := range s.open {
			candidates = append(candidates, r)
		}
		candidates = append(candidates, s.closed[s.first:]...)
	}
	rs := make([]*record, 0, len(candidates))
	for _, r := range candidates {
		if q.matches(r) {
			rs = append(rs, r)
		}
	}
	if q.Sort == SortStart {
		sort.Slice(rs, func(i, j int) bool { return newer(rs[i], rs[j]) })
	} else {
		sort.Slice(rs, func(i, j int) bool {
			di, dj := rs[i].duration(now), rs[j].duration(now)
			if di != dj {
				return di > dj
			}
			return newer(rs[i], rs[j])
		})
	}
	if q.Limit > 0 && len(rs) > q.Limit {
		rs = rs[:q.Limit]
	}
	out := make([]Episode, len(rs))
	for i, r := range rs {
		out[i] = r.episode(now)
	}
	return out
}

// Object implements Source: the retained episodes of the object, newest
// first (a recreated object's episodes follow the newer object's).
func (s *Store) Object(kind, namespace, name string, now time.Time) []Episode {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.byName[objectKey{kind, namespace, name}]
	out := make([]Episode, len(rs))
	for i, r := range rs {
		out[len(rs)-1-i] = r.episode(now) // rs is in opening order
	}
	return out
}

func newer(a, b *record) bool {
	if !a.ep.Start.Equal(b.ep.Start) {
		return a.ep.Start.After(b.ep.Start)
	}
	return a.seq > b.seq
}

func (q *Query) matches(r *record) bool {
	switch {
	case q.UID != "" && r.ep.UID != q.UID,
		q.TraceID != "" && r.ep.TraceID != q.TraceID,
		q.Namespace != "" && r.ep.Namespace != q.Namespace,
		q.Kind != "" && r.ep.Kind != q.Kind,
		q.Outcome != "" && r.ep.Outcome != q.Outcome,
		q.State != "" && r.state() != q.State:
		return false
	}
	return true
}

func (r *record) state() string {
	switch {
	case !r.open:
		return StateClosed
	case r.stalled:
		return StateStalled
	}
	return StateInProgress
}

func (r *record) duration(now time.Time) time.Duration {
	if !r.open {
		return r.end.Sub(r.ep.Start)
	}
	return now.Sub(r.ep.Start)
}

// episode returns a copy of r as of now, sharing nothing mutable with it.
func (r *record) episode(now time.Time) Episode {
	ep := r.ep
	ep.State = r.state()
	ep.DurationSeconds = r.duration(now).Seconds()
	if !r.open {
		end := r.end
		ep.End = &end
	} else if ep.Stage == "" {
		// Not blocked on anything recorded yet: the next stage not reached.
		for _, st := range r.stages {
			if !st.Reached {
				ep.Stage = st.Stage
				break
			}
		}
	}
	ep.Stages = make([]StageTiming, len(r.stages))
	for i, st := range r.stages {
		if st.At != nil {
			at, d := *st.At, *st.DurationSeconds
			st.At, st.DurationSeconds = &at, &d
		}
		ep.Stages[i] = st
	}
	// A shallow copy: what an entry points to (Object, Managers) is never
	// modified once added, and is shared with the readers, who must not
	// modify it either. Copying it too made List 4 times slower
	// (BenchmarkStoreList).
	ep.Entries = make([]Entry, 0, len(r.head)+len(r.ring))
	for _, es := range [][]entry{r.head, r.ring[r.ringStart:], r.ring[:r.ringStart]} {
		for i := range es {
			ep.Entries = append(ep.Entries, es[i].unpack())
		}
	}
	// Entries come from several informers and the tracker: show them in
	// the order they happened on the exporter's clock. They mostly arrive
	// in it already.
	byTime := func(a, b Entry) int { return a.Time.Compare(b.Time) }
	if !slices.IsSortedFunc(ep.Entries, byTime) {
		slices.SortStableFunc(ep.Entries, byTime)
	}
	ep.EntriesDropped = r.dropped
	return ep
}
