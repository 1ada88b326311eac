package tracker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var r0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// retryStep is one Event delivery in a retries timeline.
type retryStep struct {
	at     time.Duration // after r0
	w      Warning
	listed bool
	del    bool
	// want
	occ      int
	interval time.Duration
	limited  bool
}

func quota(uid string, count int32) Warning {
	return Warning{UID: uid, Controller: "replicaset-controller", Reason: "FailedCreate", Kind: "ReplicaSet", Object: "rs-1", Count: count, Legacy: true}
}

func sched(uid string, count int32) Warning {
	return Warning{UID: uid, Controller: "default-scheduler", Reason: "FailedScheduling", Kind: "Pod", Object: "pod-1", Count: count}
}

// recreated sets an Event's creationTimestamp and series start (eventTime
// or deprecatedFirstTimestamp), both after r0.
func recreated(w Warning, created, started time.Duration) Warning {
	w.Created, w.Started = r0.Add(created), r0.Add(started)
	return w
}

// burst25 is what client-go tools/record writes for 25 occurrences one
// second apart: 25 writes, count 1 to 25, draining the spam bucket; then
// the steps after.
func burst25(uid string, w func(string, int32) Warning, after []retryStep) []retryStep {
	steps := []retryStep{{at: 0, w: w(uid, 1), occ: 1}}
	for n := int32(2); n <= 25; n++ {
		steps = append(steps, retryStep{at: time.Duration(n-1) * time.Second, w: w(uid, n), occ: 1, interval: time.Second})
	}
	return append(steps, after...)
}

