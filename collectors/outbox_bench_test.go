package collectors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// nopStore is an Evidence that keeps nothing.
type nopStore struct{}

func (nopStore) Open(string) bool                        { return true }
func (nopStore) Add(string, timeline.Entry) bool         { return true }
func (nopStore) Relate(string, string)                   {}
func (nopStore) AddRelated(string, timeline.Entry) bool  { return true }
func (nopStore) Gone(string)                             {}
func (nopStore) Block(string, string, string, time.Time) {}

// BenchmarkOutboxSection is what the outbox costs a handler's locked
// section beyond the store's own work: the lock, two entries and a block
// queued, and their delivery after the lock is released: about 100 ns,
// no allocation (docs/benchmarks.md).
func BenchmarkOutboxSection(b *testing.B) {
	out := NewOutbox(NewEpisodes(config.Default(), time.Now), slog.New(slog.DiscardHandler))
	out.SetTimelines(nopStore{})
	e := timeline.Entry{Time: t0, Type: timeline.EntryReady, Reason: "ready"}
	b.ReportAllocs()
	for b.Loop() {
		out.Lock()
		out.Add("uid", e)
		out.Add("uid", e)
		out.Block("uid", "available", "pods_not_ready", t0)
		out.Unlock()
	}
}
