package listwatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const resource = "pods"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Errors as the API server sends them.
var (
	errGone       = apierrors.NewResourceExpired("too old resource version: 5 (20)")
	errInternal   = apierrors.NewInternalError(errors.New("unable to decode an event from the watch stream"))
	errForbidden  = apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("rbac"))
	errThrottled  = apierrors.NewTooManyRequests("slow down", 1)
	errTooLargeRV = apierrors.NewTimeoutError("Too large resource version", 1)
)

func init() {
	errTooLargeRV.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}
}

// Options as the v0.37.2 reflector sends them.
var (
	firstList = metav1.ListOptions{ResourceVersion: "0", Limit: 500}
	relist    = metav1.ListOptions{ResourceVersion: "10"}
	quorum    = metav1.ListOptions{ResourceVersion: ""} // the retry after a 410
	resume    = metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](300)}
	streamAll = metav1.ListOptions{
		SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](300),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	}
)

// scriptedLW returns scripted LIST and WATCH results in order. Once the watch
// script is exhausted it hands out idle streams, as a quiet cluster would.
type scriptedLW struct {
	mu        sync.Mutex
	lists     []listResult
	watches   []watchResult
	listOpts  []metav1.ListOptions
	watchOpts []metav1.ListOptions
	idle      int
}

type listResult struct {
	obj runtime.Object
	err error
}

type watchResult struct {
	w   watch.Interface
	err error
}

var errNoListScripted = errors.New("scriptedLW: no LIST scripted")

func (f *scriptedLW) ListWithContext(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listOpts = append(f.listOpts, opts)
	if len(f.lists) == 0 {
		return nil, errNoListScripted
	}
	r := f.lists[0]
	f.lists = f.lists[1:]
	return r.obj, r.err
}

func (f *scriptedLW) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchOpts = append(f.watchOpts, opts)
	if len(f.watches) == 0 {
		f.idle++
		return watch.NewRaceFreeFake(), nil
	}
	r := f.watches[0]
	f.watches = f.watches[1:]
	return r.w, r.err
}

func (f *scriptedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), opts)
}

func (f *scriptedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), opts)
}

func (f *scriptedLW) script(lists []listResult, watches []watchResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, lists...)
	f.watches = append(f.watches, watches...)
}

func (f *scriptedLW) calls() (lists, watches []metav1.ListOptions, idle int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]metav1.ListOptions(nil), f.listOpts...), append([]metav1.ListOptions(nil), f.watchOpts...), f.idle
}

// fixture drives a wrapped scriptedLW in the order a reflector would.
type fixture struct {
	t    *testing.T
	clk  *testingclock.FakeClock
	reg  *prometheus.Registry
	m    *Metrics
	fake *scriptedLW
	lw   *listerWatcher
}

func newFixture(t *testing.T) *fixture {
	clk := testingclock.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, clk.Now)
	fake := &scriptedLW{}
	return &fixture{t: t, clk: clk, reg: reg, m: m, fake: fake, lw: m.Wrap(resource, fake).(*listerWatcher)}
}

// list scripts one LIST result and makes the call.
func (f *fixture) list(opts metav1.ListOptions, obj runtime.Object, err error) {
	f.t.Helper()
	f.fake.script([]listResult{{obj, err}}, nil)
	if _, got := f.lw.ListWithContext(f.t.Context(), opts); got != err { //nolint:errorlint // identity: passed through unwrapped
		f.t.Fatalf("List error = %v, want %v passed through", got, err)
	}
}

// failWatch scripts a failing WATCH call and makes it.
func (f *fixture) failWatch(opts metav1.ListOptions, err error) {
	f.t.Helper()
	f.fake.script(nil, []watchResult{{nil, err}})
	if _, got := f.lw.WatchWithContext(f.t.Context(), opts); got != err { //nolint:errorlint // identity: passed through unwrapped
		f.t.Fatalf("Watch error = %v, want %v passed through", got, err)
	}
}