func TestRetryTrackerTimelines(t *testing.T) {
	s := time.Second
	cases := []struct {
		name  string
		steps []retryStep
		total uint64 // occurrences counted for the first retryStep's key
	}{{
		name: "legacy event counted per count increase, intervals between live occurrences",
		steps: []retryStep{
			{at: 0, w: quota("e1", 1), occ: 1},
			{at: 1 * s, w: quota("e1", 2), occ: 1, interval: 1 * s},
			{at: 3 * s, w: quota("e1", 3), occ: 1, interval: 2 * s},
			{at: 7 * s, w: quota("e1", 4), occ: 1, interval: 4 * s},
		},
		total: 4,
	}, {
		name: "the same count again (another field written) counts nothing",
		steps: []retryStep{
			{at: 0, w: quota("e1", 1), occ: 1},
			{at: 1 * s, w: quota("e1", 1)},
		},
		total: 1,
	}, {
		name: "distinct messages are distinct Events: the interval spans them (same object and reason)",
		steps: []retryStep{
			{at: 0, w: quota("e1", 1), occ: 1},
			{at: 2 * s, w: quota("e2", 1), occ: 1, interval: 2 * s},
		},
		total: 2,
	}, {
		name: "initial list sets the baseline: nothing counted, the next live occurrence counts one and is not timed",
		steps: []retryStep{
			{at: 0, w: quota("e1", 7), listed: true},
			{at: 5 * s, w: quota("e1", 8), occ: 1},
			{at: 9 * s, w: quota("e1", 9), occ: 1, interval: 4 * s},
		},
		total: 2,
	}, {
		name: "relist after a gap: the gap's occurrences are not counted and no interval spans the gap",
		steps: []retryStep{
			{at: 0, w: quota("e1", 1), occ: 1},
			{at: 1 * s, w: quota("e1", 2), occ: 1, interval: 1 * s},
			{at: 60 * s, w: quota("e1", 5), listed: true},
			{at: 61 * s, w: quota("e1", 6), occ: 1},
		},
		total: 3,
	}, {
		name: "a relist with unchanged counts changes nothing",
		steps: []retryStep{
			{at: 0, w: quota("e1", 3), occ: 3},
			{at: 10 * s, w: quota("e1", 3), listed: true},
			{at: 11 * s, w: quota("e1", 4), occ: 1, interval: 11 * s},
		},
		total: 4,
	}, {
		// client-go tools/record: the PATCH of occurrence 37 finds the
		// Event expired (NotFound) and creates it again under the same
		// name with count 37 and the series' old firstTimestamp.
		name: "Event re-created after expiry with its accumulated count 37 counts one occurrence",
		steps: []retryStep{
			{at: 0, w: quota("e1", 36), listed: true},
			{at: 3600 * s, del: true, w: quota("e1", 0)},
			{at: 3700 * s, w: recreated(quota("e1b", 37), 3700*s, 0), occ: 1},
			{at: 3701 * s, w: recreated(quota("e1b", 38), 3700*s, 0), occ: 1, interval: 1 * s},
		},
		total: 2,
	}, {
		name: "tools/events series re-created after expiry (count 37, eventTime the series start) counts one",
		steps: []retryStep{
			{at: 3700 * s, w: recreated(sched("s1b", 37), 3700*s, 0), occ: 1},
		},
		total: 1,
	}, {
		name: "a new Event with count 3 created with its first occurrence is counted in full",
		steps: []retryStep{
			{at: 10 * s, w: recreated(sched("s1", 3), 10*s, 9*s), occ: 3},
		},
		total: 3,
	}, {
		name: "Event expired and recreated (new UID) counts from 1",
		steps: []retryStep{
			{at: 0, w: quota("e1", 20), listed: true},
			{at: 1 * s, del: true, w: quota("e1", 0)},
			{at: 2 * s, w: quota("e1b", 1), occ: 1},
		},
		total: 1,
	}, {
		name: "batched write (count +3 at once, events.k8s.io heartbeat): counted, not timed",
		steps: []retryStep{
			{at: 0, w: sched("s1", 1), occ: 1},
			{at: 1 * s, w: sched("s1", 2), occ: 1, interval: 1 * s},
			{at: 1801 * s, w: sched("s1", 5), occ: 3},
		},
		total: 5,
	}, {
		// client-go tools/record writes every occurrence (+1) while the
		// spam bucket (25, one token per 300 s) holds a token; an occurrence
		// finding it empty is not written but counted in the Event's count
		// by the correlator's EventLogger, so a +1 write after any gap on
		// the object's only Event is the controller's own back-off (the
		// sandbox's controller with a 320 s back-off: every gap +1).
		name: "legacy +1 gap of 320 s after the burst of 25 is the controller's back-off: observed",
		steps: burst25("e1", quota, []retryStep{
			{at: 24*s + 320*s, w: quota("e1", 26), occ: 1, interval: 320 * s},
			{at: 24*s + 640*s, w: quota("e1", 27), occ: 1, interval: 320 * s},
		}),
		total: 27,
	}, {
		// The filter skipped occurrences: the next written one carries
		// them (count +30): counted, not timed.
		name: "legacy write after the spam filter skipped occurrences: counted in full, not timed",
		steps: burst25("e1", quota, []retryStep{
			{at: 24*s + 300*s, w: quota("e1", 55), occ: 30},
		}),
		total: 55,
	}, {
		// Two messages on one object and source share the spam bucket
		// (getSpamKey has no reason nor message): after the burst drained it
		// on e1, a +1 write of e2 300 s later may follow skipped
		// occurrences of e1: counted apart. With a token left (burst not
		// drained) the same gap is the controller's.
		name: "legacy +1 gap of another Event after its bucket drained: recorder-limited",
		steps: burst25("e1", quota, []retryStep{
			{at: 24*s + 300*s, w: quota("e2", 1), occ: 1, interval: 300 * s, limited: true},
		}),
		total: 26,
	}, {
		name: "legacy +1 gap of another Event with tokens left: observed",
		steps: []retryStep{
			{at: 0, w: quota("e1", 1), occ: 1},
			{at: 300 * s, w: quota("e2", 1), occ: 1, interval: 300 * s},
		},
		total: 2,
	}, {
		// client-go tools/events: after series.count 2 the recorder writes
		// the series only on its 30-minute refresh or when it finishes
		// (6 idle minutes): the gap is the recorder's, whatever the count.
		name: "events.k8s.io series increments after count 2 are recorder writes: counted apart",
		steps: []retryStep{
			{at: 0, w: sched("s1", 1), occ: 1},
			{at: 10 * s, w: sched("s1", 2), occ: 1, interval: 10 * s},
			{at: 370 * s, w: sched("s1", 3), occ: 1, interval: 360 * s, limited: true},
		},
		total: 3,
	}, {
		name: "events.k8s.io gap of 300 s is the controller's own: observed",
		steps: []retryStep{
			{at: 0, w: sched("s1", 1), occ: 1},
			{at: 300 * s, w: sched("s1", 2), occ: 1, interval: 300 * s},
		},
		total: 2,
	}, {
		name: "a count without series (0) is one occurrence",
		steps: []retryStep{
			{at: 0, w: sched("s1", 0), occ: 1},
		},
		total: 1,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
			var key RetryKey
			for i, st := range c.steps {
				if st.del {
					tr.Delete(st.w.UID)
					continue
				}
				// The interval is read from the histogram and the
				// recorder-limited counter: their changes by this step.
				ik := IntervalKey{Controller: st.w.Controller, Kind: st.w.Kind}
				var count0 uint64
				var sum0 float64
				if h := tr.Intervals()[ik]; h != nil {
					count0, sum0 = h.Count, h.Sum
				}
				limited0 := tr.RecorderLimited()[ik]
				res := tr.Observe(st.w, Seen{At: r0.Add(st.at), Live: !st.listed})
				if i == 0 {
					key = res.Key
				}
				var interval time.Duration
				if h := tr.Intervals()[ik]; h != nil && h.Count > count0 {
					interval = time.Duration((h.Sum - sum0) * float64(time.Second))
				}
				limited := tr.RecorderLimited()[ik] > limited0
				wantInterval := st.interval
				if st.limited {
					wantInterval = 0 // counted apart, not observed
				}
				if res.Occurrences != st.occ || interval != wantInterval || limited != st.limited {
					t.Errorf("retryStep %d (+%v %s count %d listed=%v): got occ %d interval %v limited %v, want %d %v %v",
						i, st.at, st.w.UID, st.w.Count, st.listed, res.Occurrences, interval, limited, st.occ, wantInterval, st.limited)
				}
			}
			if got := tr.Counts()[key]; got != c.total {
				t.Errorf("total %v = %d, want %d", key, got, c.total)
			}
		})
	}
}

