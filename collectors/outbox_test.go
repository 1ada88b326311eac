package collectors

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// record is what reached a sink or the store, in order.
type record struct {
	mu  sync.Mutex
	log []string
	// gate, when set, holds every call until it is closed, after
	// signalling entered once.
	gate    chan struct{}
	entered chan struct{}
}

func (r *record) append(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	gate, entered := r.gate, r.entered
	r.entered = nil
	r.mu.Unlock()
	if entered != nil {
		close(entered)
	}
	if gate != nil {
		<-gate
	}
}

func (r *record) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.log, s)
}

func (r *record) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// recordingSink is an EpisodeSink that records the episodes opened.
type recordingSink struct{ *record }

func (s recordingSink) ObserveEpisodes(evs []tracker.Event) {
	for _, ev := range evs {
		s.append("opened " + ev.Episode.UID)
	}
}

// recordingStore is an Evidence that records the entries added.
type recordingStore struct{ *record }

func (s recordingStore) Open(uid string) bool { return s.has("opened " + uid) }
func (s recordingStore) Add(uid string, e timeline.Entry) bool {
	s.append("add " + uid + " " + e.Reason)
	return true
}
func (s recordingStore) Relate(string, string)                   {}
func (s recordingStore) AddRelated(string, timeline.Entry) bool  { return false }
func (s recordingStore) Gone(string)                             {}
func (s recordingStore) Block(string, string, string, time.Time) {}

// lockedSource is the scrape side of a collector: Episodes takes its lock.
type lockedSource struct{ mu sync.Locker }

func (s lockedSource) Episodes(time.Time) ([]tracker.Episode, []tracker.Stall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil, nil
}

func opened(uid string) []tracker.Event {
	return []tracker.Event{{Type: tracker.EpisodeOpened, At: t0,
		Episode: tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: "ns", Name: uid, Generation: 1, Start: t0}}}
}

// newOutbox returns an outbox whose sink and store both record to r, and
// a registry whose scrape reads a source taking the outbox's lock.
func newOutbox(t *testing.T, r *record) (*Outbox, *prometheus.Registry) {
	t.Helper()
	e := NewEpisodes(config.Default(), func() time.Time { return t0 })
	e.AddSink(recordingSink{r})
	out := NewOutbox(e, slog.New(slog.DiscardHandler))
	out.SetTimelines(recordingStore{r})
	e.Feed(lockedSource{out})
	reg := prometheus.NewRegistry()
	if err := e.Register(reg, tracker.Deployment); err != nil {
		t.Fatal(err)
	}
	return out, reg
}

// within fails the test unless done is closed within a deadline.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting after 10 s", what)
	}
}

// A sink or a store call that does not return holds up neither the scrape
// nor the lock: two handlers' queues wait for it, the first one's in the
// sink or the store, the second one's behind it, while a scrape reads the
// source, which takes the collector's lock. Then both go out, in order.
func TestSlowDeliveryDoesNotHoldUpTheScrape(t *testing.T) {
	for _, slow := range []string{"sink", "store"} {
		t.Run(slow, func(t *testing.T) {
			r := &record{gate: make(chan struct{}), entered: make(chan struct{})}
			unblock := sync.OnceFunc(func() { close(r.gate) })
			t.Cleanup(unblock)
			entered := r.entered
			out, reg := newOutbox(t, r)
			if slow == "store" {
				r.log = append(r.log, "opened a") // the store's: no sink call before the Add
			}
			handler := func(uid string, queued chan<- struct{}) <-chan struct{} {
				done := make(chan struct{})
				go func() {
					defer close(done)
					out.Lock()
					defer out.Unlock()
					if slow == "sink" {
						out.Observe(opened(uid))
					}
					out.Add(uid, timeline.Entry{Reason: "written"})
					if queued != nil {
						close(queued)
					}
				}()
				return done
			}
			first := handler("a", nil)
			within(t, entered, "the first handler's delivery")
			queued := make(chan struct{})
			second := handler("b", queued)
			within(t, queued, "the second handler's lock")

			scraped := make(chan struct{})
			go func() {
				defer close(scraped)
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
				}
			}()
			within(t, scraped, "a scrape while the "+slow+" is busy")
			select {
			case <-first:
				t.Fatalf("the first handler returned while its delivery was held")
			case <-second:
				t.Fatalf("the second handler returned before its queue went out")
			default:
			}

			unblock()
			within(t, first, "the first handler")
			within(t, second, "the second handler")
			var want []string
			if slow == "sink" {
				want = []string{"opened a", "add a written", "opened b", "add b written"}
			} else {
				want = []string{"opened a", "add a written", "add b written"}
			}
			if got := r.lines(); !slices.Equal(got, want) {
				t.Errorf("delivered %q, want %q", got, want)
			}
		})
	}
}

