package collectors

import (
	"testing"
	"time"
)

func TestCreatedTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewCreatedTimes(start)

	// First scrape: every series is from the start.
	at, done := c.Scrape(start.Add(30 * time.Second))
	if got := at("f", "a"); !got.Equal(start) {
		t.Errorf("series at the first scrape: created %v, want the start %v", got, start)
	}
	done()

	// A series born between the first and the second scrape: created at
	// the first scrape, when it did not exist; the old one keeps its time.
	at, done = c.Scrape(start.Add(60 * time.Second))
	if got := at("f", "a"); !got.Equal(start) {
		t.Errorf("old series: created %v, want %v", got, start)
	}
	if got, want := at("f", "b"), start.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("new series: created %v, want the previous scrape %v", got, want)
	}
	if got, want := at("g", "b"), start.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("same labels in another family: created %v, want %v", got, want)
	}
	done()

	// "a" left out of a scrape (released) and back: created anew.
	_, done = c.Scrape(start.Add(90 * time.Second))
	done()
	at, done = c.Scrape(start.Add(120 * time.Second))
	if got, want := at("f", "a"), start.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("series back after a scrape without it: created %v, want %v", got, want)
	}
	done()

	// A scrape with an older clock reading never moves the time back.
	_, done = c.Scrape(start)
	done()
	at, done = c.Scrape(start.Add(150 * time.Second))
	if got, want := at("f", "c"), start.Add(120*time.Second); !got.Equal(want) {
		t.Errorf("after a clock step back: created %v, want %v", got, want)
	}
	done()
}
