package retries

import (
	"encoding/binary"
	"log/slog"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// A step of FuzzWarningCounting's script: 8 bytes.
//
//	0  flags: 1 live (else listed), 2 legacy recorder (deprecatedCount;
//	   else an events.k8s.io series from count 2), 4 the Event is deleted,
//	   8 scrape, 16 type Normal, 32 no regarding object, 64 created an
//	   hour after its series started (an expired Event written again)
//	1  Event (low 3 bits, 8 UIDs) and regarding object (bits 3-4)
//	2  count, big-endian uint16 (with byte 3)
//	4  time to the step: 0-119 seconds, then minutes (up to 136)
//	5  last occurrence, in 10 s before the step (int8; 0: none)
//	6  controller (bits 0-1), reason (2-3), kind (4-5) from fuzzLabels,
//	   where the fuzzed string stands for the last of each
//	7  series start, minutes before the step
const stepBytes = 8

// fuzzLabels: label values of the Events, the last replaced by the fuzzed
// string.
var fuzzLabels = struct{ controllers, reasons, kinds [4]string }{
	controllers: [4]string{"replicaset-controller", "kce-testctl-legacy", "", ""},
	reasons:     [4]string{"FailedCreate", "SyncFailed", "BackOff", ""},
	kinds:       [4]string{"ReplicaSet", "ConfigMap", "Widget", ""},
}

// FuzzWarningCounting runs a script of Warning Event notifications
// (stepBytes each) through the retries collector's handlers, with label
// caps small enough to fold (3 values per label, 4 label sets), and
// scrapes it when a step says so and at the end. Seeds
// (testdata/fuzz/FuzzWarningCounting): the recorders' recording
// (testdata/recorders.jsonl) as a script, and scripts of a legacy burst,
// a relist and an expired Event written again. It checks:
//
//   - counting: each notification adds to the counters exactly the
//     occurrences its count adds to the last count held for its UID
//     (max(series.count, deprecatedCount, 1)), nothing for a listed one,
//     a lower count or a Normal Event, one for a new UID created long
//     after its series started; a deleted UID starts again from 0;
//   - every scrape gathers on a pedantic registry (valid, consistent
//     label sets); the counters sum to the tracker's counts; counters
//     and gauges are non-negative; histogram buckets are cumulative and
//     within the count; tracked UIDs are those held;
//   - every label value is valid UTF-8 of at most 128 bytes, or other; at
//     most 3 values per label (and other), at most 4 label sets (and
//     other, other, other).
func FuzzWarningCounting(f *testing.F) {
	f.Fuzz(func(t *testing.T, script []byte, label string) {
		if len(script) > 512*stepBytes {
			return
		}
		now := time.Date(2026, 12, 2, 2, 13, 30, 0, time.UTC)
		cfg := config.Default()
		cfg.Retries.MaxReasons, cfg.Stall.SeriesLimit = 3, 4
		c := New(cfg, slog.New(slog.DiscardHandler), func() time.Time { return now })
		reg := prometheus.NewPedanticRegistry()
		if err := c.Register(reg); err != nil {
			t.Fatal(err)
		}
		h := c.handlers()
		labels := fuzzLabels
		labels.controllers[3], labels.reasons[3], labels.kinds[3] = label, label, label

		held := map[types.UID]int32{} // the model: last count per UID
		for len(script) >= stepBytes {
			s := script[:stepBytes]
			script = script[stepBytes:]
			if s[4] < 120 {
				now = now.Add(time.Duration(s[4]) * time.Second)
			} else {
				now = now.Add(time.Duration(s[4]-119) * time.Minute)
			}
			e := stepEvent(s, now, labels)
			switch {
			case s[0]&8 != 0:
				scrape(t, c, reg, len(held))
				continue
			case s[0]&4 != 0:
				h.Gone(e, tracker.LiveAt(now))
				delete(held, e.UID)
				continue
			}
			before := countsSum(c)
			h.Changed(nil, e, informers.Seen{At: now, Live: s[0]&1 != 0})
			want := int64(0)
			if e.Type == corev1.EventTypeWarning {
				count := max(e.DeprecatedCount, 1)
				if e.Series != nil {
					count = max(count, e.Series.Count)
				}
				prev, known := held[e.UID]
				want = int64(count) - int64(prev)
				if !known && want > 1 && s[0]&64 != 0 {
					want = 1 // an expired Event written again
				}
				if want < 0 || s[0]&1 == 0 {
					want = 0
				}
				held[e.UID] = count
			}
			if got := countsSum(c) - before; got != want {
				t.Fatalf("step at %s (%x): counted %d occurrences, want %d (event %+v)", now.Format(time.TimeOnly), s, got, want, e)
			}
		}
		scrape(t, c, reg, len(held))
	})
}

// stepEvent is the Event of step s at now.
func stepEvent(s []byte, now time.Time, labels struct{ controllers, reasons, kinds [4]string }) *eventsv1.Event {
	uid, object := s[1]&7, s[1]>>3&3
	count := int32(binary.BigEndian.Uint16(s[2:4]))
	started := now.Add(-time.Duration(s[7]) * time.Minute)
	created := started
	if s[0]&64 != 0 {
		created = started.Add(time.Hour)
	}
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: string(rune('a' + uid)), UID: types.UID("uid-" + string(rune('a'+uid))),
			CreationTimestamp: metav1.NewTime(created)},
		Type:                corev1.EventTypeWarning,
		EventTime:           metav1.NewMicroTime(started),
		ReportingController: labels.controllers[s[6]&3],
		Reason:              labels.reasons[s[6]>>2&3],
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: labels.kinds[s[6]>>4&3], Namespace: "ns",
			Name: "obj-" + string(rune('a'+object)), UID: types.UID("obj-" + string(rune('a'+object)))},
	}
	var last time.Time
	if s[5] != 0 {
		last = now.Add(-time.Duration(int8(s[5])) * 10 * time.Second)
	}
	if s[0]&2 != 0 {
		e.DeprecatedCount = count
		e.DeprecatedFirstTimestamp = metav1.NewTime(started)
		e.DeprecatedLastTimestamp = metav1.NewTime(last)
		e.DeprecatedSource.Component = e.ReportingController
	} else if count >= 2 {
		e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)}
	}
	if s[0]&16 != 0 {
		e.Type = corev1.EventTypeNormal
	}
	if s[0]&32 != 0 {
		e.Regarding = corev1.ObjectReference{}
	}
	return e
}

