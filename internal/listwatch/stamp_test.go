package listwatch

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// Every object handed to the reflector carries its receive time (the fake
// clock when the wrapper saw it) and whether a list cycle delivered it.
func TestStampReceivedAndListed(t *testing.T) {
	f := newFixture(t)
	check := func(what string, p *v1.Pod, wantAt time.Time, wantListed bool) {
		t.Helper()
		at, listed := informers.Received(p)
		if !at.Equal(wantAt) || listed != wantListed {
			t.Errorf("%s: received %v listed %v, want %v %v", what, at, listed, wantAt, wantListed)
		}
	}

	// LIST: every item, at the time the page came back.
	f.clk.Step(time.Second)
	l := podList("10", "", pod("a"), pod("b"))
	f.list(firstList, l, nil)
	check("listed a", &l.Items[0], t0.Add(time.Second), true)
	check("listed b", &l.Items[1], t0.Add(time.Second), true)

	// A live event: not listed, at its own receive time; a listed mark a
	// previous copy carried does not survive.
	w, inner := f.stream(resume)
	f.clk.Step(2 * time.Second)
	live := pod("a")
	live.Annotations = map[string]string{informers.AnnotationListed: "true", "keep": "me"}
	send(t, w, inner, modified(live))
	check("live a", live, t0.Add(3*time.Second), false)
	if live.Annotations["keep"] != "me" {
		t.Error("stamping dropped another annotation")
	}
	del := pod("b")
	send(t, w, inner, deleted(del))
	check("deleted b", del, t0.Add(3*time.Second), false)
	w.Stop()

	// A WatchList stream: listed until the initial-events-end bookmark,
	// live after it.
	// The clock moves before the stream opens: the wrapper may stamp its
	// initial events as soon as it reads them (a flake in CI when the
	// step came after).
	first, second, after := pod("c"), pod("d"), pod("c")
	f.clk.Step(time.Second)
	w, inner = f.stream(streamAll, added(first), added(second), initialEventsEnd("20"))
	recv(t, w, watch.Added)
	recv(t, w, watch.Added)
	recv(t, w, watch.Bookmark)
	check("initial event c", first, t0.Add(4*time.Second), true)
	check("initial event d", second, t0.Add(4*time.Second), true)
	f.clk.Step(time.Second)
	send(t, w, inner, modified(after))
	check("live c after the bookmark", after, t0.Add(5*time.Second), false)
}

// Compact keeps the stamps: trackers read them from the cache.
func TestCompactKeepsStamps(t *testing.T) {
	p := pod("a")
	informers.Stamp(p, t0, true)
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	if _, err := informers.Compact(p); err != nil {
		t.Fatal(err)
	}
	if at, listed := informers.Received(p); !at.Equal(t0) || !listed {
		t.Errorf("after Compact: received %v listed %v, want %v true", at, listed, t0)
	}
	if _, ok := p.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("Compact kept an unused annotation")
	}
}

// A watch that breaks is resumed from its last resource version without a
// relist (the API server's watch cache still holds it), and the writes of
// the gap arrive as ordinary events at the resume: they are marked like a
// list cycle's, by their managedFields time (before the resume's second);
// the first write made after the resume ends the backlog.
func TestResumeAfterBrokenWatchMarksTheGapsReplay(t *testing.T) {
	f := newFixture(t)
	f.sync(pod("a", t0.Add(-time.Minute)))
	w, inner := f.stream(resume)
	inner.Stop() // the connection broke: closed well before its timeout
	waitClosed(t, w)

	f.clk.Step(10 * time.Second) // the gap
	w, inner = f.stream(resume)
	resumedAt := f.clk.Now()
	inGap := pod("b", t0.Add(4*time.Second))       // written during the gap
	deletedInGap := pod("a", t0.Add(-time.Minute)) // deleted during the gap
	afterResume := pod("c", resumedAt)             // written in the resume's second
	scaledLater := pod("b", t0.Add(4*time.Second)) // a later write without a newer managedFields time (/scale)
	send(t, w, inner, added(inGap))
	send(t, w, inner, deleted(deletedInGap))
	send(t, w, inner, added(afterResume))
	send(t, w, inner, modified(scaledLater))
	for _, c := range []struct {
		name   string
		p      *v1.Pod
		listed bool
	}{{"write of the gap", inGap, true}, {"deletion in the gap", deletedInGap, true}, {"write after the resume", afterResume, false}, {"later write, old managedFields time", scaledLater, false}} {
		if _, listed := informers.Received(c.p); listed != c.listed {
			t.Errorf("%s: listed %v, want %v", c.name, listed, c.listed)
		}
	}

	// A stream that ends at its timeout is resumed at once: no gap, nothing
	// marked however old the writes.
	f.clk.Step(300 * time.Second)
	inner.Stop()
	waitClosed(t, w)
	w, inner = f.stream(resume)
	old := pod("d", t0)
	send(t, w, inner, added(old))
	if _, listed := informers.Received(old); listed {
		t.Error("an event after a timeout resume was marked as a gap's replay")
	}
	inner.Stop()
	waitClosed(t, w)

	// A broken stream followed by a relist: the list covers the gap.
	f.list(relist, podList("40", ""), nil)
	w, inner = f.stream(resume)
	old = pod("e", t0)
	send(t, w, inner, added(old))
	if _, listed := informers.Received(old); listed {
		t.Error("an event on the watch after a relist was marked as a gap's replay")
	}

	// The backlog comes at once: past backlogWindow nothing is replay.
	inner.Stop()
	waitClosed(t, w)
	w, inner = f.stream(resume)
	f.clk.Step(backlogWindow + time.Second)
	late := pod("f", t0)
	send(t, w, inner, added(late))
	if _, listed := informers.Received(late); listed {
		t.Error("an event past the backlog window was marked as a gap's replay")
	}
}