// stream scripts a stream preloaded with events and opens it.
func (f *fixture) stream(opts metav1.ListOptions, events ...watch.Event) (watch.Interface, *watch.RaceFreeFakeWatcher) {
	f.t.Helper()
	inner := watch.NewRaceFreeFake()
	for _, ev := range events {
		inner.Action(ev.Type, ev.Object)
	}
	f.fake.script(nil, []watchResult{{inner, nil}})
	w, err := f.lw.WatchWithContext(f.t.Context(), opts)
	if err != nil {
		f.t.Fatalf("Watch: %v", err)
	}
	return w, inner
}

// sync runs a one-page initial LIST (what every test starts from).
func (f *fixture) sync(pods ...*v1.Pod) {
	f.t.Helper()
	f.list(firstList, podList("10", "", pods...), nil)
}

// send pushes one event into the inner stream and receives it from the
// wrapper, so it has been observed at the current fake time.
func send(t *testing.T, w watch.Interface, inner *watch.RaceFreeFakeWatcher, ev watch.Event) {
	t.Helper()
	inner.Action(ev.Type, ev.Object)
	recv(t, w, ev.Type)
}

func recv(t *testing.T, w watch.Interface, want watch.EventType) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("stream closed, want %s event", want)
		}
		if ev.Type != want {
			t.Fatalf("got %s event, want %s", ev.Type, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s event within 5s", want)
	}
}

func waitClosed(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("got an event, want the stream closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream not closed within 5s")
	}
}

func (f *fixture) wantRelists(initial, expired, errored float64) {
	f.t.Helper()
	f.wantCounter(f.m.relists, "relists", map[string]float64{reasonInitial: initial, reasonExpired: expired, reasonError: errored})
}

// wantIdle checks relists{idle}, which wantRelists leaves out.
func (f *fixture) wantIdle(idle float64) {
	f.t.Helper()
	f.wantCounter(f.m.relists, "relists", map[string]float64{reasonIdle: idle})
}

func (f *fixture) wantRestarts(timeout, closed, errored, expired float64) {
	f.t.Helper()
	f.wantCounter(f.m.restarts, "restarts", map[string]float64{restartTimeout: timeout, restartClosed: closed, reasonError: errored, reasonExpired: expired})
}

func (f *fixture) wantCounter(vec *prometheus.CounterVec, name string, want map[string]float64) {
	f.t.Helper()
	for label, w := range want {
		if got := testutil.ToFloat64(vec.WithLabelValues(resource, label)); got != w {
			f.t.Errorf("%s{%s} = %v, want %v", name, label, got, w)
		}
	}
}

// lag returns the delivery-lag histogram's count and sum.
func (f *fixture) lag() (uint64, float64) {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kube_convergence_watch_delivery_lag_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	f.t.Fatal("delivery lag histogram not gathered")
	return 0, 0
}

func (f *fixture) seen() map[types.UID]int64 {
	f.lw.mu.Lock()
	defer f.lw.mu.Unlock()
	out := make(map[types.UID]int64, len(f.lw.seen))
	for k, v := range f.lw.seen {
		out[k] = v
	}
	return out
}

func pod(uid string, managed ...time.Time) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid), ResourceVersion: "11"}}
	for _, t := range managed {
		p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: t},
		})
	}
	return p
}

func podList(rv, cont string, pods ...*v1.Pod) *v1.PodList {
	l := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

func added(p *v1.Pod) watch.Event    { return watch.Event{Type: watch.Added, Object: p} }
func modified(p *v1.Pod) watch.Event { return watch.Event{Type: watch.Modified, Object: p} }
func deleted(p *v1.Pod) watch.Event  { return watch.Event{Type: watch.Deleted, Object: p} }

func errorEvent(err *apierrors.StatusError) watch.Event {
	return watch.Event{Type: watch.Error, Object: &err.ErrStatus}
}

// initialEventsEnd is the bookmark that ends a WatchList stream's initial events.
func initialEventsEnd(rv string) watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"},
	}}}
}

