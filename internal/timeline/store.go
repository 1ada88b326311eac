package timeline

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Defaults of Config.
const (
	DefaultRetained          = 1000
	DefaultRetainedPerObject = 5
	DefaultMaxEntries        = 200
	// DefaultMaxBytes fits the shipped memory limit (512 Mi) beside the
	// informers of a 20,000-pod cluster (docs/timelines.md#memory): 1,000
	// closed episodes of 200 entries are about 25 MB.
	DefaultMaxBytes = 64 << 20
)

// Config bounds a Store.
type Config struct {
	// Retained is how many closed episodes are kept (the open ones are
	// always kept, see MaxBytes): when one more closes, the oldest closed
	// is evicted. 0: DefaultRetained.
	Retained int
	// RetainedPerObject is how many closed episodes of one object (kind,
	// namespace, name) are kept: when one more closes, that object's
	// oldest closed is evicted, so that an object rolled out every few
	// seconds cannot push the other objects' timelines out. 0:
	// DefaultRetainedPerObject.
	RetainedPerObject int
	// MaxEntries bounds the entries of one episode: the first
	// ceil(MaxEntries/2) and the last floor(MaxEntries/2) are kept, the
	// ones in between dropped and counted (Episode.EntriesDropped). 0:
	// DefaultMaxEntries; at least 2, so that the write that opened the
	// episode (its first entry) and the closing entry (its last) survive.
	MaxEntries int
	// MaxBytes bounds the store's memory, open and closed episodes
	// together, as the store estimates it (Store.Bytes; an upper bound of
	// what the Go heap holds for them). Past it the oldest closed episodes
	// are evicted; once none is left, the largest open episodes keep only
	// their first and last entries (and count the others as dropped) until
	// it is 10 % under. Below that floor (an open episode with two entries
	// costs about 1.5 KB) the store holds what the open episodes need: one
	// per workload in flight, which the informers hold anyway. 0:
	// DefaultMaxBytes.
	MaxBytes int64
}

// Store keeps the timelines of the open rollout and custom-resource
// episodes and of the last Config.Retained closed ones, within
// Config.MaxBytes. It is safe for concurrent use; every method takes only
// the store's own lock, holds it for the map look-ups and appends of one
// call (never while copying entries out or encoding them: readers take a
// snapshot, see Select) and never calls out. The collectors that write to
// it do so outside their own locks (collectors.Outbox), so a write waiting
// for this lock holds up no scrape.
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
// Entries once stored are never modified: an episode's first entries are
// one slice, its last ones a list of chunks that only grow at the end, and
// dropping entries from the middle drops whole chunks (or makes new
// slices). A snapshot holds the slice headers of the moment, so readers
// copy entries and encode them after the lock is released.
//
// Cost: every write is O(1) amortized (map look-ups, an append, a FIFO of
// closed episodes); Select is O(n log n) in the matching retained episodes
// under the lock, with no entry copied under it.
type Store struct {
	cfg        Config
	head, tail int // entries kept from the start and from the end of an episode

	mu      sync.Mutex
	seq     uint64
	open    map[string]*record   // by workload uid: its open episode
	byUID   map[string][]*record // every retained episode, by uid, oldest first
	byTrace map[string][]*record // by trace id
	byName  map[objectKey][]*record
	byKind  map[string]map[*record]struct{}
	// closed lists the closed episodes, oldest closed first:
	// closed[first:]; an episode evicted out of order (RetainedPerObject)
	// stays in it, marked evicted, until the front reaches it or the list
	// is compacted. closedLive counts the others.
	closed     []*record
	first      int
	closedLive int
	// untrimmed are the open episodes MaxBytes has not cut down yet.
	untrimmed map[*record]struct{}
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

	// Read without the lock (scrapes).
	dropped, evicted, trimmed atomic.Uint64
	bytes                     atomic.Int64
}

type objectKey struct{ kind, namespace, name string }

