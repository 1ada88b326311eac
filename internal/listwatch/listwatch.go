package listwatch

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// The reflector (client-go v0.37.2 tools/cache/reflector.go) adapts its
// ListerWatcher with ToListerWatcherWithContext and asks
// watchlist.DoesClientNotSupportWatchListSemantics whether it may use
// WatchList; the wrapper implements both so that wrapping changes nothing.
var (
	_ cache.ListerWatcher            = (*listerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*listerWatcher)(nil)
	_ interface {
		IsWatchListSemanticsUnSupported() bool
	} = (*listerWatcher)(nil)
)

// listerWatcher instruments one reflector's calls. It never parses or compares
// resource versions; it reads only which call was made, with which options,
// and how it ended.
//
// State machine of relists (one "list cycle" = one full re-read):
//   - A cycle opens at a LIST without continue token or at a WATCH with
//     sendInitialEvents=true, unless one is already open; opening it counts one
//     relist with reason nextReason.
//   - nextReason is set by how the last stream or list ended: 410 -> expired,
//     or idle when it answered the resume right after a stream that ended
//     at its timeout, before any event on the new stream (the previous
//     stream was live until then: the relist re-reads nothing missed);
//     any other error -> error, a clean end -> error too (a relist right after
//     a clean end means the reflector saw a failure we did not, e.g.
//     VeryShortWatchError: closed within 1 s with no events). It starts as
//     initial. A WATCH without sendInitialEvents (a resume from the last
//     resource version) opens nothing, so a clean end followed by a resume is
//     a watch restart, not a relist.
//   - The cycle completes at the LIST page without continue token or at the
//     stream's initial-events-end bookmark. Until then further LISTs and
//     WatchList streams (pages, the reflector's retry after a 410, the
//     fall-back from WatchList to LIST, the retries of a failed stream) belong
//     to it.
//   - A LIST error the reflector does not retry at once ends the cycle
//     unfinished: ListAndWatch returns, the reflector backs off (0.8 s to 30 s)
//     and its next attempt is a new relist, so a list that keeps failing shows
//     as a rising error rate instead of one relist forever.
type listerWatcher struct {
	lw    cache.ListerWatcher            // as given: deprecated methods and the WatchList check
	ctxLW cache.ListerWatcherWithContext // lw adapted once, as the reflector does
	m     *resourceMetrics
	now   func() time.Time

	mu          sync.Mutex
	nextReason  string
	cycleOpen   bool
	cycleStart  time.Time
	listRetried bool // the open cycle had its one immediate retry after a 410 LIST
	// Newest managedFields time (unix seconds) per object: seen as of the last
	// completed cycle plus live events; next being built by the open cycle's
	// current attempt, replacing seen wholesale when it completes so objects
	// deleted while no watch was open do not stay forever.
	seen map[types.UID]int64
	next map[types.UID]int64
	// broken: the last watch stream ended abnormally (closed early or with
	// an error other than 410). The reflector then resumes from its last
	// resource version, and the API server replays the writes of the gap as
	// ordinary events (from its watch cache, or etcd): see watcher.backlog.
	broken bool
	// timedOut: the last stream ended at its timeout and no watch call
	// has failed since, so a resume now follows a live stream at once.
	timedOut bool
}

func (l *listerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.lw)
}

// List and Watch complete cache.ListerWatcher; they delegate to the caller's
// own deprecated methods so that a caller using them sees no difference.
func (l *listerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.list(opts, func() (runtime.Object, error) { return l.lw.List(opts) }) //nolint:staticcheck // SA1019: see above
}

func (l *listerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.list(opts, func() (runtime.Object, error) { return l.ctxLW.ListWithContext(ctx, opts) })
}

func (l *listerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.watch(opts, func() (watch.Interface, error) { return l.lw.Watch(opts) }) //nolint:staticcheck // SA1019: see List
}

func (l *listerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return l.watch(opts, func() (watch.Interface, error) { return l.ctxLW.WatchWithContext(ctx, opts) })
}

