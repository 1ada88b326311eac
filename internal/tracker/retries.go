package tracker

import (
	"time"
	"unicode/utf8"
)

// Retries seen from the API: the Warning Events controllers record when a
// sync fails. An Event stands for a series of occurrences; its count
// (events.k8s.io series.count, or the legacy recorder's deprecatedCount) grows
// as the recorder writes it again. The tracker keeps the last count per Event
// UID and counts the increase, so a watch event is a hint to re-read the
// count, never an occurrence in itself.

// LabelOther is the label value that values beyond a cap fold into: the
// controllers, reasons, kinds and label sets of the retries, values that are
// not valid UTF-8 or longer than maxLabelBytes at once, the field managers
// and manager pairs of the churn.
const LabelOther = "other"

// maxLabelBytes bounds one label value taken from an Event: reasons are
// short CamelCase words (FailedCreate, 12 bytes); anything longer is not a
// reason a dashboard can show.
const maxLabelBytes = 128

// RetryIntervalBuckets are the retry interval histogram's buckets in seconds.
// Client-go's per-item back-off doubles from 5 ms to 1000 s
// (workqueue.DefaultTypedControllerRateLimiter); 300 s is the legacy
// recorder's refill period, above which a gap says more about the recorder
// than about the controller; 1800 s the events.k8s.io recorder's series
// heartbeat.
var RetryIntervalBuckets = []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}

// The legacy recorder's spam filter (client-go tools/record events_cache.go,
// EventSourceObjectSpamFilter): a token bucket per source and object
// (getSpamKey: component, host, involved object, type; not the reason nor
// the message) of defaultSpamBurst tokens refilled at defaultSpamQPS. An
// occurrence finding the bucket empty is not written, but the correlator's
// EventLogger has already counted it (eventObserve runs before the
// filter), so the next written occurrence of that Event carries it in its
// count. The aggregator (EventAggregator: 10 distinct messages of one
// source, object, type and reason within 10 minutes) moves occurrences to
// a "(combined from similar events)" Event of the same object and reason,
// which the tracker times with the others; it drops nothing. So a gap
// closed by a write that adds one occurrence is the controller's own
// back-off, however long (the 5-minute refill included), unless the
// filter may have skipped occurrences of another Event of the same source
// and object in it: only when the bucket was empty after the gap's first
// write and that object has had Events of several messages or reasons.
// The tracker replays the bucket from the writes it receives.
const (
	LegacySpamBurst  = 25
	LegacySpamRefill = 300 * time.Second
	// legacyBucketSlack: receipt times differ from the recorder's clock by
	// its queue and the watch delivery; a bucket within 10 s of refill of a
	// token is taken as empty.
	legacyBucketSlack = 10 * time.Second
)

// The events.k8s.io recorder (client-go tools/events event_broadcaster.go)
// writes an Event at its first occurrence, patches series.count 2 at the
// second, then keeps counting in its cache and writes the series only from
// refreshExistingEventSeries, every refreshTime (30 minutes), and from
// finishSeries (every finishTime, 6 minutes) once lastObservedTime is older
// than 6 minutes, after which the series is dropped and the next
// occurrence is a new Event. So after a write of an open series (its
// lastObservedTime within 6 minutes of the write), nothing may be written
// for 30 minutes while the object keeps failing: it stays failing for
// SeriesFailingWindow (30 minutes and a 5-minute margin for the recorder's
// queue and the watch).
const (
	SeriesFinish        = 6 * time.Minute
	SeriesFailingWindow = 35 * time.Minute
)

// seriesRecorderCount: an events.k8s.io series writes occurrence 2 at
// once; an increment from this count on is the recorder's timing, not the
// controller's back-off.
const seriesRecorderCount = 2

// RecreatedAfter: a new Event UID created this long after its series
// started is a re-creation of an expired Event. Recorders write the first
// occurrence of a series as a create, so its creationTimestamp is the series
// start within the recorder's queueing and clock skew; a re-creation comes at
// least --event-ttl (1 h by default) after the last write of the expired one.
// client-go tools/record (recordToSink) creates the Event again when its
// PATCH gets NotFound, with the same name, the old firstTimestamp and count
// N+1; tools/events (recordEvent) does the same for a series.
const RecreatedAfter = 5 * time.Second

