package collectors

import (
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fixedSource reports fixed episodes.
type fixedSource struct {
	open    []tracker.Episode
	stalled []tracker.Stall
}

func (f fixedSource) Episodes(time.Time) ([]tracker.Episode, []tracker.Stall) {
	return f.open, f.stalled
}

func stall(kind tracker.Kind, name string, age time.Duration) tracker.Stall {
	return tracker.Stall{Episode: tracker.Episode{Kind: kind, UID: "uid-" + name, Namespace: "ns", Name: name},
		Stage: tracker.StageObserved, Reason: tracker.ReasonNotObserved, Age: age}
}

// Two feeders register one set of families; their stalled series share one
// cap, oldest first across both, and each left-out episode is counted once.
func TestEpisodesSharedByTwoFeeders(t *testing.T) {
	cfg := config.Default()
	cfg.Stall.SeriesLimit = 2
	e := NewEpisodes(cfg, func() time.Time { return t0 })
	reg := prometheus.NewPedanticRegistry()
	workloads := fixedSource{
		open:    []tracker.Episode{{Kind: tracker.Deployment, Namespace: "ns"}},
		stalled: []tracker.Stall{stall(tracker.Deployment, "web", 3*time.Minute)},
	}
	custom := fixedSource{
		open:    []tracker.Episode{{Kind: "Certificate.cert-manager.io", Namespace: "ns"}, {Kind: "Certificate.cert-manager.io", Namespace: "ns"}},
		stalled: []tracker.Stall{stall("Certificate.cert-manager.io", "tls", 9*time.Minute), stall("Certificate.cert-manager.io", "old", time.Minute)},
	}
	e.Feed(workloads)
	e.Feed(custom)
	if err := e.Register(reg, tracker.Deployment); err != nil {
		t.Fatal(err)
	}
	if err := e.Register(reg, "Certificate.cert-manager.io"); err != nil {
		t.Fatalf("second feeder's Register: %v", err)
	}
	// The registry collects the dropped counter and the scrape-time gauges
	// concurrently, so the counter a scrape increments may show one scrape
	// later (as in production): scrape once first.
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // later scrapes do not count the dropped episode again
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kube_convergence_rollout_stalled_seconds Seconds since the spec write of each rollout older than the stall threshold, by the next stage not reached and why; capped.
# TYPE kube_convergence_rollout_stalled_seconds gauge
kube_convergence_rollout_stalled_seconds{kind="Certificate.cert-manager.io",name="tls",namespace="ns",reason="not_observed",stage="observed"} 540
kube_convergence_rollout_stalled_seconds{kind="Deployment",name="web",namespace="ns",reason="not_observed",stage="observed"} 180
# HELP kube_convergence_rollout_stalled_series_dropped_total Stalled rollouts left out of kube_convergence_rollout_stalled_seconds by stall.seriesLimit, counted once per episode.
# TYPE kube_convergence_rollout_stalled_series_dropped_total counter
kube_convergence_rollout_stalled_series_dropped_total 1
# HELP kube_convergence_rollouts_in_progress Rollout episodes open now: written, not yet converged or otherwise closed.
# TYPE kube_convergence_rollouts_in_progress gauge
kube_convergence_rollouts_in_progress{kind="Certificate.cert-manager.io",namespace="ns"} 2
kube_convergence_rollouts_in_progress{kind="Deployment",namespace="ns"} 1
`), "kube_convergence_rollout_stalled_seconds", "kube_convergence_rollout_stalled_series_dropped_total", "kube_convergence_rollouts_in_progress"); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(e.Recovered.WithLabelValues("Certificate.cert-manager.io")); got != 0 {
		t.Errorf("recovered counter of the second feeder's kind: %v", got)
	}
}

// A custom resource's name may have 253 characters: its exemplar stays
// within client_golang's 128 runes (it panics beyond).
func TestEpisodesExemplarOfALongName(t *testing.T) {
	e := NewEpisodes(config.Default(), time.Now)
	reg := prometheus.NewPedanticRegistry()
	if err := e.Register(reg); err != nil {
		t.Fatal(err)
	}
	ep := tracker.Episode{Kind: "Certificate.cert-manager.io", UID: "0b6f3c0e-5d1a-4c5e-9a51-000000000001", Namespace: "ns",
		Name: strings.Repeat("n", 253), Generation: 1234567890, Change: tracker.ChangeCreate}
	e.Observe([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep},
		{Type: tracker.StageReached, Episode: ep, Stage: tracker.StageReady, Duration: time.Second}}, slog.New(slog.DiscardHandler))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "kube_convergence_rollout_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if x := b.GetExemplar(); x != nil {
					found = true
					if n := exemplarRunes(x); n > 128 {
						t.Errorf("exemplar of %d runes", n)
					}
				}
			}
		}
	}
	if !found {
		t.Error("no exemplar")
	}
}

func exemplarRunes(x *dto.Exemplar) int {
	n := 0
	for _, l := range x.GetLabel() {
		n += utf8.RuneCountInString(l.GetName()) + utf8.RuneCountInString(l.GetValue())
	}
	return n
}

// With tracing on, episode exemplars carry the trace id SetTraceIDs gives,
// and still fit 128 runes with a 253-character name.
func TestEpisodesExemplarTraceID(t *testing.T) {
	for _, name := range []string{"web", strings.Repeat("n", 253)} {
		e := NewEpisodes(config.Default(), time.Now)
		reg := prometheus.NewPedanticRegistry()
		if err := e.Register(reg); err != nil {
			t.Fatal(err)
		}
		e.SetTraceIDs(func(uid string, generation int64) string {
			return strings.Repeat(uid[:1], 16) + strings.Repeat(string(rune('0'+generation)), 16)
		})
		ep := tracker.Episode{Kind: tracker.Deployment, UID: "a0000000-5d1a-4c5e-9a51-000000000001", Namespace: "ns", Name: name, Generation: 7, Change: tracker.ChangeCreate}
		e.Observe([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep},
			{Type: tracker.StageReached, Episode: ep, Stage: tracker.StageObserved, Duration: 300 * time.Millisecond}}, slog.New(slog.DiscardHandler))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got []*dto.Exemplar
		for _, mf := range mfs {
			if mf.GetName() != "kube_convergence_rollout_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, b := range m.GetHistogram().GetBucket() {
					if x := b.GetExemplar(); x != nil {
						got = append(got, x)
					}
				}
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d exemplars, want 1", len(got))
		}
		labels := map[string]string{}
		for _, l := range got[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["trace_id"] != "aaaaaaaaaaaaaaaa7777777777777777" || labels["uid"] != ep.UID || labels["generation"] != "7" ||
			!strings.HasPrefix(name, labels["name"]) || exemplarRunes(got[0]) > 128 || got[0].GetValue() != 0.3 {
			t.Errorf("exemplar %v value %v (%d runes)", labels, got[0].GetValue(), exemplarRunes(got[0]))
		}
	}
}