// Handlers running at once deliver in the order their sections held the
// lock: each episode opened before its evidence, and each section's queue
// out when its Unlock returns. Open, without the lock, sees everything
// queued before it.
func TestOutboxKeepsTheOrder(t *testing.T) {
	r := &record{}
	out, _ := newOutbox(t, r)
	const handlers, sections = 8, 100
	var (
		wg   sync.WaitGroup
		next int // guarded by out's lock
		want = make([]string, handlers*sections*2)
	)
	for range handlers {
		wg.Go(func() {
			for range sections {
				out.Lock()
				n := next
				next++
				uid := fmt.Sprint(n)
				out.Observe(opened(uid))
				out.Add(uid, timeline.Entry{Reason: "written"})
				want[2*n], want[2*n+1] = "opened "+uid, "add "+uid+" written"
				out.Unlock()
				if !r.has("add " + uid + " written") {
					t.Errorf("section %d: Unlock returned before its queue went out", n)
				}
				if !out.Open(uid) {
					t.Errorf("section %d: Open does not see its episode", n)
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	if got := r.lines(); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("delivery %d is %q, want %q (of %d, want %d)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("%d deliveries, want %d", len(got), len(want))
	}
	// The arrays kept between batches pin nothing.
	for _, arr := range [][]op{out.ops, out.spare} {
		for _, p := range arr[:cap(arr)] {
			if p.evs != nil || p.uid != "" {
				t.Fatalf("a kept array pins %+v", p)
			}
		}
	}
}

// hookedStore is a recordingStore that calls hook first on every Add.
type hookedStore struct {
	recordingStore
	hook func(uid string, e timeline.Entry)
}

func (s hookedStore) Add(uid string, e timeline.Entry) bool {
	s.hook(uid, e)
	return s.recordingStore.Add(uid, e)
}

// A batch goes out in its own array, which nothing queued meanwhile
// writes to, even after a delivery panicked half-way (the array the
// panicking batch had swapped in for the queue was still the spare: the
// next batch was taken out of it and the queue refilled it while it went
// out).
func TestOutboxBatchNotOverwrittenAfterPanic(t *testing.T) {
	r := &record{}
	out, _ := newOutbox(t, r)
	var late int
	out.SetTimelines(hookedStore{recordingStore{r}, func(uid string, e timeline.Entry) {
		switch e.Reason {
		case "boom":
			panic("a store call failing")
		case "first":
			// Handlers queue while the batch goes out.
			out.mu.Lock()
			for range 3 {
				late++
				out.ops = append(out.ops, op{kind: opAdd, uid: "late", entry: timeline.Entry{Reason: fmt.Sprint(late)}})
			}
			out.mu.Unlock()
		}
	}})
	section := func(uid string, reasons ...string) {
		out.Lock()
		for _, reason := range reasons {
			out.Add(uid, timeline.Entry{Reason: reason})
		}
		out.Unlock()
	}
	section("a", "1", "2", "3", "4") // the spare array has room for 4
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		section("b", "boom")
	}()
	section("c", "first", "second", "third")
	section("d", "last")
	want := []string{"add a 1", "add a 2", "add a 3", "add a 4", "add c first", "add c second", "add c third", "add late 1", "add late 2", "add late 3", "add d last"}
	if got := r.lines(); !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}
