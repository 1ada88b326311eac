package informers

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// pod is a pod version: uid, resourceVersion, received at t0+at, listed or
// live (unstamped when at < 0).
func pod(uid, rv string, at time.Duration, listed bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: types.UID(uid), ResourceVersion: rv}}
	if at >= 0 {
		Stamp(p, t0.Add(at), listed)
	}
	return p
}

// notification is one call the informer makes on a handler.
type notification struct {
	op       string // add, initial, update, delete
	old, obj any
}

// TestWatchSeam is the one table of the rules every collector receives its
// notifications under: type, tombstones, resync no-ops, recreation during a
// watch gap, and Seen (receive time, live or not).
func TestWatchSeam(t *testing.T) {
	now := t0.Add(time.Hour) // the collector's clock: tombstones and unstamped objects
	wrongType := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, tc := range []struct {
		name       string
		in         []notification
		want       []string
		unexpected float64
		initial    bool // handle the initial list apart
	}{{
		name: "a live add is timed at its receipt",
		in:   []notification{{op: "add", obj: pod("u1", "1", time.Second, false)}},
		want: []string{"changed <nil> -> u1@1 at 1s live"},
	}, {
		name: "the initial replay of a late handler is not live",
		in:   []notification{{op: "initial", obj: pod("u1", "1", time.Second, false)}},
		want: []string{"changed <nil> -> u1@1 at 1s listed"},
	}, {
		name: "an object of a list cycle is not live",
		in:   []notification{{op: "add", obj: pod("u1", "1", 2*time.Second, true)}},
		want: []string{"changed <nil> -> u1@1 at 2s listed"},
	}, {
		name:    "the initial list goes to Initial when the collector asks for it",
		in:      []notification{{op: "initial", obj: pod("u1", "1", time.Second, false)}, {op: "add", obj: pod("u2", "1", 2*time.Second, true)}},
		initial: true,
		want:    []string{"initial u1@1 at 1s listed", "changed <nil> -> u2@1 at 2s listed"},
	}, {
		name: "an unstamped object is timed by the collector's clock",
		in:   []notification{{op: "add", obj: pod("u1", "1", -1, false)}},
		want: []string{"changed <nil> -> u1@1 at 1h0m0s live"},
	}, {
		name: "an update carries the old and new versions",
		in:   []notification{{op: "update", old: pod("u1", "1", time.Second, false), obj: pod("u1", "2", 3*time.Second, false)}},
		want: []string{"changed u1@1 -> u1@2 at 3s live"},
	}, {
		name: "a resync or an unchanged relisted object is dropped",
		in:   []notification{{op: "update", old: pod("u1", "7", time.Second, false), obj: pod("u1", "7", 9*time.Second, true)}},
	}, {
		name: "recreated under its name during a gap: gone at the relist, then new",
		in:   []notification{{op: "update", old: pod("u1", "7", time.Second, false), obj: pod("u2", "9", 30*time.Second, true)}},
		want: []string{"gone u1@7 at 30s listed", "changed <nil> -> u2@9 at 30s listed"},
	}, {
		name: "a live delete is dated by its own event",
		in:   []notification{{op: "delete", obj: pod("u1", "8", 5*time.Second, false)}},
		want: []string{"gone u1@8 at 5s live"},
	}, {
		name: "an unstamped delete is dated by the collector's clock",
		in:   []notification{{op: "delete", obj: pod("u1", "8", -1, false)}},
		want: []string{"gone u1@8 at 1h0m0s live"},
	}, {
		name: "a tombstone is dated by the relist that found the object gone, not by its last copy",
		in:   []notification{{op: "delete", obj: cache.DeletedFinalStateUnknown{Key: "ns/web-0", Obj: pod("u1", "3", time.Second, false)}}},
		want: []string{"gone u1@3 at 1h0m0s listed"},
	}, {
		name:       "a tombstone of an unknown object is counted, not handed on",
		in:         []notification{{op: "delete", obj: cache.DeletedFinalStateUnknown{Key: "ns/web-0"}}},
		unexpected: 1,
	}, {
		name:       "objects of another type are counted and dropped, whatever the notification",
		in:         []notification{{op: "add", obj: wrongType}, {op: "update", old: wrongType, obj: wrongType}, {op: "delete", obj: wrongType}, {op: "delete", obj: cache.DeletedFinalStateUnknown{Key: "n", Obj: wrongType}}},
		unexpected: 4,
	}, {
		name:       "an update from an object of another type is a first sight",
		in:         []notification{{op: "update", old: wrongType, obj: pod("u1", "1", time.Second, false)}},
		want:       []string{"changed <nil> -> u1@1 at 1s live"},
		unexpected: 1,
	}, {
		name:       "a typed nil is not an object",
		in:         []notification{{op: "add", obj: (*corev1.Pod)(nil)}},
		unexpected: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			f := New(nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
			var got []string
			show := func(p *corev1.Pod) string {
				if p == nil {
					return "<nil>"
				}
				return string(p.UID) + "@" + p.ResourceVersion
			}
			when := func(s Seen) string {
				live := "listed"
				if s.Live {
					live = "live"
				}
				return fmt.Sprintf("at %s %s", s.At.Sub(t0), live)
			}
			inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, nil)
			h := Handlers[corev1.Pod]{
				Changed: func(old, cur *corev1.Pod, s Seen) {
					got = append(got, fmt.Sprintf("changed %s -> %s %s", show(old), show(cur), when(s)))
				},
				Gone: func(last *corev1.Pod, s Seen) { got = append(got, fmt.Sprintf("gone %s %s", show(last), when(s))) },
				Now:  func() time.Time { return now },
			}
			if tc.initial {
				h.Initial = func(cur *corev1.Pod, s Seen) { got = append(got, fmt.Sprintf("initial %s %s", show(cur), when(s))) }
			}
			w := WatchInformer(f, "pods", Pods, inf, h)
			for _, n := range tc.in {
				switch n.op {
				case "add":
					w.handler.OnAdd(n.obj, false)
				case "initial":
					w.handler.OnAdd(n.obj, true)
				case "update":
					w.handler.OnUpdate(n.old, n.obj)
				case "delete":
					w.handler.OnDelete(n.obj)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("handlers got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if n := testutil.ToFloat64(f.unexpected.WithLabelValues("pods", "pods")); n != tc.unexpected {
				t.Errorf("unexpected objects counted %v, want %v", n, tc.unexpected)
			}
			if lines := strings.Count(logs.String(), "unexpected type"); (tc.unexpected > 0) != (lines == 1) || lines > 1 {
				t.Errorf("%d log lines for %v unexpected objects, want one when any:\n%s", lines, tc.unexpected, logs.String())
			}
		})
	}
}

// TestWatchAttachesAfterItsFactsSynced: a handler attached to a synced
// informer gets its cache as the initial list (not live), and only once
// the informers it depends on have synced too.
func TestWatchAttachesAfterItsFactsSynced(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a", ResourceVersion: "1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
	)
	f := New(cs, nil, slog.New(slog.DiscardHandler))
	seen := make(chan Seen, 10)
	if _, err := Watch(f, "pods", Pods, Handlers[corev1.Pod]{}, Nodes); err == nil {
		t.Error("handlers of *v1.Pod attached to the pods' cache of *informers.Pod records")
	}
	w, err := Watch(f, "pods", Pods, Handlers[Pod]{
		Changed: func(_, _ *Pod, s Seen) { seen <- s },
	}, Nodes)
	if err != nil {
		t.Fatal(err)
	}
	if w.Attached() {
		t.Fatal("attached before the factory started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	select {
	case s := <-seen:
		if s.Live {
			t.Errorf("initial list delivered live: %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no initial list within 10 s")
	}
	if !w.Attached() || !f.Synced(Nodes) {
		t.Errorf("attached %v, nodes synced %v: want both", w.Attached(), f.Synced(Nodes))
	}
	w.Stop()
	w.Stop() // idempotent
	if n := len(f.handlers.list); n != 0 {
		t.Errorf("%d handlers still watched for liveness after Stop", n)
	}
}

// BenchmarkSeamUpdate is the seam's own cost per update notification: the
// type check, the identity checks (resync, recreation) and the receipt
// read, before the collector's handler runs.
func BenchmarkSeamUpdate(b *testing.B) {
	old, cur := pod("u1", "1", time.Second, false), pod("u1", "2", 2*time.Second, false)
	n := 0
	h := Handle(Handlers[corev1.Pod]{Changed: func(_, _ *corev1.Pod, _ Seen) { n++ }})
	b.ReportAllocs()
	for b.Loop() {
		h.OnUpdate(old, cur)
	}
	if n == 0 {
		b.Fatal("handler never called")
	}
}
