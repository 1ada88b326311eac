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

// LegacyRecorderLimit: a gap of at least this long between two occurrences
// of a legacy (core/v1 recorder) Event may be the recorder's spam filter
// (25 events per object and source, then one per 5 minutes; client-go
// tools/record events_cache.go defaultSpamBurst, defaultSpamQPS = 1/300).
// Gaps are measured on the exporter's receipt of each write, which the
// recorder's queue and the watch delay by a variable amount: 10 s below the
// 300 s refill, so a refill received early is still the recorder's.
const LegacyRecorderLimit = 290 * time.Second

// seriesRecorderCount: an events.k8s.io series (client-go tools/events)
// writes occurrence 2 at once, then keeps counting in memory and writes the
// series only on its 30-minute refresh (refreshTime) or when it finishes
// after 6 idle minutes (finishTime): an increment from this count on is the
// recorder's timing, not the controller's back-off.
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
	// (series.lastObservedTime, deprecatedLastTimestamp or eventTime), used
	// only for Events delivered by a list cycle.
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
	cfg.Retention = max(cfg.Retention, cfg.FailingWindow)
	return &RetryTracker{
		cfg:         cfg,
		events:      map[string]retryEvent{},
		objects:     map[objectKey]objectState{},
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
	if listed {
		// Occurrences inside the gap are not counted; the next live one
		// must not be timed across it.
		if w.LastSeen.After(st.last) {
			st.last = w.LastSeen
		}
		st.lastLive = time.Time{}
		t.objects[ok] = st
		return res
	}
	res.Occurrences = added
	t.counts[key] += uint64(added)
	// The gap since the previous live occurrence on the same object,
	// reason and controller, when exactly one occurrence was added by a
	// live write and a previous live one is known. A gap the recorder timed
	// (at least LegacyRecorderLimit on a legacy Event, an events.k8s.io
	// series written after count 2) is counted apart instead of observed.
	if added == 1 && !st.lastLive.IsZero() {
		interval := max(at.Sub(st.lastLive), 0)
		ik := IntervalKey{Controller: key.Controller, Kind: key.Kind}
		if (w.Legacy && interval >= LegacyRecorderLimit) || (!w.Legacy && prev.count >= seriesRecorderCount) {
			t.limited[ik]++
		} else {
			t.observeInterval(ik, interval)
		}
	}
	// Several occurrences in one write were batched by the recorder: their
	// individual gaps are unknown, and none is observed.
	st.last, st.lastLive = at, at
	t.objects[ok] = st
	return res
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

// Failing returns the number of objects per label set whose last
// occurrence is younger than the failing window at now, and forgets objects
// whose last occurrence is older than the retention, then idle label sets
// (release).
func (t *RetryTracker) Failing(now time.Time) map[RetryKey]int {
	out := map[RetryKey]int{}
	for k, st := range t.objects {
		age := now.Sub(st.last)
		if age > t.cfg.Retention {
			delete(t.objects, k)
			continue
		}
		if age < t.cfg.FailingWindow {
			out[k.key]++
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

// Tracked returns the number of Event UIDs and objects held.
func (t *RetryTracker) Tracked() (events, objects int) { return len(t.events), len(t.objects) }
