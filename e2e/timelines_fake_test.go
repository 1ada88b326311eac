package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-convergence/kube-convergence-exporter/internal/serve"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

// literalSource serves literal episodes: the page in Chromium until the
// timeline store is merged (then the test runs against the exporter).
type literalSource []timeline.Episode

func (s literalSource) List(timeline.Query, time.Time) []timeline.Episode { return s }
func (s literalSource) Object(kind, ns, name string, _ time.Time) []timeline.Episode {
	var out []timeline.Episode
	for _, e := range s {
		if e.Kind == kind && e.Namespace == ns && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func TestTimelinesPageInChromiumLiteral(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(d float64) *time.Time { x := t0.Add(time.Duration(d * float64(time.Second))); return &x }
	f := func(d float64) *float64 { return &d }
	src := literalSource{
		{
			Kind: "Deployment", Namespace: "e2e", Name: "web", UID: "u1", Generation: 2, Target: 2, Change: "template",
			State: timeline.StateClosed, Outcome: "converged", Start: t0, APIStart: t0.Truncate(time.Second), End: at(4.321), DurationSeconds: 4.321,
			TraceID: timeline.TraceID("u1", 2),
			Stages: []timeline.StageTiming{
				{Stage: "observed", Reached: true, At: at(0.012), DurationSeconds: f(0.012)},
				{Stage: "updated", Reached: true, At: at(1.04), DurationSeconds: f(1.04)},
				{Stage: "available", Reached: true, At: at(3.2), DurationSeconds: f(3.2)},
				{Stage: "endpoints_ready", Reached: true, At: at(4.321), DurationSeconds: f(4.321)},
			},
			Entries: []timeline.Entry{
				{Time: t0, Type: timeline.EntryWrite, Generation: 2, Managers: []string{xss}},
				{Time: *at(0.5), Type: timeline.EntryEvent, Reason: "FailedCreate", Message: xss, Object: &timeline.ObjectRef{Kind: "ReplicaSet", Namespace: "e2e", Name: "web-1"}},
			},
		},
		{
			Kind: "Certificate.cert-manager.io", Namespace: "e2e", Name: "tls", UID: "u2", Generation: 1, Target: 1, Change: "create",
			State: timeline.StateInProgress, Start: t0, APIStart: t0, DurationSeconds: 60, Stage: "ready", Reason: "condition_false",
			Stages:  []timeline.StageTiming{{Stage: "observed", Reached: true, At: at(0.3), DurationSeconds: f(0.3)}, {Stage: "ready"}},
			Entries: []timeline.Entry{{Time: *at(1), Type: timeline.EntryCondition, Reason: "Ready=False", Message: xss}},
		},
	}
	reg := prometheus.NewRegistry()
	h, err := serve.Handler(serve.HandlerOptions{
		TelemetryPath: "/metrics", Gatherer: reg, Registerer: reg,
		Liveness: func() (bool, string) { return true, "ok" }, Readiness: func() (bool, string) { return true, "ok" },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Timelines: timelineweb.Options{Source: src, CustomResources: []string{"certificates.cert-manager.io"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	checkTimelinePage(ctx, t, srv.URL, "deployments.apps", "e2e", "web", []string{"FailedCreate"}, []string{xss}, []string{xss})
	checkTimelinePage(ctx, t, srv.URL, "Certificate.cert-manager.io", "e2e", "tls", []string{"waiting: condition_false"}, nil, []string{xss})
}
