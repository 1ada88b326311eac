package listwatch

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// watcher forwards one watch stream to the reflector and observes each event
// on the way. The reflector reads ResultChan directly, so a forwarding
// goroutine is the only place to see events; it costs one channel hand-off per
// event (see BenchmarkWatchEvent).
type watcher struct {
	l       *listerWatcher
	inner   watch.Interface
	out     chan watch.Event
	done    chan struct{} // closed by Stop
	exited  chan struct{} // closed when run returns
	stop    sync.Once
	start   time.Time
	timeout time.Duration // requested timeoutSeconds; 0 if none
	// connected: when the watch call returned the stream.
	connected time.Time

	// initial: the stream is still delivering the initial events of a
	// WatchList request. Only run touches it.
	initial bool
	// backlog: the stream resumes after a broken one and may still be
	// replaying the writes of the gap. Only run touches it; see replayed.
	backlog bool
	// afterTimeout: the stream resumes right after one that ended at its
	// timeout; quiet: no event has arrived on it yet. A 410 while both hold
	// makes the relist idle. Only run touches quiet.
	afterTimeout bool
	quiet        bool
	// ended: the stream's end has been counted; guarded by l.mu.
	ended bool
}

func newWatcher(l *listerWatcher, inner watch.Interface, initial, resumed, afterTimeout bool, start, connected time.Time, timeoutSeconds *int64) *watcher {
	w := &watcher{
		l:         l,
		inner:     inner,
		out:       make(chan watch.Event),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		start:     start,
		connected: connected,
		initial:   initial,
		backlog:   resumed,

		afterTimeout: afterTimeout,
		quiet:        true,
	}
	if timeoutSeconds != nil {
		w.timeout = time.Duration(*timeoutSeconds) * time.Second
	}
	go w.run()
	return w
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the inner watch and returns once forwarding has stopped, so no
// metric moves for this stream afterwards. A stream that had not ended yet
// counts as closed: the reflector stops a healthy stream only on shutdown or
// a store error (reflector.go handleAnyWatch).
func (w *watcher) Stop() {
	w.stop.Do(func() {
		w.end(restartClosed)
		w.inner.Stop()
		close(w.done)
	})
	<-w.exited
}

func (w *watcher) run() {
	defer close(w.exited)
	defer close(w.out)
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-in:
			if !ok {
				w.closed()
				return
			}
			w.observe(ev)
			select {
			case w.out <- ev:
			case <-w.done:
				return
			}
		}
	}
}

// closed counts a stream the server (or the transport) closed without error.
// The API server closes a watch when its timeoutSeconds runs out, on a timer
// started after our call, so a stream open at least that long ended by
// timeout. The reflector always sets timeoutSeconds (5 to 10 min); without it
// the server picks a random timeout we cannot know, and we say closed.
func (w *watcher) closed() {
	reason := restartClosed
	if w.timeout > 0 && w.l.now().Sub(w.start) >= w.timeout {
		reason = restartTimeout
	}
	w.end(reason)
}

// end counts the end of the stream once and sets the reason of a relist that
// may follow: expired after a 410, error after anything else (see
// listerWatcher).
func (w *watcher) end(reason string) {
	w.endIdle(reason, false)
}

// endIdle is end with a relist that may follow counted idle rather than
// expired (see listerWatcher).
func (w *watcher) endIdle(reason string, idle bool) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	w.l.m.restarts[reason].Inc()
	// A stream that ends at its timeout is resumed at once: no gap. Any
	// other end leaves one until the reflector's next watch.
	w.l.broken = reason != restartTimeout
	w.l.timedOut = reason == restartTimeout
	switch {
	case reason == reasonExpired && idle:
		w.l.nextReason = reasonIdle
	case reason == reasonExpired:
		w.l.nextReason = reasonExpired
	default:
		w.l.nextReason = reasonError
	}
}