func TestRetryIntervalHistogram(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	// Back-off doubling from 0.5 s: 0.5 1 2 4 8 16 32 64 128 s.
	at := r0
	tr.Observe(quota("e1", 1), LiveAt(at))
	gap := 500 * time.Millisecond
	for n := int32(2); n <= 10; n++ {
		at = at.Add(gap)
		tr.Observe(quota("e1", n), LiveAt(at))
		gap *= 2
	}
	h := tr.Intervals()[IntervalKey{"replicaset-controller", "ReplicaSet"}]
	if h == nil {
		t.Fatal("no histogram")
	}
	// buckets 1 2 5 10 30 60 120 300 600 1800 +Inf
	want := []uint64{2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}
	for i := range want {
		if h.Counts[i] != want[i] {
			t.Errorf("bucket %d: got %d, want %d (all %v)", i, h.Counts[i], want[i], h.Counts)
		}
	}
	if h.Count != 9 || h.Sum != 255.5 {
		t.Errorf("count %d sum %v, want 9 and 255.5", h.Count, h.Sum)
	}
}

func TestRetryFailingWindow(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	k := RetryKey{"replicaset-controller", "FailedCreate", "ReplicaSet"}
	tr.Observe(quota("e1", 1), LiveAt(r0))
	w2 := quota("e2", 1)
	w2.Object = "rs-2"
	tr.Observe(w2, LiveAt(r0.Add(5*time.Minute)))
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{5 * time.Minute, 2}, {10*time.Minute - time.Nanosecond, 2}, {10 * time.Minute, 1}, {15 * time.Minute, 0}} {
		if got := tr.Failing(r0.Add(c.at))[k]; got != c.want {
			t.Errorf("+%v: failing %d, want %d", c.at, got, c.want)
		}
	}
	// A listed Event makes its object failing from its own API time
	// (restart: the state is recovered, nothing is counted).
	tr2 := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	w := quota("e1", 4)
	w.LastSeen = r0.Add(-9 * time.Minute)
	tr2.Observe(w, ListedAt(r0))
	if got := tr2.Failing(r0)[k]; got != 1 {
		t.Errorf("listed, last seen 9 min ago: failing %d, want 1", got)
	}
	if got := tr2.Failing(r0.Add(time.Minute))[k]; got != 0 {
		t.Errorf("listed, last seen 10 min ago: failing %d, want 0", got)
	}
	if n := tr2.Counts()[k]; n != 0 {
		t.Errorf("listed counted %d", n)
	}
	// Retention forgets the object.
	if _, objs := tr.Tracked(); objs != 2 {
		t.Fatalf("objects %d, want 2", objs)
	}
	tr.Failing(r0.Add(2 * time.Hour))
	if _, objs := tr.Tracked(); objs != 0 {
		t.Errorf("objects after retention %d, want 0", objs)
	}
}