func TestRelistInitial(t *testing.T) {
	f := newFixture(t)
	f.wantRelists(0, 0, 0)

	f.sync(pod("a", t0))

	f.wantRelists(1, 0, 0)
	if got := testutil.ToFloat64(f.m.initialSync.WithLabelValues(resource)); got != 0 {
		t.Errorf("initial sync duration = %v, want 0 (no time passed)", got)
	}
	if got := f.seen(); got["a"] != t0.Unix() {
		t.Errorf("seen = %v, want a at %d from the LIST", got, t0.Unix())
	}
}

func TestRelistPaginatedCountsOnce(t *testing.T) {
	f := newFixture(t)

	f.list(firstList, podList("10", "c1", pod("a", t0)), nil)
	f.clk.Step(2 * time.Second)
	f.list(metav1.ListOptions{ResourceVersion: "0", Limit: 500, Continue: "c1"}, podList("10", "c2", pod("b", t0)), nil)
	f.wantRelists(1, 0, 0)
	if n := testutil.CollectAndCount(f.m.initialSync); n != 0 {
		t.Errorf("initial sync gauge set before the last page")
	}
	f.clk.Step(time.Second)
	f.list(metav1.ListOptions{ResourceVersion: "0", Limit: 500, Continue: "c2"}, podList("10", "", pod("c", t0)), nil)

	f.wantRelists(1, 0, 0)
	if got := testutil.ToFloat64(f.m.initialSync.WithLabelValues(resource)); got != 3 {
		t.Errorf("initial sync duration = %v, want 3 (first page to last)", got)
	}
	if got := len(f.seen()); got != 3 {
		t.Errorf("seen %d objects, want 3 from all pages", got)
	}
}

func TestRelistPagerFallsBackOnExpiredContinueToken(t *testing.T) {
	f := newFixture(t)

	f.list(firstList, podList("10", "c1", pod("a", t0)), nil)
	// The continue token expired (compaction): tools/pager re-lists in full.
	f.list(metav1.ListOptions{ResourceVersion: "0", Limit: 500, Continue: "c1"}, nil, errGone)
	f.list(metav1.ListOptions{ResourceVersion: "0"}, podList("10", "", pod("b", t0)), nil)

	f.wantRelists(1, 0, 0)
	if got := f.seen(); len(got) != 1 || got["b"] == 0 {
		t.Errorf("seen = %v, want only b: the failed attempt's pages are dropped", got)
	}
}

func TestRelistExpiredFromWatchEvent(t *testing.T) {
	f := newFixture(t)
	f.sync(pod("a", t0))

	w, _ := f.stream(resume, errorEvent(errGone))
	recv(t, w, watch.Error)
	w.Stop()
	f.wantRestarts(0, 0, 0, 1)

	// The reflector relists from its last resource version, gets 410 again
	// and retries at once with resourceVersion="" (reflector.go list()).
	f.list(relist, nil, errGone)
	f.list(quorum, podList("20", ""), nil)

	f.wantRelists(1, 1, 0)
	f.wantRestarts(0, 0, 0, 1)
}

// timedOut opens a resumed stream and lets the server close it at its
// timeoutSeconds (300 s), a normal end.
func (f *fixture) timedOut() {
	f.t.Helper()
	w, inner := f.stream(resume)
	f.clk.Step(300 * time.Second)
	inner.Stop()
	waitClosed(f.t, w)
	w.Stop()
}

