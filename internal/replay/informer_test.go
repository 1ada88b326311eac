package replay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testPod(name, uid, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

// calls records what handlers receive, as "op key@uid/rv ..." lines.
type calls struct{ got []string }

func show(obj any) string {
	switch o := obj.(type) {
	case nil:
		return "<nil>"
	case cache.DeletedFinalStateUnknown:
		return "tombstone(" + o.Key + " " + show(o.Obj) + ")"
	case *corev1.Pod:
		at, listed := informers.Received(o)
		how := "live"
		if listed {
			how = "listed"
		}
		return fmt.Sprintf("%s@%s/%s %s %s", o.Name, o.UID, o.ResourceVersion, at.Sub(t0), how)
	}
	return fmt.Sprintf("%T", obj)
}

func (c *calls) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			c.got = append(c.got, fmt.Sprintf("add %s initial=%v", show(obj), initial))
		},
		UpdateFunc: func(old, obj any) { c.got = append(c.got, "update "+show(old)+" -> "+show(obj)) },
		DeleteFunc: func(obj any) { c.got = append(c.got, "delete "+show(obj)) },
	}
}

func list(at time.Duration, pods ...*corev1.Pod) []received {
	out := make([]received, len(pods))
	for i, p := range pods {
		out[i] = received{p, t0.Add(at)}
	}
	return out
}

// TestInformerDeliversAsClientGo is the table of what a handler receives
// from the replay informer, as from client-go v0.37.2's shared informer.
func TestInformerDeliversAsClientGo(t *testing.T) {
	type step func(i *Informer) error
	listed := func(at time.Duration, pods ...*corev1.Pod) step {
		return func(i *Informer) error { return i.list(list(at, pods...)) }
	}
	event := func(typ string, p *corev1.Pod, at time.Duration, live bool) step {
		return func(i *Informer) error { return i.event(typ, p, t0.Add(at), live) }
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
	}{{
		name:  "the first list is the initial list",
		steps: []step{listed(0, testPod("a", "ua", "1"), testPod("b", "ub", "1"))},
		want:  []string{"add a@ua/1 0s listed initial=true", "add b@ub/1 0s listed initial=true"},
	}, {
		name:  "watch events after it are live; an added key the store holds is an update",
		steps: []step{listed(0, testPod("a", "ua", "1")), event(typeAdded, testPod("b", "ub", "2"), time.Second, true), event(typeAdded, testPod("a", "ua", "3"), 2*time.Second, true)},
		want:  []string{"add a@ua/1 0s listed initial=true", "add b@ub/2 1s live initial=false", "update a@ua/1 0s listed -> a@ua/3 2s live"},
	}, {
		name: "a relist: tombstones for missing keys first, then updates (unchanged ones too), and adds not initial",
		steps: []step{
			listed(0, testPod("a", "ua", "1"), testPod("b", "ub", "1"), testPod("c", "uc", "1")),
			listed(10*time.Second, testPod("a", "ua", "1"), testPod("c", "uc", "5"), testPod("d", "ud", "6")),
		},
		want: []string{
			"add a@ua/1 0s listed initial=true", "add b@ub/1 0s listed initial=true", "add c@uc/1 0s listed initial=true",
			"delete tombstone(ns/b b@ub/1 0s listed)",
			"update a@ua/1 0s listed -> a@ua/1 10s listed",
			"update c@uc/1 0s listed -> c@uc/5 10s listed",
			"add d@ud/6 10s listed initial=false",
		},
	}, {
		name:  "recreated under its name during a gap: an update to another uid",
		steps: []step{listed(0, testPod("web-0", "u1", "1")), listed(30*time.Second, testPod("web-0", "u2", "9"))},
		want:  []string{"add web-0@u1/1 0s listed initial=true", "update web-0@u1/1 0s listed -> web-0@u2/9 30s listed"},
	}, {
		name:  "a delete is handed the event's object, even for a key never added",
		steps: []step{listed(0), event(typeDeleted, testPod("x", "ux", "4"), time.Second, true)},
		want:  []string{"delete x@ux/4 1s live"},
	}, {
		name:  "the replay of a gap's backlog is not live",
		steps: []step{listed(0), event(typeAdded, testPod("a", "ua", "2"), time.Second, false)},
		want:  []string{"add a@ua/2 1s listed initial=false"},
	}, {
		name: "synthetic: a tombstone without an object, an update from an explicit old object",
		steps: []step{
			listed(0),
			func(i *Informer) error { return i.tombstone("ns/ghost", nil, t0) },
			func(i *Informer) error {
				return i.update(testPod("a", "old", "1"), testPod("a", "new", "2"), t0.Add(time.Second), true)
			},
		},
		want: []string{"delete tombstone(ns/ghost <nil>)", "update a@old/1 1s live -> a@new/2 1s live"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			i := NewInformer(informers.Pods, &corev1.Pod{}, nil)
			var c calls
			if _, err := i.AddEventHandler(c.handler()); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				if err := s(i); err != nil {
					t.Fatal(err)
				}
			}
			if strings.Join(c.got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("handler got\n%s\nwant\n%s", strings.Join(c.got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestInformerLateHandlerGetsTheCache: a handler added to an informer that
// holds objects receives them as initial adds, in key order, then what
// follows; the store, the indexers and the transform are the informer's.
func TestInformerLateHandlerGetsTheCache(t *testing.T) {
	i := NewInformer(informers.Pods, &corev1.Pod{}, cache.Indexers{"uid": func(obj any) ([]string, error) {
		return []string{string(obj.(*corev1.Pod).UID)}, nil
	}})
	if err := i.SetTransform(func(obj any) (any, error) {
		p := obj.(*corev1.Pod)
		p.Labels = map[string]string{"transformed": "yes"}
		return p, nil
	}); err != nil {
		t.Fatal(err)
	}
	if i.HasSynced() {
		t.Fatal("synced before any list")
	}
	if err := i.list(list(0, testPod("b", "ub", "1"), testPod("a", "ua", "1"))); err != nil {
		t.Fatal(err)
	}
	if !i.HasSynced() || i.LastSyncResourceVersion() != "1" {
		t.Errorf("after the list: synced %v, last resourceVersion %q", i.HasSynced(), i.LastSyncResourceVersion())
	}
	if err := i.SetTransform(nil); err == nil {
		t.Error("SetTransform after the first list succeeded; client-go refuses it once started")
	}
	var c calls
	reg, err := i.AddEventHandler(c.handler())
	if err != nil {
		t.Fatal(err)
	}
	if err := i.event(typeModified, testPod("a", "ua", "2"), t0.Add(time.Second), true); err != nil {
		t.Fatal(err)
	}
	want := []string{"add a@ua/1 0s listed initial=true", "add b@ub/1 0s listed initial=true", "update a@ua/1 0s listed -> a@ua/2 1s live"}
	if strings.Join(c.got, "\n") != strings.Join(want, "\n") {
		t.Errorf("late handler got\n%s\nwant\n%s", strings.Join(c.got, "\n"), strings.Join(want, "\n"))
	}
	objs, err := i.GetIndexer().ByIndex("uid", "ua")
	if err != nil || len(objs) != 1 || objs[0].(*corev1.Pod).Labels["transformed"] != "yes" {
		t.Errorf("indexed %v (%v), want pod a transformed", objs, err)
	}
	if err := i.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	if err := i.event(typeDeleted, testPod("a", "ua", "3"), t0.Add(2*time.Second), true); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 3 {
		t.Errorf("a removed handler was called: %v", c.got)
	}
}
