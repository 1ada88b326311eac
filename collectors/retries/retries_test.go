package retries

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// The adapter over a fake API: an Event present before the start is a
// baseline; its later count increases are counted; a Normal Event and a
// hostile note change nothing.
func TestCollectorOverInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := legacyEvent("old", 12)
	cs := fake.NewClientset(old)
	c := New(config.Default(), slog.New(slog.DiscardHandler), time.Now)
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	f := informers.New(cs, nil, slog.New(slog.DiscardHandler))
	if err := c.Start(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	waitFor(t, "baseline", func() bool { c.mu.Lock(); defer c.mu.Unlock(); n, _ := c.tr.Tracked(); return n == 1 })
	ev := cs.EventsV1().Events("ns")
	old.DeprecatedCount = 14
	old.Note = strings.Repeat("\xff hostile {label=\"x\"} ", 100)
	if _, err := ev.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	normal := legacyEvent("normal", 1)
	normal.Type = "Normal"
	if _, err := ev.Create(ctx, normal, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Create(ctx, legacyEvent("new", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "counted", func() bool {
		return testutil.ToFloat64(onlyRetries{c}) == 3
	})
	want := `
# HELP kube_convergence_controller_failing_objects ` + help(t, reg, "kube_convergence_controller_failing_objects") + `
# TYPE kube_convergence_controller_failing_objects gauge
kube_convergence_controller_failing_objects{controller="replicaset-controller",kind="ReplicaSet",reason="FailedCreate"} 1
# HELP kube_convergence_controller_retries_total ` + help(t, reg, "kube_convergence_controller_retries_total") + `
# TYPE kube_convergence_controller_retries_total counter
kube_convergence_controller_retries_total{controller="replicaset-controller",kind="ReplicaSet",reason="FailedCreate"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kube_convergence_controller_retries_total", "kube_convergence_controller_failing_objects"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// onlyRetries exposes only the retries counter, for testutil.ToFloat64.
type onlyRetries struct{ c *Collector }

func (o onlyRetries) Describe(ch chan<- *prometheus.Desc) { ch <- retriesDesc }
func (o onlyRetries) Collect(ch chan<- prometheus.Metric) {
	o.c.mu.Lock()
	var n uint64
	for _, v := range o.c.tr.Counts() {
		n += v
	}
	o.c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(retriesDesc, prometheus.CounterValue, float64(n), "", "", "")
}

func help(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("%s not gathered", name)
	return ""
}

func legacyEvent(name string, count int32) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:       metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Type:             "Warning",
		Reason:           "FailedCreate",
		DeprecatedSource: corev1.EventSource{Component: "replicaset-controller"},
		DeprecatedCount:  count,
		Regarding:        corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "ns", Name: "web", UID: "rs"},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The counters and the interval histogram carry created timestamps, as
// client_golang's own do: a series born between two scrapes with its first
// occurrences in it (a quota-blocked ReplicaSet's burst of FailedCreate)
// is created at the scrape before, when it was 0, so a Prometheus with
// created-timestamp-zero-ingestion counts those occurrences (the trial,
// docs/trials.md: 14 occurrences before the first scrape were lost).
func TestCreatedTimestamps(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start
	c := New(config.Default(), slog.New(slog.DiscardHandler), func() time.Time { return now })
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	created := func(family string, labels map[string]string) time.Time {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != family {
				continue
			}
		metric:
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						continue metric
					}
				}
				ts := m.GetCounter().GetCreatedTimestamp()
				if m.Histogram != nil {
					ts = m.GetHistogram().GetCreatedTimestamp()
				}
				if ts == nil {
					t.Fatalf("%s %v: no created timestamp", family, labels)
				}
				return ts.AsTime()
			}
		}
		t.Fatalf("%s %v not gathered", family, labels)
		return time.Time{}
	}
	warn := func(uid, reason string, count int32, at time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.tr.Observe(tracker.Warning{UID: uid, Controller: "replicaset-controller", Reason: reason, Kind: "ReplicaSet",
			Object: "rs", Count: count, Legacy: true}, tracker.LiveAt(at))
	}
	// Born before the first scrape, with 14 occurrences as client-go's
	// legacy recorder writes them below its burst of 25: count 1, then +1
	// per occurrence.
	for n := int32(1); n <= 14; n++ {
		warn("a", "FailedCreate", n, start.Add(time.Duration(n)*time.Second))
	}
	now = start.Add(30 * time.Second)
	retries := map[string]string{"reason": "FailedCreate"}
	if got := created("kube_convergence_controller_retries_total", retries); !got.Equal(start) {
		t.Errorf("retries born before the first scrape: created %v, want the start %v", got, start)
	}
	if got := created("kube_convergence_controller_retry_interval_seconds", nil); !got.Equal(start) {
		t.Errorf("interval histogram: created %v, want %v", got, start)
	}
	// A new reason between the first and the second scrape: created at the
	// first; the old series keeps its time.
	warn("b", "FailedDelete", 1, start.Add(40*time.Second))
	now = start.Add(60 * time.Second)
	if got, want := created("kube_convergence_controller_retries_total", map[string]string{"reason": "FailedDelete"}), start.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("new series: created %v, want the previous scrape %v", got, want)
	}
	if got := created("kube_convergence_controller_retries_total", retries); !got.Equal(start) {
		t.Errorf("old series: created %v, want %v", got, start)
	}
}

// An Event that expired and was written again under its name while the
// watch was down reaches the update handler at the relist with another uid:
// the old uid is forgotten, the new one tracked from its listed count.
func TestEventRecreatedDuringAWatchGap(t *testing.T) {
	now := time.Now()
	c := New(config.Default(), slog.New(slog.DiscardHandler), func() time.Time { return now })
	old := legacyEvent("web.1", 3)
	informers.Handle(c.handlers()).OnAdd(old, false)
	cur := legacyEvent("web.1", 4)
	cur.UID = "uid-web.1-recreated"
	informers.Stamp(cur, now, true)
	informers.Handle(c.handlers()).OnUpdate(old, cur)
	c.mu.Lock()
	events, _ := c.tr.Tracked()
	c.mu.Unlock()
	if events != 1 {
		t.Errorf("Events tracked after the relist: %d, want 1 (the new uid only)", events)
	}
	if n := testutil.ToFloat64(onlyTracked{c}); n != 1 {
		t.Errorf("tracked Events gauge = %v, want 1", n)
	}
}

// onlyTracked exposes the collector's tracked Events gauge alone.
type onlyTracked struct{ c *Collector }

func (o onlyTracked) Describe(ch chan<- *prometheus.Desc) { ch <- trackedDesc }
func (o onlyTracked) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 100)
	o.c.Collect(all)
	close(all)
	for m := range all {
		if m.Desc() == trackedDesc {
			ch <- m
		}
	}
}