type record struct {
	seq     uint64
	ep      Episode // Entries, Stages, State, DurationSeconds are filled on read
	stages  []StageTiming
	open    bool
	stalled bool
	evicted bool
	end     time.Time
	// entries: head holds the first ones (up to headMax), tail the last
	// ones in chunks, oldest first; its first tailLen-tailShown entries
	// are past the last tailMax and no longer shown (they go with their
	// chunk).
	head             []entry
	tail             [][]entry
	tailLen          int
	tailShown        int
	headMax, tailMax int
	dropped          int
	// bytes is what the store counts for r (recordSize, entriesSize).
	bytes int64
	// written is the newest generation an EntryWrite recorded.
	written int64
}

// tailChunk is the capacity of a chunk of an episode's last entries: a
// full episode holds up to tailChunk-1 entries more than it shows until it
// closes.
const tailChunk = 16

// NewStore returns an empty store.
func NewStore(cfg Config) *Store {
	if cfg.Retained <= 0 {
		cfg.Retained = DefaultRetained
	}
	if cfg.RetainedPerObject <= 0 {
		cfg.RetainedPerObject = DefaultRetainedPerObject
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxEntries < 2 {
		cfg.MaxEntries = 2
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
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
		byKind:    map[string]map[*record]struct{}{},
		untrimmed: map[*record]struct{}{},
		related:   map[string]string{},
		relatedOf: map[string]map[string]struct{}{},
		gone:      map[string][]string{},
	}
}

// Stats returns how many entries were dropped from full episodes (or cut
// from open ones by MaxBytes) and how many closed episodes were evicted,
// since the store was made. It takes no lock.
func (s *Store) Stats() (entriesDropped, episodesEvicted uint64) {
	return s.dropped.Load(), s.evicted.Load()
}

// Bytes is the store's estimate of the memory its episodes hold (at most
// Config.MaxBytes, but for the floor of the open episodes). It takes no
// lock.
func (s *Store) Bytes() int64 { return s.bytes.Load() }

// Trimmed is how many open episodes MaxBytes cut down to their first and
// last entries, since the store was made. It takes no lock.
func (s *Store) Trimmed() uint64 { return s.trimmed.Load() }

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
	r := &record{seq: s.seq, open: true, headMax: s.head, tailMax: s.tail, ep: Episode{
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
	s.untrimmed[r] = struct{}{}
	s.byUID[e.UID] = append(s.byUID[e.UID], r)
	s.byTrace[r.ep.TraceID] = append(s.byTrace[r.ep.TraceID], r)
	k := r.key()
	s.byName[k] = append(s.byName[k], r)
	kind := s.byKind[r.ep.Kind]
	if kind == nil {
		kind = map[*record]struct{}{}
		s.byKind[r.ep.Kind] = kind
	}
	kind[r] = struct{}{}
	s.grow(r, recordSize(r))
}

func (r *record) key() objectKey { return objectKey{r.ep.Kind, r.ep.Namespace, r.ep.Name} }

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
	r.open, r.ep.Outcome, r.end = false, outcome, at
	r.ep.Stage, r.ep.Reason = "", ""
	delete(s.open, r.ep.UID)
	delete(s.untrimmed, r)
	for obj := range s.relatedOf[r.ep.UID] {
		delete(s.related, obj)
		s.grow(r, -relationSize)
	}
	delete(s.relatedOf, r.ep.UID)
	delete(s.gone, r.ep.UID)
	// Retained closed episodes are the bulk of the store: no spare room,
	// and none of the entries no longer shown.
	r.head = slices.Clip(slices.Clone(r.head))
	if tail := r.shownTail(); len(tail) > 0 {
		r.tail, r.tailLen = [][]entry{tail}, len(tail)
	} else {
		r.tail, r.tailLen = nil, 0
	}
	s.recount(r)
	s.closed = append(s.closed, r)
	s.closedLive++
	// One object's own oldest closed go first, never r: the list is in
	// the order they opened, and r may have opened before an episode of
	// the same name that closed already (the object was recreated).
	var ofObject int
	rs := s.byName[r.key()]
	for _, x := range rs {
		if !x.open {
			ofObject++
		}
	}
	for _, x := range rs {
		if ofObject <= s.cfg.RetainedPerObject {
			break
		}
		if !x.open && x != r {
			s.evict(x)
			ofObject--
		}
	}
	for s.closedLive > s.cfg.Retained {
		s.evictOldest()
	}
	s.fit()
}

// shownTail is a new slice of the tail entries shown (the last tailMax).
func (r *record) shownTail() []entry {
	out := make([]entry, 0, r.tailShown)
	skip := r.tailLen - r.tailShown
	for _, c := range r.tail {
		if skip >= len(c) {
			skip -= len(c)
			continue
		}
		out = append(out, c[skip:]...)
		skip = 0
	}
	return out
}

// evictOldest evicts the oldest closed episode.
func (s *Store) evictOldest() {
	for s.first < len(s.closed) {
		r := s.closed[s.first]
		s.closed[s.first] = nil
		s.first++
		if !r.evicted {
			s.evict(r)
			break
		}
	}
	// Compact the FIFO once half of it is evicted: amortized O(1).
	if s.first > 0 && s.first >= len(s.closed)/2 {
		n := copy(s.closed, s.closed[s.first:])
		clear(s.closed[n:])
		s.closed, s.first = s.closed[:n], 0
	}
}

// evict forgets a closed episode. The oldest closed is near the front of
// its index lists (first, unless an object of the same name and kind was
// recreated while it was open); one evicted for RetainedPerObject is
// marked in the FIFO and skipped when the front reaches it.
func (s *Store) evict(r *record) {
	if r.evicted {
		return
	}
	r.evicted = true
	s.closedLive--
	s.evicted.Add(1)
	s.bytes.Add(-r.bytes)
	r.head, r.tail, r.bytes = nil, nil, 0 // a snapshot in flight keeps what it took
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
	k := r.key()
	if rs := drop(s.byName[k]); len(rs) > 0 {
		s.byName[k] = rs
	} else {
		delete(s.byName, k)
	}
	if kind := s.byKind[r.ep.Kind]; kind != nil {
		delete(kind, r)
		if len(kind) == 0 {
			delete(s.byKind, r.ep.Kind)
		}
	}
	// Evicted records out of order stay in the FIFO: compact it when
	// they are most of it, so that an object closing episodes every few
	// seconds does not grow it.
	if live := len(s.closed) - s.first; live > 64 && s.closedLive < live/2 {
		n := 0
		for _, x := range s.closed[s.first:] {
			if !x.evicted {
				s.closed[n] = x
				n++
			}
		}
		clear(s.closed[n:])
		s.closed, s.first = s.closed[:n], 0
	}
}

// grow counts n more bytes for r.
func (s *Store) grow(r *record, n int64) {
	r.bytes += n
	s.bytes.Add(n)
}

// fit brings the store back under MaxBytes: the oldest closed episodes
// first, then the largest open ones cut to their first and last entries,
// down to 90 % of it so that the next writes do not start again.
func (s *Store) fit() {
	if s.bytes.Load() <= s.cfg.MaxBytes {
		return
	}
	low := s.cfg.MaxBytes / 10 * 9
	for s.bytes.Load() > low && s.closedLive > 0 {
		s.evictOldest()
	}
	if s.bytes.Load() <= low || len(s.untrimmed) == 0 {
		return
	}
	open := make([]*record, 0, len(s.untrimmed))
	for r := range s.untrimmed {
		open = append(open, r)
	}
	slices.SortFunc(open, func(a, b *record) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, r := range open {
		if s.bytes.Load() <= low {
			break
		}
		s.trim(r)
	}
}

// trim cuts the open episode r to its first and last entries, for good:
// the entries it adds later replace its last one.
func (s *Store) trim(r *record) {
	delete(s.untrimmed, r)
	s.trimmed.Add(1)
	shown := append(slices.Clone(r.head), r.shownTail()...)
	kept := shown
	if len(shown) > 2 {
		kept = []entry{shown[0], shown[len(shown)-1]}
	}
	if cut := len(shown) - len(kept); cut > 0 {
		r.dropped += cut
		s.dropped.Add(uint64(cut))
	}
	r.head, r.tail, r.tailLen, r.tailShown = kept[:min(1, len(kept))], nil, 0, 0
	if len(kept) == 2 {
		r.tail, r.tailLen, r.tailShown = [][]entry{kept[1:]}, 1, 1
	}
	r.headMax, r.tailMax = 1, 1
	s.recount(r)
}

// recount counts r anew once close or trim made its entries new slices,
// which no snapshot holds yet: an entry whose object reference was shared
// with an entry no longer kept (not shown, cut) counts it itself again.
func (s *Store) recount(r *record) {
	old := r.bytes
	for i := range r.head {
		r.unshareOrphan(-1, i, &r.head[i])
	}
	for ci, c := range r.tail {
		for i := range c {
			r.unshareOrphan(ci, i, &c[i])
		}
	}
	r.bytes = recordSize(r) + int64(len(s.relatedOf[r.ep.UID]))*relationSize + entriesSize(r.head)
	for _, c := range r.tail {
		r.bytes += entriesSize(c)
	}
	s.bytes.Add(r.bytes - old)
}

// unshareOrphan clears the sharedObj flag of e, the i-th entry of the
// tail's chunk ci (-1: of the head), when no entry kept before it holds
// its object reference any longer.
func (r *record) unshareOrphan(ci, i int, e *entry) {
	if e.flags&sharedObj != 0 && !r.heldBefore(ci, i, e.obj) {
		e.flags &^= sharedObj
	}
}

// heldBefore reports whether an entry kept before the i-th of the tail's
// chunk ci (-1: of the head) holds o, looking from the nearest back: a
// shared reference is within sameObjectWithin entries of the entry that
// holds it too, or of one before it that does.
func (r *record) heldBefore(ci, i int, o *ObjectRef) bool {
	for ; ci >= 0; ci-- {
		for j := i - 1; j >= 0; j-- {
			if r.tail[ci][j].obj == o {
				return true
			}
		}
		if ci > 0 {
			i = len(r.tail[ci-1])
		} else {
			i = len(r.head)
		}
	}
	for j := i - 1; j >= 0; j-- {
		if r.head[j].obj == o {
			return true
		}
	}
	return false
}

// countOrphans makes the entries of r's tail that shared their object
// reference with an entry of the chunks just dropped count it again. Only
// the first sameObjectWithin kept could have (every later one shares
// within them). Their chunks may be in a snapshot, whose entries are
// never modified: a chunk with such an entry is replaced by a copy.
func (s *Store) countOrphans(r *record) {
	n := 0
	for ci := 0; ci < len(r.tail) && n < sameObjectWithin; ci++ {
		c := r.tail[ci]
		var fixed []entry
		for i := 0; i < len(c) && n < sameObjectWithin; i, n = i+1, n+1 {
			e := c[i]
			if e.flags&sharedObj == 0 || r.heldBefore(ci, i, e.obj) {
				continue
			}
			if fixed == nil {
				fixed = make([]entry, len(c), cap(c))
				copy(fixed, c)
				r.tail[ci] = fixed
			}
			fixed[i].flags &^= sharedObj
		}
		if fixed != nil {
			s.grow(r, entriesSize(fixed)-entriesSize(c))
		}
	}
}

// recordSize is what the store counts for an episode without its entries:
// the record, its strings, stages, and its place in the indexes.
func recordSize(r *record) int64 {
	n := int64(unsafe.Sizeof(*r)) + recordIndexes
	e := &r.ep
	n += strBytes(e.Kind, e.Namespace, e.Name, e.UID, e.Change, e.TraceID)
	n += int64(len(r.stages)) * (int64(unsafe.Sizeof(StageTiming{})) + 48)
	return n
}

// mapEntry is about what one entry of a map of pointers or strings costs.
const mapEntry = 64

// recordIndexes is what an episode costs in the indexes (open, byUID,
// byTrace, byName, byKind, untrimmed, relatedOf and the small slices and
// sets they hold), measured: with 4 map entries, a store of 5,000 open
// episodes held 7 % more heap than it counted (TestStoreBudgetBoundsStuckRollouts).
const recordIndexes = 8 * mapEntry

// entryBytes is what the store counts per entry of a slice's capacity:
// the entry and the 1/16 that Go's allocation size classes add on average.
const entryBytes = int64(unsafe.Sizeof(entry{})) * 17 / 16

// entriesSize is what the store counts for a slice of entries: its
// capacity and what its entries hold (entryExtra).
func entriesSize(es []entry) int64 {
	n := int64(cap(es)) * entryBytes
	for i := range es {
		n += entryExtra(&es[i])
	}
	return n
}

// entryExtra is what the store counts for what only one entry points to:
// its side allocation, its object reference unless shared with a
// preceding entry, and the bytes of its strings, even those shared with
// the informers' cache (an upper bound).
func entryExtra(e *entry) int64 {
	n := strBytes(e.reason, e.node, e.message, e.stage)
	if o := e.obj; o != nil && e.flags&sharedObj == 0 {
		n += int64(unsafe.Sizeof(*o)) + strBytes(o.Kind, o.Namespace, o.Name, o.UID)
	}
	if m := e.more; m != nil {
		n += int64(unsafe.Sizeof(*m)) + strBytes(m.controller, string(m.typ)) + strBytes(m.managers...) + int64(cap(m.managers))*16
	}
	return n
}

// strBytes counts the bytes of strings as allocated: rounded up to 16.
func strBytes(ss ...string) int64 {
	var n int64
	for _, s := range ss {
		n += int64(len(s)+15) &^ 15
	}
	return n
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
	hasAPI    uint8 = 1 << iota
	zeroAt          // Time was the zero time, which has no Unix ns
	zeroAPI         // APITime pointed at the zero time
	sharedObj       // obj is a preceding entry's (counted there)
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

// shareObject points c at an equal reference of a recent entry of r and
// reports whether it did.
func (r *record) shareObject(c *entry) bool {
	if c.obj == nil {
		return false
	}
	// The newest entries: the tail's, from its last chunk backwards, then
	// the head's last ones.
	k := 0
	check := func(e *entry) bool {
		if o := e.obj; o != nil && o != c.obj && *o == *c.obj {
			c.obj = o
			return true
		}
		return false
	}
	for ci := len(r.tail) - 1; ci >= 0; ci-- {
		ch := r.tail[ci]
		for i := len(ch) - 1; i >= 0; i-- {
			if k++; k > sameObjectWithin {
				return false
			}
			if check(&ch[i]) {
				return true
			}
		}
	}
	for i := len(r.head) - 1; i >= 0; i-- {
		if k++; k > sameObjectWithin {
			return false
		}
		if check(&r.head[i]) {
			return true
		}
	}
	return false
}

// add appends e to r within the bounds.
func (s *Store) add(r *record, ev Entry) {
	e := pack(ev)
	if r.shareObject(&e) {
		e.flags |= sharedObj
	}
	size := entryExtra(&e)
	if len(r.head) < r.headMax {
		was := cap(r.head)
		r.head = appendBounded(r.head, e, r.headMax)
		s.grow(r, size+int64(cap(r.head)-was)*entryBytes)
		s.fit()
		return
	}
	last := len(r.tail) - 1
	if last < 0 || len(r.tail[last]) == cap(r.tail[last]) {
		c := min(r.tailMax, tailChunk)
		r.tail = append(r.tail, make([]entry, 0, c))
		last++
		size += int64(c) * entryBytes
	}
	r.tail[last] = append(r.tail[last], e)
	r.tailLen++
	s.grow(r, size)
	if r.tailShown < r.tailMax {
		r.tailShown++
	} else {
		r.dropped++
		s.dropped.Add(1)
	}
	// Chunks wholly before the entries shown go (a snapshot in flight
	// keeps what it took).
	dropped := false
	for len(r.tail) > 1 && r.tailLen-len(r.tail[0]) >= r.tailShown {
		c := r.tail[0]
		r.tailLen -= len(c)
		r.tail[0] = nil
		r.tail = r.tail[1:]
		s.grow(r, -entriesSize(c))
		dropped = true
	}
	if dropped {
		s.countOrphans(r)
	}
	s.fit()
}

// appendBounded appends like append, growing the capacity no further than
// limit: a full head holds no spare room (append's doubling left 28% of a
// 100-entry half unused).
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
			s.grow(s.open[w], -relationSize)
		}
		s.gone[w] = slices.Delete(gone, 0, 1) // copies 255 strings: rare, bounded
	}
}