func countsSum(c *Collector) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.tr.Counts() {
		n += int64(v)
	}
	return n
}

// scrape gathers reg and checks the exposition (see FuzzWarningCounting).
func scrape(t *testing.T, c *Collector, reg *prometheus.Registry, held int) {
	t.Helper()
	want := countsSum(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	values := map[string]map[string]bool{}
	sets := 0
	var total float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				v := lp.GetValue()
				if v != tracker.LabelOther && (len(v) > 128 || !utf8.ValidString(v)) {
					t.Errorf("%s: label %s=%q is not a fit label value", mf.GetName(), lp.GetName(), v)
				}
				if values[lp.GetName()] == nil {
					values[lp.GetName()] = map[string]bool{}
				}
				values[lp.GetName()][v] = true
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				if v := m.GetCounter().GetValue(); v < 0 || v != math.Trunc(v) {
					t.Errorf("%s: counter %v", mf.GetName(), v)
				}
			case dto.MetricType_GAUGE:
				if v := m.GetGauge().GetValue(); v < 0 || math.IsNaN(v) {
					t.Errorf("%s: gauge %v", mf.GetName(), v)
				}
			case dto.MetricType_HISTOGRAM:
				hist := m.GetHistogram()
				var prev uint64
				for _, b := range hist.GetBucket() {
					if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > hist.GetSampleCount() {
						t.Errorf("%s: bucket %v count %d after %d, of %d", mf.GetName(), b.GetUpperBound(), b.GetCumulativeCount(), prev, hist.GetSampleCount())
					}
					prev = b.GetCumulativeCount()
				}
				if hist.GetSampleSum() < 0 {
					t.Errorf("%s: sum %v", mf.GetName(), hist.GetSampleSum())
				}
			}
		}
		switch mf.GetName() {
		case "kube_convergence_controller_retries_total":
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			sets = len(mf.GetMetric())
		case "kube_convergence_controller_retry_events_tracked":
			if got := int(mf.GetMetric()[0].GetGauge().GetValue()); got != held {
				t.Errorf("%d Event UIDs tracked, want %d", got, held)
			}
		}
	}
	if int64(total) != want {
		t.Errorf("retries_total sums to %v, the tracker counted %d", total, want)
	}
	for name, vs := range values {
		if n := len(vs); n > 3+1 {
			t.Errorf("label %s has %d values, over the cap of 3 and other", name, n)
		}
	}
	if sets > 4+1 {
		t.Errorf("%d label sets of retries_total, over the cap of 4 and (other, other, other)", sets)
	}
}
