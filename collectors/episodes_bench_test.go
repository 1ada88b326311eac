package collectors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// BenchmarkEpisodesObserve is the metric side of one rollout status update
// that reached a stage and one that crossed a threshold: the label lookup,
// the exemplar and the observation, on series that already exist.
func BenchmarkEpisodesObserve(b *testing.B) {
	e := NewEpisodes(config.Default(), time.Now)
	if err := e.Register(prometheus.NewRegistry(), tracker.Deployment); err != nil {
		b.Fatal(err)
	}
	ep := tracker.Episode{Kind: tracker.Deployment, UID: "0b6f3c0e-5d1a-4c5e-9a51-000000000001", Namespace: "ns",
		Name: "web", Generation: 7, Change: tracker.ChangeTemplate}
	logger := slog.New(slog.DiscardHandler)
	e.Observe([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep}}, logger)
	evs := []tracker.Event{
		{Type: tracker.StageReached, Episode: ep, Stage: tracker.StageUpdated, Duration: 3 * time.Second},
		{Type: tracker.ThresholdCrossed, Episode: ep, Stage: tracker.StageAvailable, Threshold: 5},
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Observe(evs, logger)
	}
}