// A watch that ended at its timeout is resumed at once from the last
// version it saw. When the server no longer holds that version (an idle
// field-selected watch of Events, which kube-apiserver serves from etcd,
// outlives a compaction) the 410 comes first on the new stream, or as the
// watch call's answer: the previous stream was live until a moment ago, so
// the relist re-reads what the exporter already has. It is idle, not
// expired: nothing was missed.
func TestRelistIdleAfterTimeout(t *testing.T) {
	t.Run("410 event first on the resumed stream", func(t *testing.T) {
		f := newFixture(t)
		f.sync(pod("a", t0))
		f.timedOut()
		w, _ := f.stream(resume, errorEvent(errGone))
		recv(t, w, watch.Error)
		w.Stop()
		f.list(relist, nil, errGone)
		f.list(quorum, podList("20", ""), nil)
		f.wantRestarts(1, 0, 0, 1)
		f.wantRelists(1, 0, 0)
		f.wantIdle(1)
	})
	t.Run("410 answer to the watch call", func(t *testing.T) {
		f := newFixture(t)
		f.sync()
		f.timedOut()
		f.failWatch(resume, errGone)
		f.list(relist, podList("20", ""), nil)
		f.wantRelists(1, 0, 0)
		f.wantIdle(1)
	})
	t.Run("410 after events on the resumed stream", func(t *testing.T) {
		// The stream ran and then lost its place (a watcher too slow for
		// the watch cache): events of the gap may be missing.
		f := newFixture(t)
		f.sync()
		f.timedOut()
		w, _ := f.stream(resume, added(pod("b", t0)), errorEvent(errGone))
		recv(t, w, watch.Added)
		recv(t, w, watch.Error)
		w.Stop()
		f.list(relist, podList("20", ""), nil)
		f.wantRelists(1, 1, 0)
		f.wantIdle(0)
	})
	t.Run("410 after an early close", func(t *testing.T) {
		// A broken connection: the writes until the resume are a gap.
		f := newFixture(t)
		f.sync()
		w, inner := f.stream(resume)
		f.clk.Step(10 * time.Second)
		inner.Stop()
		waitClosed(t, w)
		w.Stop()
		f.failWatch(resume, errGone)
		f.list(relist, podList("20", ""), nil)
		f.wantRestarts(0, 1, 0, 0)
		f.wantRelists(1, 1, 0)
		f.wantIdle(0)
	})
	t.Run("410 after a failed watch call", func(t *testing.T) {
		// Timed out, then the API server was unreachable for a while.
		f := newFixture(t)
		f.sync()
		f.timedOut()
		f.failWatch(resume, errInternal)
		f.clk.Step(30 * time.Second)
		f.failWatch(resume, errGone)
		f.list(relist, podList("20", ""), nil)
		f.wantRelists(1, 1, 0)
		f.wantIdle(0)
	})
}

func TestRelistExpiredFromWatchCall(t *testing.T) {
	f := newFixture(t)
	f.sync()

	f.failWatch(resume, errGone)
	f.list(relist, podList("20", ""), nil)

	f.wantRelists(1, 1, 0)
	f.wantRestarts(0, 0, 0, 0) // no stream was opened
}

func TestRelistExpiredFromListWhenReflectorGivesUp(t *testing.T) {
	f := newFixture(t)

	// The first cycle's LIST fails with 410 and so does the immediate retry:
	// ListAndWatch returns the error and the reflector backs off.
	f.list(firstList, nil, errGone)
	f.list(quorum, nil, errGone)
	f.wantRelists(1, 0, 0)
	f.list(quorum, podList("20", ""), nil)

	f.wantRelists(1, 1, 0)
}

func TestRelistTooLargeResourceVersionRetriedInCycle(t *testing.T) {
	f := newFixture(t)
	f.list(relist, nil, errTooLargeRV)
	f.list(quorum, podList("20", ""), nil)
	f.wantRelists(1, 0, 0)
}

