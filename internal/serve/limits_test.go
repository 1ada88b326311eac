package serve

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// fullStore is a timeline store at its default bounds, full: 1000 closed
// Deployment episodes of 200 entries (--timelines.max-entries), each entry
// with an object reference and a message of its own, as the informers hand
// them.
func fullStore() *timeline.Store {
	s := timeline.NewStore(timeline.Config{MaxBytes: 1 << 30})
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 1000 {
		uid := fmt.Sprintf("0b7c1e3a-5d2f-4c8e-9a61-%012d", i)
		ep := tracker.Episode{Kind: tracker.Deployment, UID: uid, Namespace: fmt.Sprintf("team-%02d", i%20), Name: fmt.Sprintf("web-%d", i),
			Generation: 2, Target: 2, Change: tracker.ChangeTemplate, Start: t0.Add(time.Duration(i) * time.Second)}
		s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: ep.Start}})
		for j := range 199 {
			pod := fmt.Sprintf("web-%d-7d9f8c6b5-%05d", i, j)
			s.AddRelated(uid, timeline.Entry{Time: ep.Start.Add(time.Duration(j) * time.Millisecond), Type: timeline.EntryEvent,
				Object: &timeline.ObjectRef{Kind: "Pod", Namespace: ep.Namespace, Name: pod},
				Reason: "FailedCreate", Message: "Error creating: pods \"" + pod + "\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1",
				Controller: "replicaset-controller", Count: int64(j)})
		}
		s.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: ep.Start.Add(5 * time.Second)}})
	}
	return s
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 20 clients that ask for the largest answer (1000 episodes of 200
// entries, 50 MB of JSON) and read nothing, with --web.max-requests=20: the
// 21st request gets 503 at once, the heap grows by what 20 answers in
// flight pin (their snapshots and a 64 KiB buffer each, not copies of the
// store: 20 such clients pinned 833 MB before), and /metrics answers
// meanwhile.
func TestNonReadingClientsAreBounded(t *testing.T) {
	const maxRequests = 20
	store := fullStore()
	o := handlerOptions("/metrics", true, true)
	o.MaxRequests = maxRequests
	o.Timelines = timelineweb.Options{Source: store, Now: time.Now}
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	idle := heapInUse()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxRequests {
		c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "GET %s?limit=1000 HTTP/1.1\r\nHost: x\r\n\r\n", timelineweb.APIPath); err != nil {
			t.Fatal(err)
		}
		// Each is being answered before the next is sent, and before the
		// 21st: sent all at once, one could reach the server after a 21st
		// took its slot, get the 503 itself and leave 19 in flight.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("stuck client %d: status line %q, %v", len(conns), line, err)
		}
	}
	// The 21st: 503 once the 20 are being answered.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, srv.URL+timelineweb.APIPath+"?limit=1")
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, "--web.max-requests") {
				t.Errorf("503 body %q does not name --web.max-requests", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 503 with %d clients in flight: last %d", maxRequests, code)
		}
	}
	// The page has its own slots, /metrics its own.
	if code, _ := get(t, srv.URL+timelineweb.PagePath); code != http.StatusOK {
		t.Errorf("the page = %d while the API is full, want 200", code)
	}
	start := time.Now()
	if code, _ := get(t, srv.URL+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics = %d while the API is full, want 200", code)
	}
	t.Logf("a scrape with %d clients stuck: %v", maxRequests, time.Since(start))

	grown := int64(heapInUse()) - int64(idle)
	// One answer in flight pins its snapshot (1000 episode headers and
	// slice headers, about 1.2 KB each), its buffer and one episode being
	// encoded (about 50 KB of JSON, 200 entries copied): well under 2 MB.
	const perAnswer = 2 << 20
	if grown > maxRequests*perAnswer {
		t.Errorf("heap grew by %d MB with %d clients stuck, want at most %d MB", grown>>20, maxRequests, maxRequests*perAnswer>>20)
	}
	t.Logf("heap grew by %.1f MB with %d clients reading nothing (store: %.1f MB counted)", float64(grown)/(1<<20), maxRequests, float64(store.Bytes())/(1<<20))

}
