package retries

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// recorded is one line of testdata/recorders.jsonl (the replay format,
// docs/replay.md), as far as this test reads it.
type recorded struct {
	Resource string          `json:"resource"`
	Type     string          `json:"type"`
	At       time.Time       `json:"at"`
	Live     bool            `json:"live"`
	Object   json.RawMessage `json:"object"`
}

// truthStats is internal/testctl.Stats as recorders.truth.json holds it.
type truthStats struct {
	Syncs, Failures           int
	FirstFailure, LastFailure time.Time
}

// replayRecorders feeds testdata/recorders.jsonl, what the API server
// stored of the test controller's Warning Events (internal/testctl
// TestRecordRecorders: client-go's real tools/record and tools/events
// recorders, a real kube-apiserver), to the collector's handlers with the
// recording's receive times as the clock, and gathers at the end. It
// returns the families, the end of the recording, the truth the
// controllers kept and the last stored count per regarding object.
func replayRecorders(t *testing.T, cfg *config.Config) (map[string]*dto.MetricFamily, time.Time, map[string]map[string]truthStats, map[string]int32) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "recorders.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var now time.Time
	c := New(cfg, slog.New(slog.DiscardHandler), func() time.Time { return now })
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	h := informers.Handle(c.handlers())
	held := map[string]*eventsv1.Event{}
	counts := map[string]int32{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l recorded
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if !l.At.IsZero() {
			now = l.At
		}
		if l.Resource != informers.WarningEvents.String() || len(l.Object) == 0 {
			continue
		}
		var e eventsv1.Event
		if err := json.Unmarshal(l.Object, &e); err != nil {
			t.Fatal(err)
		}
		informers.Stamp(&e, l.At, l.Type == "list" || !l.Live)
		key := e.Namespace + "/" + e.Name
		switch l.Type {
		case "list", "added", "modified":
			if old, ok := held[key]; ok {
				h.OnUpdate(old, &e)
			} else {
				h.OnAdd(&e, l.Type == "list")
			}
			held[key] = &e
			n := max(e.DeprecatedCount, 1)
			if e.Series != nil {
				n = max(n, e.Series.Count)
			}
			counts[e.Regarding.Name] = n
		case "deleted":
			h.OnDelete(&e)
			delete(held, key)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "recorders.truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var truth struct {
		Objects map[string]map[string]truthStats `json:"objects"`
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out, now, truth.Objects, counts
}

// gauge returns the value of family's series with labels, or -1.
func gauge(mfs map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	for _, m := range mfs[family].GetMetric() {
		ok := true
		for _, l := range m.GetLabel() {
			if v, want := labels[l.GetName()]; want && v != l.GetValue() {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// What the real recorders wrote, read by the collector:
//
//   - legacy-slow (tools/record, its own back-off 40 s doubling to 320 s):
//     every occurrence reached the API as +1, so its 320 s gap is the
//     controller's back-off: observed in the interval histogram, none
//     recorder-limited (before: every gap of 290 s or more was);
//   - legacy-fast (back-off to 10 s): the burst of 25 written one by one,
//     then one write per 5 minutes carrying the skipped occurrences:
//     counted to the stored count (a lower bound of the truth), failing at
//     the end with a run spanning from its first occurrence to its last
//     written one;
//   - events-fast (tools/events): created, series.count 2, then nothing
//     while it kept failing: still failing at the end of the recording,
//     12 minutes after count 2 (before: 0 from minute 10);
//   - the transient ones: counted exactly (3 failures each; the
//     events.k8s.io series' third occurrence written by finishSeries).
func TestRealRecorders(t *testing.T) {
	mfs, end, truth, stored := replayRecorders(t, config.Default())
	legacy, events := truth["kce-testctl-legacy"], truth["kce-testctl-events"]
	if len(legacy) == 0 || len(events) == 0 {
		t.Fatalf("truth %v", truth)
	}
	for _, obj := range []string{"legacy-transient", "events-transient"} {
		if n := stored[obj]; n != 3 {
			t.Errorf("%s: stored count %d, want the 3 failures (truth %+v)", obj, n, legacy[obj])
		}
	}
	// The interval histogram of kce-testctl-legacy: the slow object's 320 s
	// gap observed; nothing recorder-limited.
	var le300, le600 uint64
	for _, m := range mfs["kube_convergence_controller_retry_interval_seconds"].GetMetric() {
		if !hasLabel(m, "controller", "kce-testctl-legacy") {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			switch b.GetUpperBound() {
			case 300:
				le300 = b.GetCumulativeCount()
			case 600:
				le600 = b.GetCumulativeCount()
			}
		}
	}
	if le600-le300 < 1 {
		t.Errorf("legacy gaps in (300, 600]: %d, want the slow object's 320 s back-off", le600-le300)
	}
	if n := gauge(mfs, "kube_convergence_controller_retry_intervals_recorder_limited_total", map[string]string{"controller": "kce-testctl-legacy"}); n > 0 {
		t.Errorf("legacy recorder-limited gaps %v, want 0: every +1 gap of one Event is the controller's", n)
	}
	// Counted: the stored counts, which the truth bounds from above.
	var storedLegacy int32
	for _, obj := range []string{"legacy-fast", "legacy-slow", "legacy-transient"} {
		storedLegacy += stored[obj]
		if int(stored[obj]) > legacy[obj].Failures {
			t.Errorf("%s: stored %d > failures %d", obj, stored[obj], legacy[obj].Failures)
		}
	}
	if got := gauge(mfs, "kube_convergence_controller_retries_total", map[string]string{"controller": "kce-testctl-legacy"}); got != float64(storedLegacy) {
		t.Errorf("legacy occurrences counted %v, want the stored counts' sum %d", got, storedLegacy)
	}
	// Failing at the end: the two legacy objects failing for good and the
	// transient one (its last occurrence younger than 20 minutes); the
	// events.k8s.io object failing for good, whose series the recorder has
	// not written since count 2, and its transient one (finished, but its
	// last occurrence younger than the window).
	if got := gauge(mfs, "kube_convergence_controller_failing_objects", map[string]string{"controller": "kce-testctl-legacy"}); got != 3 {
		t.Errorf("legacy failing objects %v, want 3", got)
	}
	if got := gauge(mfs, "kube_convergence_controller_failing_objects", map[string]string{"controller": "kce-testctl-events"}); got != 2 {
		t.Errorf("events.k8s.io failing objects %v at %s, want 2 (events-fast failed until %s)", got,
			end.Sub(events["events-fast"].FirstFailure).Round(time.Second), events["events-fast"].LastFailure.Sub(events["events-fast"].FirstFailure).Round(time.Second))
	}
	// The longest run: legacy-fast's, from its first occurrence to its last
	// written one (at most one spam refill before its last failure).
	fast := legacy["legacy-fast"]
	span := fast.LastFailure.Sub(fast.FirstFailure).Seconds()
	got := gauge(mfs, "kube_convergence_controller_longest_failing_seconds", map[string]string{"controller": "kce-testctl-legacy"})
	if got > span+1 || got < span-300-10 {
		t.Errorf("legacy longest failing %v s, want within a spam refill of the truth's %v s", got, span)
	}
	t.Logf("legacy-fast: %d failures, %d stored, run %v s of %v s", fast.Failures, stored["legacy-fast"], got, span)
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