// An events.k8s.io series (client-go tools/events) is written at count 2
// and then only on the recorder's 30-minute refresh while the object keeps
// failing: the object stays failing SeriesFailingWindow after the write
// that left the series open; a write showing the series finished
// (lastObservedTime 6 minutes or more before it) keeps it failing only the
// failing window after that last occurrence. A singleton Event (count 1)
// keeps the failing window.
func TestRetryFailingAcrossTheSeriesCadence(t *testing.T) {
	k := RetryKey{"default-scheduler", "FailedScheduling", "Pod"}
	series := func(uid string, count int32, lastObserved time.Duration) Warning {
		w := sched(uid, count)
		w.LastSeen = r0.Add(lastObserved)
		return w
	}
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	tr.Observe(series("s1", 1, 0), LiveAt(r0))
	tr.Observe(series("s1", 2, 10*time.Second), LiveAt(r0.Add(10*time.Second)))
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{11 * time.Minute, 1}, {30 * time.Minute, 1}, {35*time.Minute + 10*time.Second - time.Nanosecond, 1}, {35*time.Minute + 10*time.Second, 0}} {
		if got := tr.Failing(r0.Add(c.at))[k]; got != c.want {
			t.Errorf("open series, +%v: failing %d, want %d", c.at, got, c.want)
		}
	}
	// The refresh at 30 m carries 180 occurrences, the last a second
	// before: open again, failing 35 m after it; the run spans 30 m.
	tr.Observe(series("s1", 182, 30*time.Minute-time.Second), LiveAt(r0.Add(30*time.Minute)))
	f := tr.FailingSince(r0.Add(64 * time.Minute))[k]
	if f.Objects != 1 || f.Longest != 30*time.Minute-time.Second {
		t.Errorf("after the refresh: %+v, want 1 object failing for 29m59s", f)
	}
	// A finish write (lastObservedTime 8 minutes before): failing 10 m
	// after that occurrence only.
	tr2 := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	tr2.Observe(series("s1", 1, 0), LiveAt(r0))
	tr2.Observe(series("s1", 2, time.Second), LiveAt(r0.Add(time.Second)))
	tr2.Observe(series("s1", 4, 4*time.Minute), LiveAt(r0.Add(12*time.Minute)))
	if got := tr2.Failing(r0.Add(14*time.Minute - time.Nanosecond))[k]; got != 1 {
		t.Errorf("finished series, 10m after its last occurrence: failing %d, want 1", got)
	}
	if got := tr2.Failing(r0.Add(14 * time.Minute))[k]; got != 0 {
		t.Errorf("finished series: failing %d, want 0", got)
	}
	// A singleton: the failing window.
	tr3 := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	tr3.Observe(series("s1", 1, 0), LiveAt(r0))
	if got := tr3.Failing(r0.Add(10 * time.Minute))[k]; got != 0 {
		t.Errorf("singleton after 10m: failing %d, want 0", got)
	}
}

// A failing run lasts while each occurrence comes within the previous
// one's failing window: client-go's default controller back-off (5 ms
// doubling to 1000 s) spaces a failing-for-good object's occurrences by
// up to 16m40s, inside a 20-minute window, so its run grows without end;
// a transient failure's run ends with it, and the next failure starts a
// new run. A listed Event (restart) starts a run at its last occurrence.
func TestRetryFailingRuns(t *testing.T) {
	k := RetryKey{"replicaset-controller", "FailedCreate", "ReplicaSet"}
	tr := NewRetryTracker(RetryConfig{FailingWindow: 20 * time.Minute, MaxReasons: 100})
	at, gap := r0, 5*time.Millisecond
	n := int32(1)
	tr.Observe(quota("e1", n), LiveAt(at))
	for at.Before(r0.Add(90 * time.Minute)) {
		at = at.Add(gap)
		n++
		tr.Observe(quota("e1", n), LiveAt(at))
		gap = min(2*gap, 1000*time.Second)
	}
	f := tr.FailingSince(at)[k]
	if f.Objects != 1 || f.Longest != at.Sub(r0) {
		t.Errorf("failing for good: %+v, want 1 object failing for %v", f, at.Sub(r0))
	}
	// Recovered: gone after the window; a later failure is a new run.
	if f := tr.FailingSince(at.Add(20 * time.Minute))[k]; f.Objects != 0 {
		t.Errorf("after the window: %+v", f)
	}
	later := at.Add(30 * time.Minute)
	tr.Observe(quota("e1", n+1), LiveAt(later))
	tr.Observe(quota("e1", n+2), LiveAt(later.Add(time.Minute)))
	if f := tr.FailingSince(later.Add(time.Minute))[k]; f.Objects != 1 || f.Longest != time.Minute {
		t.Errorf("new run: %+v, want 1 object failing for 1m", f)
	}
	// Restart: the run starts at the listed Event's last occurrence.
	tr2 := NewRetryTracker(RetryConfig{FailingWindow: 20 * time.Minute, MaxReasons: 100})
	w := quota("e1", 40)
	w.LastSeen = r0.Add(-time.Minute)
	tr2.Observe(w, ListedAt(r0))
	tr2.Observe(quota("e1", 41), LiveAt(r0.Add(5*time.Minute)))
	if f := tr2.FailingSince(r0.Add(5 * time.Minute))[k]; f.Objects != 1 || f.Longest != 6*time.Minute {
		t.Errorf("after a restart: %+v, want failing for 6m (from the listed last occurrence)", f)
	}
}

