package tracker

import "time"

// Seen says how a notification reached the exporter: when it was received
// (the exporter's clock, at the watch decoder) and whether it was live.
//
// Live is false for what a list cycle delivered (the first list, a relist
// after a watch gap, the initial events of a WatchList stream) and for what
// the informer replayed to a handler attached late: such an object shows
// the state after a span the exporter did not watch, so nothing that
// happened inside that span can be timed from its receipt. A deletion is
// live only when its own watch event delivered it; one learned from a relist
// (a tombstone) is dated by the relist and is not live.
//
// Every tracker method that takes a notification takes a Seen, with this one
// meaning, instead of a (time, listed) or (time, live) pair.
type Seen struct {
	At   time.Time
	Live bool
}

// LiveAt is a live notification received at t (tests, and facts derived
// from a live one).
func LiveAt(t time.Time) Seen { return Seen{At: t, Live: true} }

// ListedAt is a notification delivered by a list cycle at t.
func ListedAt(t time.Time) Seen { return Seen{At: t} }