// RetryConfig configures a RetryTracker.
type RetryConfig struct {
	// FailingWindow: an object is failing while its last Warning
	// occurrence is younger than this.
	FailingWindow time.Duration
	// MaxReasons caps the distinct values of each of the controller,
	// reason and kind labels; later values fold into LabelOther.
	MaxReasons int
	// MaxLabelSets caps the (controller, reason, kind) label sets held: the
	// per-label caps alone allow MaxReasons^3 (10^6 at 100). Beyond it a new
	// label set folds into (other, other, other). 0: no cap.
	MaxLabelSets int
	// Retention is how long an object's last occurrence is kept for
	// intervals (at least FailingWindow); default 1 h, the API server's
	// default --event-ttl.
	Retention time.Duration
}

// Warning is one Warning Event as the tracker reads it.
type Warning struct {
	UID string
	// Controller, Reason and Kind are the label values, not folded yet.
	Controller, Reason, Kind string
	// Object identifies the regarding object (its UID, else
	// namespace/name); "" when the Event has none.
	Object string
	// Count is max(series.count, deprecatedCount, 1).
	Count int32
	// Legacy: written by the legacy (core/v1) recorder, whose spam filter
	// spaces occurrences 5 minutes apart after a burst.
	Legacy bool
	// Created is the Event's creationTimestamp and Started the start of its
	// series (max(eventTime, deprecatedFirstTimestamp)); zero when unknown.
	Created, Started time.Time
	// LastSeen is the API-side time of the last occurrence
	// (series.lastObservedTime, deprecatedLastTimestamp or eventTime): the
	// last occurrence of an Event delivered by a list cycle, and whether a
	// live write of an events.k8s.io series left it open.
	LastSeen time.Time
}

// RetryKey is the label set of the retries counter and the failing gauge.
type RetryKey struct{ Controller, Reason, Kind string }

// IntervalKey is the label set of the interval histogram.
type IntervalKey struct{ Controller, Kind string }

// RetryResult says what one Observe counted.
type RetryResult struct {
	Key         RetryKey
	Occurrences int
}

type retryEvent struct {
	count int32
	obj   objectKey
}

type objectKey struct {
	object string
	key    RetryKey
}

type objectState struct {
	last     time.Time // last occurrence, live receipt or API time
	lastLive time.Time // last live occurrence; zero after a gap
	// until: the object is failing before this time (its last occurrence
	// plus the window its recorder's cadence needs, failingUntil).
	until time.Time
	// since is the first occurrence of the current failing run: the run
	// goes on while each occurrence comes before the previous one's until.
	since time.Time
}

// bucketKey is the legacy spam filter's key as the tracker can see it:
// the source (the controller label) and the object, across reasons.
type bucketKey struct{ controller, object string }

// spamBucket replays the legacy recorder's token bucket from the writes
// received: tokens left right after the write at `at`, the Event UID of
// that write, and whether several Events share the bucket.
type spamBucket struct {
	tokens float64
	at     time.Time
	uid    string
	shared bool
}

// refill returns the tokens at t.
func (b spamBucket) refill(t time.Time) float64 {
	return min(float64(LegacySpamBurst), b.tokens+max(t.Sub(b.at), 0).Seconds()/LegacySpamRefill.Seconds())
}

// IntervalHistogram is a classic histogram over RetryIntervalBuckets:
// Counts[i] is the number of observations in (bucket i-1, bucket i],
// Counts[len(buckets)] those above the last bucket.
type IntervalHistogram struct {
	Counts []uint64
	Count  uint64
	Sum    float64
}

// RetryTracker counts retry occurrences from Warning Events. It is not safe
// for concurrent use.
type RetryTracker struct {
	cfg       RetryConfig
	events    map[string]retryEvent
	objects   map[objectKey]objectState
	buckets   map[bucketKey]spamBucket
	counts    map[RetryKey]uint64
	intervals map[IntervalKey]*IntervalHistogram
	limited   map[IntervalKey]uint64
	// Label values admitted so far, per label.
	controllers, reasons, kinds map[string]struct{}
	// seen holds every label set in use with its last occurrence; a label
	// set idle for the retention, with no Event or object left on it, is
	// released with its values (release).
	seen map[RetryKey]time.Time
}