// Events without regarding (kind none) are counted, but are no object: two
// such Events from unrelated sources 2 s apart are no retry interval, and no
// failing object.
func TestRetryWithoutRegarding(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100})
	bare := func(uid string) Warning {
		return Warning{UID: uid, Controller: "", Reason: "Invalid", Kind: "none", Count: 1}
	}
	tr.Observe(bare("a"), LiveAt(r0))
	res := tr.Observe(bare("b"), LiveAt(r0.Add(2*time.Second)))
	k := RetryKey{"", "Invalid", "none"}
	if res.Occurrences != 1 || tr.Counts()[k] != 2 {
		t.Errorf("occurrences %d, total %d, want 1 and 2", res.Occurrences, tr.Counts()[k])
	}
	if len(tr.Intervals()) != 0 {
		t.Errorf("intervals %v, want none", tr.Intervals()[IntervalKey{"", "none"}])
	}
	if got := tr.Failing(r0.Add(3 * time.Second)); len(got) != 0 {
		t.Errorf("failing %v, want none", got)
	}
	if _, objs := tr.Tracked(); objs != 0 {
		t.Errorf("objects %d, want 0", objs)
	}
}

// The label sets are capped (the per-label caps of 100 allow 10^6), and a
// label set idle for the retention with no Event left is released, its
// values with it.
func TestRetryLabelSetCapAndRelease(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 10 * time.Minute, MaxReasons: 100, MaxLabelSets: 3})
	obs := func(uid, controller, reason string, at time.Duration) RetryKey {
		w := sched(uid, 1)
		w.Controller, w.Reason, w.Object = controller, reason, uid
		return tr.Observe(w, LiveAt(r0.Add(at))).Key
	}
	for i, c := range []struct{ controller, reason string }{{"a", "R1"}, {"b", "R2"}, {"a", "R2"}} {
		if k := obs(fmt.Sprint("e", i), c.controller, c.reason, 0); k.Controller != c.controller || k.Reason != c.reason {
			t.Errorf("label set %d within the cap: %+v", i, k)
		}
	}
	// 4th label set: values each admitted (b, R1), the set beyond the cap.
	if k := obs("e3", "b", "R1", 0); k != otherKey {
		t.Errorf("4th label set beyond the cap of 3: %+v, want %+v", k, otherKey)
	}
	if got := len(tr.Counts()); got != 4 {
		t.Errorf("label sets counted %d, want 3 + other", got)
	}
	// e0 (a, R1) expires (API server TTL), the others are kept by live
	// occurrences at 50m; at 1h1m the retention (1 h) has passed for (a, R1)
	// only: released, and its values with it where unused.
	tr.Delete("e0")
	obs("e1", "b", "R2", 50*time.Minute)
	obs("e2", "a", "R2", 50*time.Minute)
	obs("e3", "b", "R1", 50*time.Minute)
	tr.Failing(r0.Add(61 * time.Minute))
	if tr.Known(RetryKey{"a", "R1", "Pod"}) || !tr.Known(RetryKey{"b", "R2", "Pod"}) || !tr.Known(otherKey) {
		t.Errorf("after release: (a, R1) known %v, (b, R2) %v, other %v; want false, true, true",
			tr.Known(RetryKey{"a", "R1", "Pod"}), tr.Known(RetryKey{"b", "R2", "Pod"}), tr.Known(otherKey))
	}
	if _, ok := tr.Counts()[RetryKey{"a", "R1", "Pod"}]; ok {
		t.Error("released label set still counted")
	}
	if _, ok := tr.reasons["R1"]; ok {
		t.Error("reason R1 still admitted after its only label set was released")
	}
	// The freed place takes a new label set.
	if k := obs("e4", "c", "R3", 62*time.Minute); k != (RetryKey{"c", "R3", "Pod"}) {
		t.Errorf("new label set after a release: %+v", k)
	}
}