func TestRelistError(t *testing.T) {
	t.Run("error event", func(t *testing.T) {
		f := newFixture(t)
		f.sync()
		// StreamWatcher turns a decode error into an InternalError event.
		w, _ := f.stream(resume, errorEvent(errInternal))
		recv(t, w, watch.Error)
		w.Stop()
		f.list(relist, podList("20", ""), nil)
		f.wantRestarts(0, 0, 1, 0)
		f.wantRelists(1, 0, 1)
	})
	t.Run("failing list is a relist per reflector attempt", func(t *testing.T) {
		f := newFixture(t)
		f.list(firstList, nil, errForbidden)
		f.list(firstList, nil, errForbidden) // after backoff
		f.list(firstList, podList("10", ""), nil)
		f.wantRelists(1, 0, 2)
	})
	t.Run("very short watch", func(t *testing.T) {
		f := newFixture(t)
		f.sync()
		// Closed at once with no events: the reflector returns
		// VeryShortWatchError and relists. The wrapper saw a clean close.
		w, inner := f.stream(resume)
		inner.Stop()
		waitClosed(t, w)
		w.Stop()
		f.list(relist, podList("20", ""), nil)
		f.wantRestarts(0, 1, 0, 0)
		f.wantRelists(1, 0, 1)
	})
}

func TestWatchRestartIsNotRelist(t *testing.T) {
	f := newFixture(t)
	f.sync()

	// The server closes the stream when timeoutSeconds (300) runs out.
	w, inner := f.stream(resume)
	f.clk.Step(300 * time.Second)
	inner.Stop()
	waitClosed(t, w)
	w.Stop()
	f.wantRestarts(1, 0, 0, 0)

	// Resumed; closed early without error.
	w, inner = f.stream(resume)
	f.clk.Step(10 * time.Second)
	inner.Stop()
	waitClosed(t, w)
	w.Stop()
	f.wantRestarts(1, 1, 0, 0)

	// Resumed; throttled (429): the reflector backs off and resumes again.
	w, _ = f.stream(resume, errorEvent(errThrottled))
	recv(t, w, watch.Error)
	w.Stop()
	f.wantRestarts(1, 1, 1, 0)

	// Resumed; stopped by the client (shutdown).
	w, _ = f.stream(resume)
	w.Stop()
	w.Stop() // idempotent, counted once
	waitClosed(t, w)
	f.wantRestarts(1, 2, 1, 0)

	f.wantRelists(1, 0, 0)
}