// list passes results and errors through unchanged (no %w wrapping here): the
// reflector and the pager classify them with apierrors.
func (l *listerWatcher) list(opts metav1.ListOptions, call func() (runtime.Object, error)) (runtime.Object, error) {
	// The WatchList consistency detector (KUBE_WATCHLIST_INCONSISTENCY_DETECTOR,
	// meant for CI) re-lists with resourceVersionMatch=Exact after a stream; the
	// reflector's own lists never set it. It re-reads nothing for the informer.
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		return call()
	}
	page := opts.Continue != ""
	if !page {
		l.startAttempt()
	}
	obj, err := call()
	if err != nil {
		l.listFailed(page, err)
		return obj, err
	}
	l.listPage(obj)
	return obj, nil
}

func (l *listerWatcher) watch(opts metav1.ListOptions, call func() (watch.Interface, error)) (watch.Interface, error) {
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial {
		l.startAttempt()
	}
	start := l.now()
	w, err := call()
	if err != nil {
		// No stream, so no restart. A failed WatchList stream keeps its cycle
		// open: the reflector retries it or falls back to LIST (watchList,
		// ListAndWatchWithContext).
		l.mu.Lock()
		l.nextReason = reasonOf(err)
		if l.nextReason == reasonExpired && l.timedOut && !initial {
			l.nextReason = reasonIdle
		}
		l.timedOut = false
		l.mu.Unlock()
		return w, err
	}
	l.mu.Lock()
	resumed := l.broken && !initial
	afterTimeout := l.timedOut && !initial
	l.broken, l.timedOut = false, false
	l.mu.Unlock()
	// The call returns once the stream is connected: client-go retries a
	// failing watch request inside it (rest.Request.Watch, about 10 s), so
	// writes made while it was retrying belong to the gap too.
	return newWatcher(l, w, initial, resumed, afterTimeout, start, l.now(), opts.TimeoutSeconds), nil
}

// startAttempt opens a cycle if none is open and starts a fresh attempt in it.
func (l *listerWatcher) startAttempt() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cycleOpen {
		l.cycleOpen = true
		l.cycleStart = l.now()
		l.listRetried = false
		l.m.relists[l.nextReason].Inc()
	}
	// A new attempt re-reads everything: drop what a failed one collected.
	l.next = make(map[types.UID]int64, len(l.seen))
	l.broken = false // the list covers the gap
	l.timedOut = false
}

func (l *listerWatcher) listFailed(page bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextReason = reasonOf(err)
	switch {
	case page && apierrors.IsResourceExpired(err):
		// tools/pager falls back to a full list at once (FullListIfExpired).
		return
	case !page && !l.listRetried && (isExpired(err) || isTooLargeResourceVersion(err)):
		// Reflector.list retries once, at once, with resourceVersion="".
		l.listRetried = true
		return
	}
	l.cycleOpen = false
	l.next = nil
}

func (l *listerWatcher) listPage(obj runtime.Object) {
	lm, err := meta.ListAccessor(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// The reflector fails on it too ("unable to understand list result").
		l.nextReason = reasonError
		l.cycleOpen = false
		l.next = nil
		return
	}
	now := l.now()
	_ = meta.EachListItem(obj, func(o runtime.Object) error {
		om, err := meta.Accessor(o)
		if err != nil {
			return nil //nolint:nilerr // the reflector skips it too
		}
		informers.Stamp(om, now, true)
		if l.next != nil {
			if t := newestManagedTime(om); t > 0 {
				l.next[om.GetUID()] = t
			}
		}
		return nil
	})
	if lm.GetContinue() == "" {
		l.completeCycleLocked()
	}
}

// completeCycleLocked records the end of the open cycle; l.mu must be held.
func (l *listerWatcher) completeCycleLocked() {
	if !l.cycleOpen {
		return
	}
	l.cycleOpen = false
	l.m.initialSync().Set(l.now().Sub(l.cycleStart).Seconds())
	l.seen, l.next = l.next, nil
}

// reasonOf classifies a list, watch or ERROR-event failure.
func reasonOf(err error) string {
	if isExpired(err) {
		return reasonExpired
	}
	return reasonError
}

// isExpired is the reflector's isExpiredError: 410 is Expired since
// Kubernetes 1.18 and Gone before.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeResourceVersion matches the status cause API servers set since
// 1.18.6; the reflector also matches older servers' messages, which we skip
// (at worst one extra relist counted on such a server).
func isTooLargeResourceVersion(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}
