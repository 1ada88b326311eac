package replay

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// noWatchList makes the reflector LIST (a fake watch sends no initial
// events).
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestInformerMatchesClientGo drives client-go's own shared informer and
// the replay informer through one script (a list, watch events, a 410 and
// its relist, more events) and requires the same handler calls: the
// replay's semantics are client-go's, not a reading of its source.
func TestInformerMatchesClientGo(t *testing.T) {
	t.Parallel()
	p := testPod
	lists := [][]*corev1.Pod{
		{p("a", "ua", "1"), p("b", "ub", "2"), p("c", "uc", "3")},
		// The relist: a unchanged, b gone, c recreated, d changed, e new.
		{p("a", "ua", "12"), p("c", "uc2", "13"), p("d", "ud", "14"), p("e", "ue", "15")},
	}
	before := []watch.Event{{Type: watch.Added, Object: p("d", "ud", "11")}, {Type: watch.Modified, Object: p("a", "ua", "12")}}
	after := []watch.Event{{Type: watch.Deleted, Object: p("e", "ue", "16")}, {Type: watch.Added, Object: p("f", "uf", "17")}}

	// client-go, with a fake list/watch.
	var (
		mu       sync.Mutex
		listed   int
		watchers = make(chan *watch.FakeWatcher, 4)
	)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(10 * (listed + 1))}}
			for _, pod := range lists[listed] {
				l.Items = append(l.Items, *pod.DeepCopy())
			}
			listed++
			return l, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFakeWithChanSize(10, false)
			watchers <- w
			return w, nil
		},
	}, noWatchList{})
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	var rc safeCalls
	if _, err := informer.AddEventHandler(rc.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for rc.len() < n {
			if time.Now().After(deadline) {
				t.Fatalf("client-go made %d handler calls, want %d:\n%s", rc.len(), n, strings.Join(rc.all(), "\n"))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	w := <-watchers
	for _, ev := range before {
		w.Action(ev.Type, ev.Object.DeepCopyObject())
	}
	waitFor(5)
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	w = <-watchers // the relist is done before the next watch
	for _, ev := range after {
		w.Action(ev.Type, ev.Object.DeepCopyObject())
	}
	waitFor(11)

	// The replay informer, through the same script.
	i := NewInformer(informers.Pods, &corev1.Pod{}, nil)
	var c calls
	if _, err := i.AddEventHandler(c.handler()); err != nil {
		t.Fatal(err)
	}
	events := func(evs []watch.Event) {
		for _, ev := range evs {
			typ := map[watch.EventType]string{watch.Added: typeAdded, watch.Modified: typeModified, watch.Deleted: typeDeleted}[ev.Type]
			if err := i.event(typ, ev.Object.DeepCopyObject(), t0, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	relist := func(pods []*corev1.Pod) {
		var items []received
		for _, pod := range pods {
			items = append(items, received{pod.DeepCopy(), t0})
		}
		if err := i.list(items); err != nil {
			t.Fatal(err)
		}
	}
	relist(lists[0])
	events(before)
	relist(lists[1])
	events(after)

	// Stamps aside (client-go's objects carry none here), the same calls.
	strip := func(ss []string) string {
		out := make([]string, len(ss))
		for k, s := range ss {
			out[k] = stampRE.ReplaceAllString(s, "")
		}
		return strings.Join(out, "\n")
	}
	if got, want := strip(c.got), strip(rc.all()); got != want {
		t.Errorf("replay informer\n%s\nclient-go\n%s", got, want)
	}
}

// stampRE matches the receive stamp show prints after an object.
var stampRE = regexp.MustCompile(` [^ ]+ (live|listed)`)

// safeCalls is calls for a handler client-go calls from its goroutine.
type safeCalls struct {
	mu sync.Mutex
	c  calls
}

func (s *safeCalls) handler() cache.ResourceEventHandler {
	h := s.c.handler()
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { s.mu.Lock(); h.OnAdd(obj, initial); s.mu.Unlock() },
		UpdateFunc: func(old, obj any) {
			s.mu.Lock()
			h.OnUpdate(old, obj)
			s.mu.Unlock()
		},
		DeleteFunc: func(obj any) { s.mu.Lock(); h.OnDelete(obj); s.mu.Unlock() },
	}
}

func (s *safeCalls) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.c.got)
}

func (s *safeCalls) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.c.got...)
}