// NewRetryTracker returns an empty tracker.
func NewRetryTracker(cfg RetryConfig) *RetryTracker {
	if cfg.Retention == 0 {
		cfg.Retention = time.Hour
	}
	cfg.Retention = max(cfg.Retention, cfg.FailingWindow, SeriesFailingWindow)
	return &RetryTracker{
		cfg:         cfg,
		events:      map[string]retryEvent{},
		objects:     map[objectKey]objectState{},
		buckets:     map[bucketKey]spamBucket{},
		counts:      map[RetryKey]uint64{},
		intervals:   map[IntervalKey]*IntervalHistogram{},
		limited:     map[IntervalKey]uint64{},
		controllers: map[string]struct{}{},
		reasons:     map[string]struct{}{},
		kinds:       map[string]struct{}{},
		seen:        map[RetryKey]time.Time{},
	}
}

// otherKey is the label set that label sets beyond MaxLabelSets fold into.
var otherKey = RetryKey{Controller: LabelOther, Reason: LabelOther, Kind: LabelOther}

// fold returns v, or LabelOther once set holds max values and v is not one
// of them, or v is not a fit label value.
func fold(set map[string]struct{}, v string, limit int) string {
	if _, ok := set[v]; ok {
		return v
	}
	if len(set) >= limit || len(v) > maxLabelBytes || !utf8.ValidString(v) {
		return LabelOther
	}
	set[v] = struct{}{}
	return v
}

// Observe reads one Warning Event received at `at`. listed is true for an
// Event delivered by a list cycle (the informer's initial list, a relist, a
// replayed gap): its count becomes the baseline and nothing is counted,
// since the occurrences it adds happened while the exporter did not watch
// (or were counted before a restart).
func (t *RetryTracker) Observe(w Warning, seen Seen) RetryResult {
	at, listed := seen.At, !seen.Live
	prev, known := t.events[w.UID]
	var key RetryKey
	if known {
		key = prev.obj.key
	} else {
		key = RetryKey{
			Controller: fold(t.controllers, w.Controller, t.cfg.MaxReasons),
			Reason:     fold(t.reasons, w.Reason, t.cfg.MaxReasons),
			Kind:       fold(t.kinds, w.Kind, t.cfg.MaxReasons),
		}
		if _, ok := t.seen[key]; !ok && t.cfg.MaxLabelSets > 0 && t.labelSets() >= t.cfg.MaxLabelSets {
			key = otherKey
		}
	}
	t.seen[key] = maxTime(t.seen[key], at)
	ok := objectKey{object: w.Object, key: key}
	count := max(w.Count, 1)
	t.events[w.UID] = retryEvent{count: count, obj: ok}
	res := RetryResult{Key: key}
	added := int(count - prev.count) // prev.count is 0 for a new UID
	if !known && !listed && added > 1 && recreation(w) {
		// An expired Event written again: one new occurrence, the rest
		// were counted (or not watched) under the old UID.
		added = 1
	}
	if added <= 0 {
		return res // same count (another field changed) or lower: nothing new
	}
	if w.Object == "" {
		// No regarding object (kind none): the occurrences count, but
		// Events of unrelated sources are no object's retries, so no
		// interval joins them and no object is failing.
		if !listed {
			res.Occurrences = added
			t.counts[key] += uint64(added)
		}
		return res
	}
	st := t.objects[ok]
	bk := bucketKey{controller: key.Controller, object: w.Object}
	if listed {
		// Occurrences inside the gap are not counted; the next live one
		// must not be timed across it, nor a failing run carried over it
		// (a restart must not invent a long failure: the run restarts at
		// the Event's last occurrence).
		if w.LastSeen.After(st.last) {
			st.last = w.LastSeen
		}
		st.lastLive = time.Time{}
		if until := t.failingUntil(w, st.last, st.last); until.After(st.until) {
			if !st.since.IsZero() && !st.last.After(st.until) {
				st.until = until
			} else {
				st.since, st.until = st.last, until
			}
		}
		t.objects[ok] = st
		if w.Legacy {
			// The bucket is unknown: as drained by the Event's count.
			b, had := t.buckets[bk]
			t.buckets[bk] = spamBucket{tokens: max(float64(LegacySpamBurst-int(count)), 0), at: st.last,
				uid: w.UID, shared: had && (b.shared || b.uid != w.UID)}
		}
		return res
	}
	res.Occurrences = added
	t.counts[key] += uint64(added)
	// The gap since the previous live occurrence on the same object,
	// reason and controller, when exactly one occurrence was added by a
	// live write and a previous live one is known. A gap the recorder may
	// have timed (a legacy Event whose spam bucket was empty after the
	// previous write, an events.k8s.io series written after count 2) is
	// counted apart instead of observed.
	b, hadBucket := t.buckets[bk]
	if added == 1 && !st.lastLive.IsZero() {
		interval := max(at.Sub(st.lastLive), 0)
		ik := IntervalKey{Controller: key.Controller, Kind: key.Kind}
		spamLimited := w.Legacy && hadBucket && (b.shared || b.uid != w.UID) &&
			b.tokens < 1+legacyBucketSlack.Seconds()/LegacySpamRefill.Seconds()
		if spamLimited || (!w.Legacy && prev.count >= seriesRecorderCount) {
			t.limited[ik]++
		} else {
			t.observeInterval(ik, interval)
		}
	}
	if w.Legacy {
		// This write took a token (the skipped occurrences it carries took
		// none).
		tokens := float64(LegacySpamBurst)
		if hadBucket {
			tokens = b.refill(at)
		}
		t.buckets[bk] = spamBucket{tokens: max(tokens-1, 0), at: at, uid: w.UID,
			shared: hadBucket && (b.shared || b.uid != w.UID)}
	}
	// Several occurrences in one write were batched by the recorder: their
	// individual gaps are unknown, and none is observed. The last of them
	// happened at the Event's own last-occurrence time, when it is before
	// the receipt (an events.k8s.io refresh or finish writes a series long
	// after; seen: a third occurrence written 12 minutes later by
	// finishSeries, collectors/retries/testdata/recorders.jsonl).
	last := at
	if (added > 1 || finished(w, at)) && !w.LastSeen.IsZero() && w.LastSeen.Before(at) && w.LastSeen.After(st.last) {
		last = w.LastSeen
	}
	if st.since.IsZero() || last.After(st.until) {
		st.since = last // a new failing run
	}
	if finished(w, at) {
		// The recorder wrote a series that had no occurrence for
		// SeriesFinish: its last occurrence ends the failing, whatever an
		// earlier write of the series promised.
		st.until = t.failingUntil(w, at, last)
	} else {
		st.until = maxTime(st.until, t.failingUntil(w, at, last))
	}
	st.last, st.lastLive = last, at
	t.objects[ok] = st
	return res
}

