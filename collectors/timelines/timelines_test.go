package timelines

import (
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func warning(uid string, count int32, note string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:              metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9.1", UID: "ev1"},
		Type:                    "Warning",
		Reason:                  "FailedCreate",
		Note:                    note,
		ReportingController:     "replicaset-controller",
		Regarding:               corev1.ObjectReference{Kind: "ReplicaSet", Namespace: "shop", Name: "web-7d9", UID: types.UID(uid)},
		DeprecatedCount:         count,
		DeprecatedLastTimestamp: metav1.NewTime(t0.Add(time.Duration(count) * time.Second)),
	}
}

// Warning Events reach the episode their regarding object is related to,
// once per new occurrence; the store's bounds are exposed as counters.
func TestWarningEventsFeedTheEpisode(t *testing.T) {
	store := timeline.NewStore(timeline.Config{Retained: 1, MaxEntries: 4})
	c := New(store, slog.New(slog.DiscardHandler), func() time.Time { return t0.Add(time.Minute) })
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	ep := tracker.Episode{Kind: tracker.Deployment, UID: "d1", Namespace: "shop", Name: "web", Generation: 1, Target: 1, Start: t0}
	store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
	store.Relate("rs1", "d1")

	first := warning("rs1", 1, "exceeded quota")
	informers.Handle(c.handlers()).OnAdd(first, false)
	informers.Handle(c.handlers()).OnUpdate(first, warning("rs1", 1, "exceeded quota")) // a write adding no occurrence
	second := warning("rs1", 2, "exceeded quota")
	informers.Handle(c.handlers()).OnUpdate(first, second)
	informers.Handle(c.handlers()).OnAdd(&eventsv1.Event{Type: "Warning", Reason: "NoRegarding"}, false)
	normal := warning("rs1", 3, "x")
	normal.Type = "Normal"
	informers.Handle(c.handlers()).OnUpdate(second, normal)

	var got []string
	for _, e := range store.List(timeline.Query{}, t0.Add(time.Hour))[0].Entries {
		got = append(got, fmt.Sprintf("%s %s %s/%s by %s count %d api +%v: %s", e.Type, e.Reason, e.Object.Kind, e.Object.Name, e.Controller, e.Count, e.APITime.Sub(t0), e.Message))
	}
	want := []string{
		"event FailedCreate ReplicaSet/web-7d9 by replicaset-controller count 1 api +1s: exceeded quota",
		"event FailedCreate ReplicaSet/web-7d9 by replicaset-controller count 2 api +2s: exceeded quota",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%q\nwant\n%q", got, want)
	}

	// Bounds: 4 entries kept of 6, and one closed episode evicted.
	for i := 3; i <= 6; i++ {
		informers.Handle(c.handlers()).OnAdd(warning("rs1", int32(i), "again"), false)
	}
	for _, uid := range []string{"d1", "d2"} {
		e := ep
		e.UID = uid
		store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: e, At: t0}, {Type: tracker.EpisodeClosed, Episode: e, Outcome: tracker.OutcomeDeleted, At: t0}})
	}
	if d := testutil.ToFloat64(c.dropped); d != 3 {
		t.Errorf("entries dropped = %v, want 3 (6 events and the close into 4)", d)
	}
	if e := testutil.ToFloat64(c.evicted); e != 2 {
		t.Errorf("episodes evicted = %v, want 2 (3 closed, 1 retained)", e)
	}
}

// An Event that expired and was created again under its name while the
// watch was down, its count starting over, reaches the update handler at
// the relist with another uid: its occurrence is an entry, not compared
// with the old Event's higher count.
func TestEventRecreatedDuringAWatchGap(t *testing.T) {
	store := timeline.NewStore(timeline.Config{Retained: 1, MaxEntries: 10})
	c := New(store, slog.New(slog.DiscardHandler), func() time.Time { return t0.Add(time.Hour) })
	ep := tracker.Episode{Kind: tracker.Deployment, UID: "d1", Namespace: "shop", Name: "web", Generation: 1, Target: 1, Start: t0}
	store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
	store.Relate("rs1", "d1")
	old := warning("rs1", 5, "exceeded quota")
	informers.Handle(c.handlers()).OnAdd(old, false)
	cur := warning("rs1", 1, "exceeded quota")
	cur.UID = "ev2"
	informers.Handle(c.handlers()).OnUpdate(old, cur)
	var counts []int64
	for _, e := range store.List(timeline.Query{}, t0.Add(time.Hour))[0].Entries {
		counts = append(counts, e.Count)
	}
	if !reflect.DeepEqual(counts, []int64{5, 1}) {
		t.Errorf("entries' counts %v, want [5 1] (the recreated Event's first occurrence kept)", counts)
	}
}