func TestRetryLabelFold(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: time.Minute, MaxReasons: 2})
	obs := func(uid, reason string) RetryKey {
		w := sched(uid, 1)
		w.Reason = reason
		return tr.Observe(w, LiveAt(r0)).Key
	}
	if k := obs("a", "A"); k.Reason != "A" {
		t.Errorf("first reason: %q", k.Reason)
	}
	if k := obs("b", "B"); k.Reason != "B" {
		t.Errorf("second reason: %q", k.Reason)
	}
	if k := obs("c", "C"); k.Reason != LabelOther {
		t.Errorf("third reason beyond maxReasons 2: %q, want other", k.Reason)
	}
	if k := obs("d", "A"); k.Reason != "A" {
		t.Errorf("known reason after the cap: %q", k.Reason)
	}
	tr2 := NewRetryTracker(RetryConfig{FailingWindow: time.Minute, MaxReasons: 100})
	for _, bad := range []string{strings.Repeat("x", 129), "bad\xffutf8"} {
		w := sched("h"+bad, 1)
		w.Reason, w.Kind, w.Controller = bad, bad, bad
		k := tr2.Observe(w, LiveAt(r0)).Key
		if k != (RetryKey{LabelOther, LabelOther, LabelOther}) {
			t.Errorf("hostile value %q: key %+v", bad[:10], k)
		}
	}
	// The key of a known UID stays what it was first folded to.
	w := sched("a", 2)
	w.Reason = "Changed"
	if k := tr.Observe(w, LiveAt(r0.Add(time.Second))).Key; k.Reason != "A" {
		t.Errorf("known UID re-keyed to %q", k.Reason)
	}
}

// A controller recording 1,000 occurrences per second on one object, as
// client-go's recorders write them: legacy, 25 writes of +1 then one write
// carrying the other 975 after the spam filter's refill; events.k8s.io,
// count 2 then one refresh with the rest. Every occurrence is counted, one
// object and one spam bucket are held, no gap of the batch is timed.
func TestRetrySpammingRecorder(t *testing.T) {
	tr := NewRetryTracker(RetryConfig{FailingWindow: 20 * time.Minute, MaxReasons: 100})
	at := r0
	for n := int32(1); n <= 25; n++ {
		tr.Observe(quota("e1", n), LiveAt(at))
		at = at.Add(time.Millisecond)
	}
	tr.Observe(quota("e1", 1000), LiveAt(r0.Add(LegacySpamRefill)))
	s := sched("s1", 1)
	tr.Observe(s, LiveAt(r0))
	s.Count, s.LastSeen = 2, r0.Add(time.Millisecond)
	tr.Observe(s, LiveAt(r0.Add(time.Millisecond)))
	s.Count, s.LastSeen = 1000, r0.Add(30*time.Minute-time.Millisecond)
	tr.Observe(s, LiveAt(r0.Add(30*time.Minute)))
	for k, want := range map[RetryKey]uint64{
		{"replicaset-controller", "FailedCreate", "ReplicaSet"}: 1000,
		{"default-scheduler", "FailedScheduling", "Pod"}:        1000,
	} {
		if got := tr.Counts()[k]; got != want {
			t.Errorf("%v: counted %d, want %d", k, got, want)
		}
	}
	if events, objects := tr.Tracked(); events != 2 || objects != 2 || len(tr.buckets) != 1 {
		t.Errorf("held %d Events, %d objects, %d buckets; want 2, 2, 1", events, objects, len(tr.buckets))
	}
	var timed uint64
	for _, h := range tr.Intervals() {
		timed += h.Count
	}
	if timed != 25 { // 24 legacy gaps of the burst, the series' count 2
		t.Errorf("gaps timed %d, want 25", timed)
	}
}