// failingUntil is when an object stops failing without a further write
// of w, received at `at` with its last occurrence at last: the failing
// window after the last occurrence, or, for an events.k8s.io series the
// write left open (lastObservedTime within SeriesFinish of the write), the
// recorder's refresh period after the write: it writes nothing before,
// however often the object fails.
func (t *RetryTracker) failingUntil(w Warning, at, last time.Time) time.Time {
	until := last.Add(t.cfg.FailingWindow)
	if !w.Legacy && w.Count >= seriesRecorderCount && !finished(w, at) {
		until = maxTime(until, at.Add(SeriesFailingWindow))
	}
	return until
}

// finished says whether a write of an events.k8s.io series received at
// `at` shows it ended: no occurrence for SeriesFinish before the write
// (finishSeries writes the final count of such a series and drops it).
func finished(w Warning, at time.Time) bool {
	return !w.Legacy && w.Count >= seriesRecorderCount && !w.LastSeen.IsZero() && at.Sub(w.LastSeen) > SeriesFinish
}

// recreation says whether a new Event UID is an expired Event created again
// with its accumulated count (RecreatedAfter).
func recreation(w Warning) bool {
	return !w.Created.IsZero() && !w.Started.IsZero() && w.Created.Sub(w.Started) > RecreatedAfter
}