func TestWatchListInitial(t *testing.T) {
	f := newFixture(t)
	w, inner := f.stream(streamAll, added(pod("a", t0.Add(-time.Minute))), added(pod("b", t0.Add(-time.Minute))), initialEventsEnd("10"))
	f.clk.Step(3 * time.Second) // the bookmark is observed only after both ADDED were read
	recv(t, w, watch.Added)
	recv(t, w, watch.Added)
	recv(t, w, watch.Bookmark)

	f.wantRelists(1, 0, 0)
	if got := testutil.ToFloat64(f.m.initialSync.WithLabelValues(resource)); got != 3 {
		t.Errorf("initial sync duration = %v, want 3 (stream start to initial-events-end)", got)
	}
	if got := testutil.ToFloat64(f.m.bookmarks.WithLabelValues(resource)); got != 1 {
		t.Errorf("bookmarks = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.m.events.WithLabelValues(resource, "added")); got != 2 {
		t.Errorf("added events = %v, want 2 (initial events count)", got)
	}
	if got := testutil.ToFloat64(f.m.lastEvent.WithLabelValues(resource)); got != float64(t0.Unix()+3) {
		t.Errorf("last event timestamp = %v, want %d", got, t0.Unix()+3)
	}
	if n, _ := f.lag(); n != 0 {
		t.Errorf("delivery lag observed %d times for initial events, want 0", n)
	}

	// The same stream goes on live.
	send(t, w, inner, modified(pod("a", t0.Add(-time.Minute), t0.Add(time.Second))))
	if n, sum := f.lag(); n != 1 || sum != 2 {
		t.Errorf("delivery lag count, sum = %d, %v, want 1, 2", n, sum)
	}
	f.wantRelists(1, 0, 0)
}

func TestWatchListFallbackAndRetriesAreOneCycle(t *testing.T) {
	t.Run("fall back to LIST", func(t *testing.T) {
		f := newFixture(t)
		f.failWatch(streamAll, errInternal) // e.g. a server without WatchList
		f.list(firstList, podList("10", ""), nil)
		f.wantRelists(1, 0, 0)
	})
	t.Run("stream expired during initial events", func(t *testing.T) {
		f := newFixture(t)
		w, _ := f.stream(streamAll, added(pod("a", t0)), errorEvent(errGone))
		recv(t, w, watch.Added)
		recv(t, w, watch.Error)
		w.Stop()
		w, _ = f.stream(streamAll, added(pod("b", t0)), initialEventsEnd("20"))
		recv(t, w, watch.Added)
		recv(t, w, watch.Bookmark)

		f.wantRelists(1, 0, 0)
		f.wantRestarts(0, 0, 0, 1)
		if got := f.seen(); len(got) != 1 || got["b"] == 0 {
			t.Errorf("seen = %v, want only b from the stream that completed", got)
		}
	})
	t.Run("live 410 starts a new cycle", func(t *testing.T) {
		f := newFixture(t)
		w, _ := f.stream(streamAll, initialEventsEnd("10"), errorEvent(errGone))
		recv(t, w, watch.Bookmark)
		recv(t, w, watch.Error)
		w.Stop()
		f.failWatch(streamAll, errGone) // stale RV: the reflector retries at once
		w, _ = f.stream(streamAll, initialEventsEnd("20"))
		recv(t, w, watch.Bookmark)

		f.wantRelists(1, 1, 0)
		f.wantRestarts(0, 0, 0, 1)
	})
}

func TestConsistencyDetectorListIsNotRelist(t *testing.T) {
	f := newFixture(t)
	w, _ := f.stream(streamAll, initialEventsEnd("10"))
	recv(t, w, watch.Bookmark)
	f.list(metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, podList("10", ""), nil)
	f.wantRelists(1, 0, 0)
}

func TestDeliveryLag(t *testing.T) {
	f := newFixture(t)
	written := t0.Add(-10 * time.Second)
	f.sync(pod("a", written), pod("gone", written))

	w, inner := f.stream(resume)
	steps := []struct {
		name      string
		ev        watch.Event
		wantCount uint64
		wantSum   float64
	}{
		{"replay of the listed write", modified(pod("a", written)), 0, 0},
		{"new write 2 s ago", modified(pod("a", written, t0.Add(-2*time.Second))), 1, 2},
		{"same write again", modified(pod("a", written, t0.Add(-2*time.Second))), 1, 2},
		{"new object 1 s ago", added(pod("b", t0.Add(-time.Second))), 2, 3},
		{"no managedFields", added(pod("c")), 2, 3},
		{"deletion", deleted(pod("b", t0)), 2, 3},
		{"server clock ahead: 0", modified(pod("a", t0.Add(5*time.Second))), 3, 3},
	}
	for _, s := range steps {
		send(t, w, inner, s.ev)
		if n, sum := f.lag(); n != s.wantCount || sum != s.wantSum {
			t.Errorf("after %s: lag count, sum = %d, %v, want %d, %v", s.name, n, sum, s.wantCount, s.wantSum)
		}
	}
	if _, ok := f.seen()["b"]; ok {
		t.Error("deleted object b still tracked")
	}

	// A completed relist replaces the map: "gone" was deleted while no
	// watch was open and must not stay.
	f.list(relist, podList("30", "", pod("a", t0)), nil)
	if got := f.seen(); len(got) != 1 || got["a"] != t0.Unix() {
		t.Errorf("seen after relist = %v, want only a at %d", got, t0.Unix())
	}
}

func TestWrapZeroInitialises(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg).Wrap("deployments.apps", &scriptedLW{})

	for name, want := range map[string]int{
		"kube_convergence_watch_relists_total":                 4,
		"kube_convergence_watch_restarts_total":                4,
		"kube_convergence_watch_events_total":                  3,
		"kube_convergence_watch_bookmarks_total":               1,
		"kube_convergence_watch_delivery_lag_seconds":          1,
		"kube_convergence_watch_last_event_timestamp_seconds":  0,
		"kube_convergence_watch_initial_sync_duration_seconds": 0,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != want {
			t.Errorf("%s: %d series (err %v), want %d", name, got, err, want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestNilRegisterer(t *testing.T) {
	m := NewMetrics(nil)
	f := &scriptedLW{}
	f.script([]listResult{{podList("1", ""), nil}}, nil)
	if _, err := m.Wrap(resource, f).(cache.ListerWatcherWithContext).ListWithContext(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.relists.WithLabelValues(resource, reasonInitial)); got != 1 {
		t.Errorf("relists{initial} = %v, want 1", got)
	}
}

type noWatchListLW struct{ scriptedLW }

func (*noWatchListLW) IsWatchListSemanticsUnSupported() bool { return true }

func TestWatchListSemanticsDelegated(t *testing.T) {
	m := NewMetrics(nil)
	type semantics interface{ IsWatchListSemanticsUnSupported() bool }
	if m.Wrap(resource, &scriptedLW{}).(semantics).IsWatchListSemanticsUnSupported() {
		t.Error("wrapper of a plain ListerWatcher says WatchList is unsupported")
	}
	if !m.Wrap(resource, &noWatchListLW{}).(semantics).IsWatchListSemanticsUnSupported() {
		t.Error("wrapper hides the inner IsWatchListSemanticsUnSupported() == true")
	}
	if _, ok := m.Wrap(resource, &scriptedLW{}).(cache.ListerWatcherWithContext); !ok {
		t.Error("wrapper does not implement ListerWatcherWithContext")
	}

	// A real reflector over such a wrapper must LIST even with WatchList on,
	// as fake clientsets require.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	inner := &noWatchListLW{}
	inner.script([]listResult{{podList("10", ""), nil}}, nil)
	runReflector(t, m.Wrap(resource, inner), func() bool { _, _, idle := inner.calls(); return idle == 1 })
	if lists, _, _ := inner.calls(); len(lists) != 1 {
		t.Errorf("reflector made %d LIST calls, want 1", len(lists))
	}
}

// runReflector runs a real v0.37.2 reflector over lw, with a 10 ms backoff
// instead of 0.8-30 s, until done reports true.
func runReflector(t *testing.T, lw cache.ListerWatcher, done func() bool) {
	t.Helper()
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
		Backoff: &wait.Backoff{Duration: 10 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	waitFor(t, done)
}

// runInformer runs a real SharedIndexInformer over lw until done reports true.
func runInformer(t *testing.T, lw cache.ListerWatcher, done func() bool) {
	t.Helper()
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		inf.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	waitFor(t, done)
}

func waitFor(t *testing.T, done func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return done(), nil
	})
	if err != nil {
		t.Fatalf("scripted scenario did not finish: %v", err)
	}
}

func preloaded(events ...watch.Event) watchResult {
	w := watch.NewRaceFreeFake()
	for _, ev := range events {
		w.Action(ev.Type, ev.Object)
	}
	return watchResult{w: w}
}

// TestRealReflector checks the state machine against what the v0.37.2
// reflector really does, with WatchList off and on.
func TestRealReflector(t *testing.T) {
	a := pod("a", t0)
	a11 := a.DeepCopy()
	a11.ResourceVersion = "11"

	t.Run("list", func(t *testing.T) {
		clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
		f := newFixture(t)
		f.fake.script(
			[]listResult{
				{podList("10", "", a), nil}, // initial
				{nil, errGone},              // relist at RV 11 after the 410 event ...
				{podList("30", ""), nil},    // ... retried at once with RV ""
				{podList("40", ""), nil},    // relist after the 500 event
			},
			[]watchResult{
				preloaded(modified(a11), errorEvent(errGone)),
				preloaded(errorEvent(errThrottled)), // backoff, then resume: no relist
				preloaded(errorEvent(errInternal)),
			})
		runReflector(t, f.lw, func() bool { _, _, idle := f.fake.calls(); return idle == 1 })

		f.wantRelists(1, 1, 1)
		f.wantRestarts(0, 1, 2, 1) // closed: the idle stream, stopped at shutdown
		lists, watches, _ := f.fake.calls()
		if len(lists) != 4 || len(watches) != 4 {
			t.Fatalf("%d LIST and %d WATCH calls, want 4 and 4", len(lists), len(watches))
		}
		if lists[1].ResourceVersion != "11" || lists[2].ResourceVersion != "" {
			t.Errorf("relist resource versions = %q, %q, want 11 then \"\" (the reflector's immediate retry after 410)", lists[1].ResourceVersion, lists[2].ResourceVersion)
		}
	})

	t.Run("watchlist", func(t *testing.T) {
		clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
		f := newFixture(t)
		f.fake.script(nil, []watchResult{
			preloaded(added(a), initialEventsEnd("10"), modified(a11), errorEvent(errGone)),
			{err: errGone}, // WatchList at RV 11: expired, retried at once with RV ""
			preloaded(added(a), initialEventsEnd("30")),
		})
		runReflector(t, f.lw, func() bool {
			return testutil.ToFloat64(f.m.bookmarks.WithLabelValues(resource)) == 2
		})

		f.wantRelists(1, 1, 0)
		f.wantRestarts(0, 1, 0, 1) // closed: the live stream, stopped at shutdown
		lists, watches, _ := f.fake.calls()
		if len(lists) != 0 || len(watches) != 3 {
			t.Errorf("%d LIST and %d WATCH calls, want 0 and 3", len(lists), len(watches))
		}
		for i, o := range watches {
			if o.SendInitialEvents == nil || !*o.SendInitialEvents {
				t.Errorf("WATCH %d without sendInitialEvents", i)
			}
		}
	})

	t.Run("watchlist falls back to list", func(t *testing.T) {
		clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
		f := newFixture(t)
		f.fake.script([]listResult{{podList("10", "", a), nil}}, []watchResult{{err: errInternal}})
		runReflector(t, f.lw, func() bool { _, _, idle := f.fake.calls(); return idle == 1 })

		f.wantRelists(1, 0, 0)
		if lists, _, _ := f.fake.calls(); len(lists) != 1 {
			t.Errorf("%d LIST calls, want 1", len(lists))
		}
	})
}

// TestRealInformer runs the same 410 recovery through NewSharedIndexInformer
// (its reflector backs off 0.8-1.6 s before relisting).
func TestRealInformer(t *testing.T) {
	a := pod("a", t0)
	for _, watchList := range []bool{false, true} {
		name := map[bool]string{false: "list", true: "watchlist"}[watchList]
		t.Run(name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			f := newFixture(t)
			if watchList {
				f.fake.script(nil, []watchResult{
					preloaded(added(a), initialEventsEnd("10"), errorEvent(errGone)),
					preloaded(added(a), initialEventsEnd("20")),
				})
			} else {
				f.fake.script(
					[]listResult{{podList("10", "", a), nil}, {podList("20", "", a), nil}},
					[]watchResult{preloaded(errorEvent(errGone))})
			}
			runInformer(t, f.lw, func() bool {
				if watchList { // the second stream stays open as the live watch
					return testutil.ToFloat64(f.m.bookmarks.WithLabelValues(resource)) == 2
				}
				_, _, idle := f.fake.calls()
				return idle == 1
			})
			f.wantRelists(1, 1, 0)
			f.wantRestarts(0, 1, 0, 1) // closed: the live stream, stopped at shutdown
		})
	}
}
