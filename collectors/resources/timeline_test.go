package resources

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// A custom resource's conditions enter its timeline when their status,
// reason or message change; all of them when there is nothing to compare.
func TestConditionEntries(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	obj := func(cs ...records.CustomCondition) *records.CustomObject {
		return &records.CustomObject{Conditions: cs}
	}
	issuing := records.CustomCondition{Type: "Ready", Status: "False", Reason: "Issuing", Message: "<script>alert(1)</script>", LastTransition: at}
	failed := records.CustomCondition{Type: "Ready", Status: "False", Reason: "Failed", Message: "rate limited", LastTransition: at}
	stalled := records.CustomCondition{Type: "Stalled", Status: "True", Reason: "Failed"}
	for _, tc := range []struct {
		name     string
		old, cur *records.CustomObject
		want     []string
	}{
		{"first seen", nil, obj(issuing, stalled), []string{"Ready=False|Issuing: <script>alert(1)</script>|true", "Stalled=True|Failed: |false"}},
		{"unchanged", obj(issuing), obj(issuing), nil},
		{"reason and message changed", obj(issuing), obj(failed), []string{"Ready=False|Failed: rate limited|true"}},
		{"a new condition", obj(failed), obj(failed, stalled), []string{"Stalled=True|Failed: |false"}},
	} {
		var got []string
		for _, e := range conditionEntries(tc.old, tc.cur) {
			got = append(got, e.Reason+"|"+e.Message+"|"+map[bool]string{true: "true", false: "false"}[e.APITime != nil && e.APITime.Equal(at)])
			if e.Type != "condition" {
				t.Errorf("%s: type %s", tc.name, e.Type)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A custom resource's /scale write stamps no managedFields time: its entry
// names no manager rather than the previous stamp's.
func TestScaleWriteNamesNoPreviousManager(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cfg := config.Default()
	c := New(collectors.NewEpisodes(cfg, time.Now), cfg, time.Minute, slog.New(slog.DiscardHandler), time.Now)
	store := timeline.NewStore(timeline.Config{})
	c.SetTimelines(store)
	obj := func(gen int64) *records.CustomObject {
		return &records.CustomObject{UID: "u-db", Generation: gen, WriteManagers: "helm", WriteUnix: t0.Add(-time.Hour).Unix()}
	}
	ep := tracker.Episode{Kind: "Database.example.com", UID: "u-db", Namespace: "ns", Name: "db", Generation: 5, Target: 5, Start: t0}
	store.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}})
	c.mu.Lock()
	c.timelineObject(obj(4), obj(5), nil, t0)
	c.mu.Unlock()
	eps := store.List(timeline.Query{UID: "u-db"}, t0)
	if len(eps) != 1 || len(eps[0].Entries) == 0 {
		t.Fatalf("episodes %+v", eps)
	}
	if w := eps[0].Entries[0]; w.Type != timeline.EntryWrite || w.Generation != 5 || len(w.Managers) != 0 || w.APITime != nil || w.Message != timeline.WriterUnknown {
		t.Errorf("the /scale write's entry = %+v, want generation 5 with no managers, no API time and message %q", w, timeline.WriterUnknown)
	}
}

// A custom resource deleted and recreated under its name while the watch
// was down reaches the handlers as an update with another uid: the old one's
// episode ends as deleted instead of staying open, and stalled, forever.
func TestObjectRecreatedDuringAWatchGap(t *testing.T) {
	cfg := config.Default()
	c := New(collectors.NewEpisodes(cfg, time.Now), cfg, time.Minute, slog.New(slog.DiscardHandler), time.Now)
	conv, err := records.NewConvention(config.Resource{})
	if err != nil {
		t.Fatal(err)
	}
	h := informers.Handle(c.objectHandlers(&resource{conv: conv}, "Database.example.com"))
	obj := func(uid string) *records.CustomObject {
		return &records.CustomObject{UID: types.UID(uid), Namespace: "ns", Name: "db", Generation: 1}
	}
	open := func() []string {
		eps, _ := c.Episodes(time.Now())
		var uids []string
		for _, ep := range eps {
			uids = append(uids, ep.UID)
		}
		return uids
	}
	h.OnAdd(obj("a"), false)
	if got := open(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("open episodes after the create: %v, want [a]", got)
	}
	h.OnUpdate(obj("a"), obj("b"))
	if got := open(); len(got) != 1 || got[0] != "b" {
		t.Errorf("open episodes after the relist: %v, want only the new object's [b]", got)
	}
}
