package collectors

import (
	"log/slog"
	"sync"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// Outbox is the lock of a collector that feeds the episode sinks and the
// timeline store (rollouts, resources), and the queue of what it sends
// them. What a handler or a Tick queues while it holds the lock goes out
// when it unlocks, after the lock is released: a slow sink or a store
// call in progress never holds up the collector's other handlers nor its
// scrape (Episodes), which take the lock. With the store called under
// the collector's lock, 8 API clients reading the timelines made a scrape
// wait 0.31 s on average, 0.55 s at worst, and a store call 322 ms (issue
// 25): the readers held the store's lock, the handlers waited for it, and
// the scrape for them.
//
// The store and the sinks receive one collector's queue in the order it
// was queued (an EpisodeOpened before the evidence of its episode), one
// batch at a time, and every section's own queue is out before its Unlock
// returns: a handler sees the store as of its own last write, as when it
// called the store itself.
//
// Observe and the evidence methods (Add, Relate, AddRelated, Gone, Block)
// are called with the lock held; Open without it.
type Outbox struct {
	ep     *Episodes // metrics, and the sinks of episode events
	logger *slog.Logger
	tl     Evidence // nil: evidence is dropped

	mu   sync.Mutex // the collector's lock
	ops  []op       // queued under mu, oldest first
	mark int        // len(ops) when mu was taken: the section queued what is past it

	// deliver is held while queued ops go out: whoever takes it first
	// takes everything queued so far, so batches go out in queue order.
	deliver sync.Mutex
	// spare is the array of the last batch sent, cleared (guarded by
	// deliver): ops and spare swap at every batch. ops holds what was
	// queued since the last batch was taken: at most one section per
	// goroutine feeding the collector (an informer's handler goroutine,
	// the Tick), since each waits in Unlock until its own are out. A
	// section is one handler call or one Tick: a few ops, one per pod of
	// a workload whose episode opens (its relations), two per open
	// episode at a node's readiness change (the Tick's events are one).
	spare []op
}

// keptOps bounds the capacity of the arrays an Outbox keeps between
// batches (an op is 240 bytes): a larger one, after a node's readiness
// changed with thousands of rollouts in flight, goes back to the heap.
const keptOps = 1024

type opKind uint8

const (
	opEpisodes opKind = iota // evs to every sink
	opAdd
	opRelate
	opAddRelated
	opGone
	opBlock
)

// op is one queued call. uid is the episode's (Add, Block) or the
// object's (Relate, AddRelated, Gone); a Block's stage, reason and time
// are in entry.
type op struct {
	kind    opKind
	uid     string
	episode string // Relate
	entry   timeline.Entry
	evs     []tracker.Event
}

// NewOutbox returns the outbox of a collector feeding ep: its metrics
// (updated at once, under the lock) and its sinks. logger says which
// collector recovered an episode.
func NewOutbox(ep *Episodes, logger *slog.Logger) *Outbox {
	return &Outbox{ep: ep, logger: logger}
}

// SetTimelines makes the outbox deliver the evidence to tl (before the
// collector starts).
func (o *Outbox) SetTimelines(tl Evidence) { o.tl = tl }

// Timelines reports whether a timeline store receives the evidence:
// collectors spare building it otherwise.
func (o *Outbox) Timelines() bool { return o.tl != nil }

// Lock takes the collector's lock.
func (o *Outbox) Lock() {
	o.mu.Lock()
	o.mark = len(o.ops)
}

// Unlock releases the collector's lock, then delivers what the section
// queued (and what others queued before it), unless another goroutine
// already has.
func (o *Outbox) Unlock() {
	queued := len(o.ops) > o.mark
	o.mu.Unlock()
	if queued {
		o.flush()
	}
}

// Open reports whether uid has an open episode in the timeline store, once
// everything queued before has reached it. It asks the store: call it
// without the lock (it takes it).
func (o *Outbox) Open(uid string) bool {
	if o.tl == nil {
		return false
	}
	o.flush()
	return o.tl.Open(uid)
}

// flush sends everything queued, oldest first, after any batch going out.
func (o *Outbox) flush() {
	o.deliver.Lock()
	defer o.deliver.Unlock()
	o.mu.Lock()
	ops := o.ops
	// The spare array is the queue's now: spare lets go of it before the
	// batch goes out, or a send that panics would leave it the spare too,
	// and the next flush would send a batch out of the very array the
	// queue fills while it goes out.
	o.ops, o.spare = o.spare, nil
	o.mu.Unlock()
	o.send(ops)
	clear(ops) // nothing pinned: entries, events
	if cap(ops) > keptOps {
		ops = nil
	}
	o.spare = ops[:0]
}

func (o *Outbox) send(ops []op) {
	for i := range ops {
		p := &ops[i]
		switch p.kind {
		case opEpisodes:
			for _, s := range o.ep.episodeSinks() {
				s.ObserveEpisodes(p.evs)
			}
		case opAdd:
			o.tl.Add(p.uid, p.entry)
		case opRelate:
			o.tl.Relate(p.uid, p.episode)
		case opAddRelated:
			o.tl.AddRelated(p.uid, p.entry)
		case opGone:
			o.tl.Gone(p.uid)
		case opBlock:
			o.tl.Block(p.uid, p.entry.Stage, p.entry.Reason, p.entry.Time)
		}
	}
}

// Observe turns tracker events into metric updates now (Episodes.Observe)
// and queues them for the episode sinks.
func (o *Outbox) Observe(evs []tracker.Event) {
	if len(evs) == 0 {
		return
	}
	o.ep.Observe(evs, o.logger)
	o.ops = append(o.ops, op{kind: opEpisodes, evs: evs})
}

// The evidence calls of Evidence, queued; dropped without a store.

// Add queues Evidence.Add.
func (o *Outbox) Add(uid string, e timeline.Entry) {
	o.evidence(op{kind: opAdd, uid: uid, entry: e})
}

// Relate queues Evidence.Relate.
func (o *Outbox) Relate(objectUID, episodeUID string) {
	o.evidence(op{kind: opRelate, uid: objectUID, episode: episodeUID})
}

// AddRelated queues Evidence.AddRelated.
func (o *Outbox) AddRelated(objectUID string, e timeline.Entry) {
	o.evidence(op{kind: opAddRelated, uid: objectUID, entry: e})
}

// Gone queues Evidence.Gone.
func (o *Outbox) Gone(objectUID string) {
	o.evidence(op{kind: opGone, uid: objectUID})
}

// Block queues Evidence.Block.
func (o *Outbox) Block(uid, stage, reason string, now time.Time) {
	o.evidence(op{kind: opBlock, uid: uid, entry: timeline.Entry{Stage: stage, Reason: reason, Time: now}})
}

func (o *Outbox) evidence(p op) {
	if o.tl != nil {
		o.ops = append(o.ops, p)
	}
}