func (t *RetryTracker) observeInterval(k IntervalKey, d time.Duration) {
	h := t.intervals[k]
	if h == nil {
		h = &IntervalHistogram{Counts: make([]uint64, len(RetryIntervalBuckets)+1)}
		t.intervals[k] = h
	}
	s := d.Seconds()
	i := 0
	for i < len(RetryIntervalBuckets) && s > RetryIntervalBuckets[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += s
}

// Delete forgets an Event (deleted, or expired after the API server's
// --event-ttl). The object's last occurrence stays for the failing window.
func (t *RetryTracker) Delete(uid string) { delete(t.events, uid) }

// Counts returns the occurrences counted per label set. The map is the
// tracker's own: read it under the caller's lock, do not keep it.
func (t *RetryTracker) Counts() map[RetryKey]uint64 { return t.counts }

// Intervals returns the interval histograms (the tracker's own).
func (t *RetryTracker) Intervals() map[IntervalKey]*IntervalHistogram { return t.intervals }

// RecorderLimited returns the gaps left out of the histograms as the legacy
// recorder's doing (the tracker's own map).
func (t *RetryTracker) RecorderLimited() map[IntervalKey]uint64 { return t.limited }

// Failing returns, per label set, the number of objects failing at now
// (FailingSince), and forgets objects whose last occurrence is older than
// the retention, then idle label sets (release).
func (t *RetryTracker) Failing(now time.Time) map[RetryKey]int {
	out := map[RetryKey]int{}
	for k, n := range t.FailingSince(now) {
		out[k] = n.Objects
	}
	return out
}

// FailingObjects is what FailingSince reports per label set.
type FailingObjects struct {
	// Objects failing now: their last occurrence (or an open
	// events.k8s.io series' last write) is recent enough for their
	// recorder's cadence (failingUntil).
	Objects int
	// Longest is the longest failing run among them, from its first
	// occurrence to its last: how long a controller has been failing on
	// one object, as far as its Warning Events show.
	Longest time.Duration
}

// FailingSince returns the failing objects per label set at now and
// forgets objects whose last occurrence is older than the retention, then
// idle label sets (release).
func (t *RetryTracker) FailingSince(now time.Time) map[RetryKey]FailingObjects {
	out := map[RetryKey]FailingObjects{}
	for k, st := range t.objects {
		if now.Sub(st.last) > t.cfg.Retention && !now.Before(st.until) {
			delete(t.objects, k)
			continue
		}
		if now.Before(st.until) {
			f := out[k.key]
			f.Objects++
			f.Longest = max(f.Longest, st.last.Sub(st.since))
			out[k.key] = f
		}
	}
	for bk, b := range t.buckets {
		// A bucket full again is the recorder's initial state.
		if b.refill(now) >= float64(LegacySpamBurst) {
			delete(t.buckets, bk)
		}
	}
	t.release(now)
	return out
}

// release forgets the label sets whose last occurrence is older than the
// retention and that no held Event or object uses (their Events expired):
// their series go, and their values no longer count against the caps.
func (t *RetryTracker) release(now time.Time) {
	var idle []RetryKey
	for k, last := range t.seen {
		if now.Sub(last) > t.cfg.Retention {
			idle = append(idle, k)
		}
	}
	if len(idle) == 0 {
		return
	}
	used := make(map[RetryKey]bool, len(t.seen))
	for _, e := range t.events {
		used[e.obj.key] = true
	}
	for ok := range t.objects {
		used[ok.key] = true
	}
	released := false
	for _, k := range idle {
		if used[k] {
			continue
		}
		delete(t.seen, k)
		delete(t.counts, k)
		released = true
	}
	if !released {
		return
	}
	// Rebuild the admitted values and the interval keys from the label
	// sets left (an interval key may be shared by another reason).
	clear(t.controllers)
	clear(t.reasons)
	clear(t.kinds)
	for k := range t.seen {
		t.controllers[k.Controller] = struct{}{}
		t.reasons[k.Reason] = struct{}{}
		t.kinds[k.Kind] = struct{}{}
	}
	for ik := range t.intervals {
		if !t.intervalUsed(ik) {
			delete(t.intervals, ik)
		}
	}
	for ik := range t.limited {
		if !t.intervalUsed(ik) {
			delete(t.limited, ik)
		}
	}
}

func (t *RetryTracker) intervalUsed(ik IntervalKey) bool {
	for k := range t.seen {
		if k.Controller == ik.Controller && k.Kind == ik.Kind {
			return true
		}
	}
	return false
}

// labelSets is the number of label sets held, (other, other, other) aside.
func (t *RetryTracker) labelSets() int {
	if _, ok := t.seen[otherKey]; ok {
		return len(t.seen) - 1
	}
	return len(t.seen)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Known says whether the label set k is held (not released).
func (t *RetryTracker) Known(k RetryKey) bool {
	_, ok := t.seen[k]
	return ok
}

// Tracked returns the number of Event UIDs and objects held (spam
// buckets are at most one per object and controller, and go when full).
func (t *RetryTracker) Tracked() (events, objects int) { return len(t.events), len(t.objects) }
