package collectors

import (
	"strings"
	"sync"
	"time"
)

// CreatedTimes gives the counters and histograms a collector computes at
// scrape time (prometheus.NewConstMetric) the created timestamp that
// client_golang's own counters carry in protobuf scrapes, so that a
// Prometheus with created-timestamp-zero-ingestion counts a series' first
// increments (README, "Scrape configuration: created timestamps"). Without
// it a series born between two scrapes with its first events in it loses
// them to rate() and increase(): on the trial's sandbox (docs/trials.md) a
// quota-blocked ReplicaSet's first 14 FailedCreate occurrences, written
// within a second, before the first scrape.
//
// A series' created time is the previous scrape's time (the start time
// before the first scrape): it did not exist then, so it was 0, and it is
// before the current scrape. A series that a scrape does not see is
// forgotten, and gets a new created time when it comes back (a released
// label set counts from 0 again). Concurrent scrapes are serialised.
type CreatedTimes struct {
	mu         sync.Mutex
	prev       time.Time
	born, next map[string]time.Time
}

// NewCreatedTimes returns the created times of a collector that starts
// counting at start.
func NewCreatedTimes(start time.Time) *CreatedTimes {
	return &CreatedTimes{prev: start, born: map[string]time.Time{}}
}

// Scrape begins a scrape at now. At returns the created time of one series
// (family name and label values); done ends the scrape.
func (c *CreatedTimes) Scrape(now time.Time) (at func(family string, labels ...string) time.Time, done func()) {
	c.mu.Lock()
	c.next = make(map[string]time.Time, len(c.born))
	at = func(family string, labels ...string) time.Time {
		k := family + "\xff" + strings.Join(labels, "\xff")
		t, ok := c.born[k]
		if !ok {
			t = c.prev
		}
		c.next[k] = t
		return t
	}
	done = func() {
		c.born, c.next = c.next, nil
		if now.After(c.prev) {
			c.prev = now
		}
		c.mu.Unlock()
	}
	return at, done
}
