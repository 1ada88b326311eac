package tracker

import (
	"container/heap"
	"time"
)

// dueIndex orders the objects in flight (starting pods, pending endpoint
// pairs) by their next threshold deadline, so that the once-a-second Tick
// costs what is due, not what is tracked: at 20,000 tracked pods, walking
// and sorting them all each second cost 4.7 ms (docs/benchmarks.md). An
// object is in the index only while it has a deadline; each keeps its own
// position, so a change of deadline is one O(log n) fix and a Tick with
// nothing due is one comparison and no allocation.
type dueIndex[T any] struct{ items dueItems[T] }

// dueItem is an object's place in a dueIndex; embed it in the object.
type dueItem[T any] struct {
	at    time.Time // the deadline: the next crossing is due once now is after it
	key   string    // breaks ties between equal deadlines, for a stable order
	index int       // position in the heap, -1 when not in it
	v     T
}

func newDueItem[T any](key string, v T) dueItem[T] { return dueItem[T]{key: key, index: -1, v: v} }

// set moves it to deadline at; a zero at removes it from the index.
func (d *dueIndex[T]) set(it *dueItem[T], at time.Time) {
	switch {
	case at.IsZero():
		if it.index >= 0 {
			heap.Remove(&d.items, it.index)
		}
	case it.index >= 0:
		it.at = at
		heap.Fix(&d.items, it.index)
	default:
		it.at = at
		heap.Push(&d.items, it)
	}
}

// next returns the object with the earliest deadline if that deadline is
// before now.
func (d *dueIndex[T]) next(now time.Time) (T, bool) {
	if len(d.items) == 0 || !now.After(d.items[0].at) {
		var zero T
		return zero, false
	}
	return d.items[0].v, true
}

func (d *dueIndex[T]) len() int { return len(d.items) }

type dueItems[T any] []*dueItem[T]

func (h dueItems[T]) Len() int { return len(h) }
func (h dueItems[T]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key < h[j].key
}
func (h dueItems[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

// Push and Pop are for container/heap only.
func (h *dueItems[T]) Push(x any) {
	it := x.(*dueItem[T])
	it.index = len(*h)
	*h = append(*h, it)
}

func (h *dueItems[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.index = -1
	return it
}

// durations converts thresholds in seconds to durations, the unit deadlines
// and crossings are computed in (one rounding, shared by both, so a due
// deadline always produces its crossing).
func durations(secs []float64) []time.Duration {
	out := make([]time.Duration, len(secs))
	for i, s := range secs {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}