// relationSize is what the store counts for a relation (Relate): its
// entries in related and relatedOf; the uid is the informers'.
const relationSize = 2 * mapEntry

func (s *Store) relate(objectUID, episodeUID string) {
	if prev, ok := s.related[objectUID]; ok {
		if prev == episodeUID {
			return
		}
		delete(s.relatedOf[prev], objectUID)
		if r := s.open[prev]; r != nil {
			s.grow(r, -relationSize)
		}
	}
	s.related[objectUID] = episodeUID
	set := s.relatedOf[episodeUID]
	if set == nil {
		set = map[string]struct{}{}
		s.relatedOf[episodeUID] = set
	}
	set[objectUID] = struct{}{}
	if r := s.open[episodeUID]; r != nil {
		s.grow(r, relationSize)
	}
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

// Kinds returns the kinds of the retained episodes (canonical, as in
// Episode.Kind), sorted: the API resolves a custom resource's kind as
// written against them without reading any episode.
func (s *Store) Kinds() []string {
	s.mu.Lock()
	kinds := make([]string, 0, len(s.byKind))
	for k := range s.byKind {
		kinds = append(kinds, k)
	}
	s.mu.Unlock()
	slices.Sort(kinds)
	return kinds
}

// Select implements Source: under the lock it picks, sorts and cuts the
// matching episodes and takes a snapshot of each (their header, stages and
// entry slices, no entry copied); the Selection copies and sorts entries
// when asked, after the lock is released.
func (s *Store) Select(q Query, now time.Time) Selection {
	s.mu.Lock()
	defer s.mu.Unlock()
	var candidates []*record
	switch {
	case q.UID != "":
		candidates = s.byUID[q.UID]
	case q.TraceID != "":
		candidates = s.byTrace[q.TraceID]
	case q.Name != "":
		candidates = s.byName[objectKey{q.Kind, q.Namespace, q.Name}]
	case q.Kind != "":
		candidates = make([]*record, 0, len(s.byKind[q.Kind]))
		for r := range s.byKind[q.Kind] {
			candidates = append(candidates, r)
		}
	default:
		candidates = make([]*record, 0, len(s.open)+s.closedLive)
		for _, r := range s.open {
			candidates = append(candidates, r)
		}
		for _, r := range s.closed[s.first:] {
			if !r.evicted {
				candidates = append(candidates, r)
			}
		}
	}
	// Sorted on keys computed once per episode: the comparisons of a
	// full store's default list are then integer ones.
	type ranked struct {
		r      *record
		k1, k2 int64
	}
	byOpening := q.Name != "" && q.Sort != SortStart && q.Sort != SortDuration
	rk := make([]ranked, 0, len(candidates))
	for _, r := range candidates {
		if !q.matches(r) {
			continue
		}
		x := ranked{r: r}
		switch {
		case byOpening: // one object's episodes as they opened, newest first: its pages' order
		case q.Sort == SortStart:
			x.k1 = -startKey(r.ep.Start)
		default: // longest first, then newest
			x.k1, x.k2 = -int64(r.duration(now)), -startKey(r.ep.Start)
		}
		rk = append(rk, x)
	}
	slices.SortFunc(rk, func(a, b ranked) int {
		if c := cmp.Compare(a.k1, b.k1); c != 0 {
			return c
		}
		if c := cmp.Compare(a.k2, b.k2); c != 0 {
			return c
		}
		return cmp.Compare(b.r.seq, a.r.seq)
	})
	rs := make([]*record, len(rk))
	for i := range rk {
		rs[i] = rk[i].r
	}
	sel := &selection{total: len(rs)}
	if q.Limit > 0 && len(rs) > q.Limit {
		if byOpening {
			sel.next = rs[q.Limit-1].seq
		}
		rs = rs[:q.Limit]
	}
	sel.snaps = make([]snapshot, len(rs))
	for i, r := range rs {
		sel.snaps[i] = r.snapshot(now)
	}
	return sel
}

// Unix nanoseconds hold the times from 1677-09-21 to 2262-04-11; UnixNano
// is undefined outside (a zero time overflows).
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// startKey is t as Unix nanoseconds for sorting, clamped to ±MaxInt64
// (negated without overflow): a zero Start, or one out of that range,
// sorts as the earliest or the latest.
func startKey(t time.Time) int64 {
	switch {
	case t.Before(minUnixNano):
		return -math.MaxInt64
	case t.After(maxUnixNano):
		return math.MaxInt64
	}
	return max(t.UnixNano(), -math.MaxInt64)
}

// List implements Source: Select's episodes, every one copied.
func (s *Store) List(q Query, now time.Time) []Episode {
	return All(s.Select(q, now))
}

// Object implements Source: the retained episodes of the object, newest
// first (a recreated object's episodes follow the newer object's).
func (s *Store) Object(kind, namespace, name string, now time.Time) []Episode {
	return All(s.Select(Query{Kind: kind, Namespace: namespace, Name: name}, now))
}

func (q *Query) matches(r *record) bool {
	switch {
	case q.UID != "" && r.ep.UID != q.UID,
		q.TraceID != "" && r.ep.TraceID != q.TraceID,
		q.Namespace != "" && r.ep.Namespace != q.Namespace,
		q.Name != "" && r.ep.Name != q.Name,
		q.Kind != "" && r.ep.Kind != q.Kind,
		q.Outcome != "" && r.ep.Outcome != q.Outcome,
		q.State != "" && r.state() != q.State,
		q.Before != 0 && r.seq >= q.Before:
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

// snapshot is an episode as of a Select: its header and stages copied,
// its entries the slices of the moment (never modified once written).
type snapshot struct {
	ep   Episode
	head []entry
	tail [][]entry
	skip int // entries of tail no longer shown
}

// snapshot takes r as of now. s.mu is held: nothing but the header, the
// stages and the chunk list is copied.
func (r *record) snapshot(now time.Time) snapshot {
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
	// What a stage's At and DurationSeconds point to is never modified
	// (reach points them at new values): copied on read, not here.
	ep.Stages = slices.Clone(r.stages)
	ep.EntriesDropped = r.dropped
	return snapshot{ep: ep, head: r.head, tail: slices.Clone(r.tail), skip: r.tailLen - r.tailShown}
}

// header is the snapshot's episode without entries, its stages' times
// copied: the reader's to modify.
func (sn *snapshot) header() Episode {
	ep := sn.ep
	ep.Stages = slices.Clone(ep.Stages)
	for i := range ep.Stages {
		st := &ep.Stages[i]
		if st.At != nil {
			at, d := *st.At, *st.DurationSeconds
			st.At, st.DurationSeconds = &at, &d
		}
	}
	return ep
}

// episode returns the snapshot's episode with its entries, sharing nothing
// mutable with the store.
func (sn *snapshot) episode() Episode {
	ep := sn.header()
	n := len(sn.head) - sn.skip
	for _, c := range sn.tail {
		n += len(c)
	}
	// A shallow copy: what an entry points to (Object, Managers) is never
	// modified once added, and is shared with the readers, who must not
	// modify it either. Copying it too made List 4 times slower
	// (BenchmarkStoreList).
	ep.Entries = make([]Entry, 0, n)
	for i := range sn.head {
		ep.Entries = append(ep.Entries, sn.head[i].unpack())
	}
	skip := sn.skip
	for _, c := range sn.tail {
		for i := range c {
			if skip > 0 {
				skip--
				continue
			}
			ep.Entries = append(ep.Entries, c[i].unpack())
		}
	}
	// Entries come from several informers and the tracker: show them in
	// the order they happened on the exporter's clock. They mostly arrive
	// in it already.
	byTime := func(a, b Entry) int { return a.Time.Compare(b.Time) }
	if !slices.IsSortedFunc(ep.Entries, byTime) {
		slices.SortStableFunc(ep.Entries, byTime)
	}
	return ep
}

// selection is the Store's Selection.
type selection struct {
	snaps []snapshot
	total int
	next  uint64
}

func (s *selection) Len() int   { return len(s.snaps) }
func (s *selection) Total() int { return s.total }
func (s *selection) Next() uint64 {
	return s.next
}

func (s *selection) Episode(i int) Episode { return s.snaps[i].episode() }

func (s *selection) Header(i int) Episode {
	ep := s.snaps[i].header()
	ep.Entries = []Entry{}
	return ep
}