func (w *watcher) observe(ev watch.Event) {
	m := w.l.m
	quiet := w.quiet
	w.quiet = false
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		now := w.l.now()
		m.events[ev.Type].Inc()
		m.lastEvent().Set(unixSeconds(now))
		// An object without metadata is dropped by the reflector too
		// ("Unable to understand watch event").
		if obj, err := meta.Accessor(ev.Object); err == nil {
			// Initial events of a WatchList stream stand for a LIST; the
			// replayed writes of a gap are no more live than they are.
			informers.Stamp(obj, now, w.initial || w.replayed(obj, ev.Type, now))
			w.track(obj, ev.Type, now)
		}
	case watch.Bookmark:
		m.bookmarks.Inc()
		m.lastEvent().Set(unixSeconds(w.l.now()))
		if !w.initial {
			return
		}
		if obj, err := meta.Accessor(ev.Object); err == nil && obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			w.initial = false
			w.l.mu.Lock()
			w.l.completeCycleLocked()
			w.l.mu.Unlock()
		}
	case watch.Error:
		// The reflector ends the stream on any ERROR event and stops it.
		// Decode errors arrive as ERROR events too (StreamWatcher.receive).
		w.endIdle(reasonOf(apierrors.FromObject(ev.Object)), quiet && w.afterTimeout)
	}
}

// backlogWindow bounds how long after a resume events may be taken for the
// gap's replay: the API server sends the backlog at once, from its watch
// cache or etcd.
const backlogWindow = 5 * time.Second

// replayed reports whether an event of a stream resumed after a gap is the
// replay of a write made during the gap. When a watch breaks (a network cut,
// an API server restart with a watch cache that still holds the resource
// version) the reflector resumes from its last resource version without a
// relist, and the API server sends every write of the gap as an ordinary
// event, at the moment of the resume: timing them from their receipt would
// invent a pod started or published in about 0 s. Resource versions are
// opaque, so the write's own time decides: the newest managedFields time (one
// second precision, truncated) of a replayed write is before the second the
// resume started, and the first event written at or after it ends the
// backlog (events come in write order). Limits: a write in the same second
// as the resume counts as live (timed from the replay, at most 1 s late), an
// API server clock ahead of the exporter's makes more writes look live, and
// after backlogWindow everything is live.
func (w *watcher) replayed(obj metav1.Object, typ watch.EventType, now time.Time) bool {
	if !w.backlog {
		return false
	}
	if now.Sub(w.connected) > backlogWindow {
		w.backlog = false
		return false
	}
	t := newestManagedTime(obj)
	if t > 0 && t < w.connected.Unix() {
		return true
	}
	if typ != watch.Deleted { // a deletion carries the time of the last write before it
		w.backlog = false
	}
	return false
}

// track keeps the newest managedFields time per UID and observes delivery lag
// for live events that carry a newer one.
func (w *watcher) track(obj metav1.Object, typ watch.EventType, now time.Time) {
	uid := obj.GetUID()
	if uid == "" {
		return
	}
	t := newestManagedTime(obj)
	l := w.l
	l.mu.Lock()
	if w.initial {
		// Initial events of a WatchList stream stand for a LIST: remember,
		// never observe.
		if l.next != nil && t > 0 && typ != watch.Deleted {
			l.next[uid] = t
		}
		l.mu.Unlock()
		return
	}
	if typ == watch.Deleted {
		delete(l.seen, uid)
		l.mu.Unlock()
		return
	}
	if prev, ok := l.seen[uid]; t == 0 || (ok && t <= prev) {
		l.mu.Unlock()
		return
	}
	if l.seen == nil {
		l.seen = make(map[types.UID]int64)
	}
	l.seen[uid] = t
	l.mu.Unlock()
	l.m.lag.Observe(max(now.Sub(time.Unix(t, 0)).Seconds(), 0))
}

// newestManagedTime returns the newest managedFields[].time in unix seconds,
// or 0 if there is none. It is the time of the last write by any manager, the
// best write time the API offers (one-second precision).
func newestManagedTime(obj metav1.Object) int64 {
	var newest int64
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil {
			newest = max(newest, f.Time.Unix())
		}
	}
	return newest
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
