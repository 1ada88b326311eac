package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracing/otlpreceiver"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// A Deployment written at t0; its stages reached at the tracker's
// durations, closed converged at 2.1 s.
var (
	t0 = time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	ep = tracker.Episode{Kind: tracker.Deployment, UID: "6c0d3b1e-0f8e-4c1a-9f2c-3c6c0d3b1e2f", Namespace: "shop", Name: "web",
		Generation: 3, Target: 3, Change: "template", Start: t0, APIStart: t0.Truncate(time.Second)}
	stages = []struct {
		stage tracker.Stage
		d     time.Duration
	}{{"observed", 12_345_678 * time.Nanosecond}, {"updated", 801 * time.Millisecond}, {"available", 1_500_000_001}, {"endpoints_ready", 2 * time.Second}}
)

func reached(e tracker.Episode, stage tracker.Stage, d time.Duration) tracker.Event {
	return tracker.Event{Type: tracker.StageReached, Episode: e, Stage: stage, Duration: d, At: e.Start.Add(d)}
}

// startTracer runs a tracer sending to endpoint for the test.
func startTracer(t *testing.T, c config.Tracing, events timeline.Source, logs *lockedWriter) *Tracer {
	t.Helper()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // ms: spans arrive promptly
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	tr, err := New(context.Background(), Options{Config: c, Version: "1.2.3", Logger: logger, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Log(err)
		}
	})
	return tr
}

// lockedWriter is a log buffer written by the tracer's goroutines and
// read by the test.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func waitSpans(t *testing.T, r *otlpreceiver.Receiver, n int) []otlpreceiver.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spans, err := r.Wait(ctx, func(s []otlpreceiver.Span) bool { return len(s) >= n })
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

func byName(spans []otlpreceiver.Span) map[string]otlpreceiver.Span {
	m := map[string]otlpreceiver.Span{}
	for _, s := range spans {
		m[s.Name] = s
	}
	return m
}

// The whole episode over both transports, decoded by real OTLP receivers.
func TestEpisodeTraceOverOTLP(t *testing.T) {
	for _, client := range []string{config.TracingClientHTTP, config.TracingClientGRPC} {
		t.Run(client, func(t *testing.T) {
			start := otlpreceiver.StartHTTP
			if client == config.TracingClientGRPC {
				start = otlpreceiver.StartGRPC
			}
			r, err := start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: client, Insecure: true, Compression: "gzip",
				Headers: map[string]string{"X-Scope-OrgID": "team-a"}}, nil, nil)

			evs := []tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}}
			for _, s := range stages {
				evs = append(evs, reached(ep, s.stage, s.d))
			}
			closeAt := t0.Add(2100 * time.Millisecond)
			evs = append(evs, tracker.Event{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: closeAt})
			// Fed in two calls, as two watch events would.
			tr.ObserveEpisodes(evs[:3])
			tr.ObserveEpisodes(evs[3:])

			spans := waitSpans(t, r, 5)
			if len(spans) != 5 {
				t.Fatalf("%d spans, want 5 (root + 4 stages)", len(spans))
			}
			tid := timeline.TraceID(ep.UID, ep.Generation)
			m := byName(spans)
			root, ok := m["rollout Deployment"]
			if !ok {
				t.Fatalf("no root span named %q in %v", "rollout Deployment", slices.Collect(mapKeys(m)))
			}
			if root.TraceID() != tid || root.ParentID() != "" || root.SpanID() != RootSpanID(TraceID(ep.UID, ep.Generation)).String() {
				t.Errorf("root ids: trace %s parent %q span %s", root.TraceID(), root.ParentID(), root.SpanID())
			}
			if root.StartTimeUnixNano != uint64(t0.UnixNano()) || root.Duration() != 2100*time.Millisecond {
				t.Errorf("root from %d lasting %v, want %d lasting 2.1s", root.StartTimeUnixNano, root.Duration(), t0.UnixNano())
			}
			for k, want := range map[string]string{"k8s.namespace.name": "shop", "k8s.deployment.name": "web", "k8s.deployment.uid": ep.UID,
				"kce.kind": "Deployment", "kce.generation": "3", "kce.change": "template", "kce.outcome": "converged", "kce.stalled": "false",
				"kce.recovered": "false", "kce.api_start": "2026-12-01T10:00:00Z"} {
				if got := root.Attr(k); got != want {
					t.Errorf("root %s = %q, want %q", k, got, want)
				}
			}
			if root.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET || root.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
				t.Errorf("root status %v kind %v", root.Status, root.Kind)
			}
			if root.Resource["service.name"] != ServiceName || root.Resource["service.version"] != "1.2.3" {
				t.Errorf("resource %v", root.Resource)
			}
			for _, s := range stages {
				sp, ok := m[string(s.stage)]
				if !ok {
					t.Errorf("no span of stage %s", s.stage)
					continue
				}
				// Exactly the tracker's Duration: the histogram's value.
				if sp.TraceID() != tid || sp.ParentID() != root.SpanID() || sp.Duration() != s.d || sp.StartTimeUnixNano != uint64(t0.UnixNano()) {
					t.Errorf("stage %s: trace %s parent %s duration %v, want %s %s %v", s.stage, sp.TraceID(), sp.ParentID(), sp.Duration(), tid, root.SpanID(), s.d)
				}
				if sp.Attr("kce.stage") != string(s.stage) || sp.Attr("k8s.deployment.name") != "web" {
					t.Errorf("stage %s attributes %v", s.stage, sp.Attributes)
				}
			}
			if h := r.Headers(); len(h) == 0 || h[0]["X-Scope-Orgid"] != "team-a" {
				t.Errorf("headers %v", h)
			}
		})
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A stalled episode: the root goes out at the stall with status Error and
// kce.stalled=true, with the stages reached so far; later stages go out as
// its children when reached; the end is one "closed" child.
func TestStalledRootThenLaterStages(t *testing.T) {
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true}, nil, nil)

	stallAt := t0.Add(5 * time.Minute)
	tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}, reached(ep, "observed", 10*time.Millisecond)})
	tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeStalled, Episode: ep, Stage: "updated", Reason: "replica_failure", At: stallAt}})
	spans := waitSpans(t, r, 2)
	m := byName(spans)
	root := m["rollout Deployment"]
	if len(spans) != 2 || root.Span == nil || m["observed"].Span == nil {
		t.Fatalf("at the stall got %v, want the root and observed", slices.Collect(mapKeys(m)))
	}
	if root.Attr("kce.stalled") != "true" || root.Attr("kce.stall.stage") != "updated" || root.Attr("kce.stall.reason") != "replica_failure" ||
		root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || root.Duration() != 5*time.Minute {
		t.Errorf("stalled root: %v status %v duration %v", root.Attributes, root.Status, root.Duration())
	}
	// A second stall event (a re-list) exports nothing new.
	tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeStalled, Episode: ep, Stage: "updated", Reason: "replica_failure", At: stallAt.Add(time.Second)}})
	later := reached(ep, "updated", 6*time.Minute)
	tr.ObserveEpisodes([]tracker.Event{later})
	spans = waitSpans(t, r, 3)
	up := byName(spans)["updated"]
	if up.Span == nil || up.ParentID() != root.SpanID() || up.TraceID() != root.TraceID() || up.Duration() != 6*time.Minute {
		t.Fatalf("later stage: %+v", up)
	}
	tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeSuperseded, At: t0.Add(7 * time.Minute)}})
	spans = waitSpans(t, r, 4)
	cl := byName(spans)["closed"]
	if len(spans) != 4 || cl.Span == nil || cl.ParentID() != root.SpanID() || cl.Attr("kce.outcome") != "superseded" || cl.Duration() != 2*time.Minute {
		t.Fatalf("close after the stall: %d spans, closed %+v", len(spans), cl)
	}
}

// An exporter that restarts mid-rollout recovers the episode (timed from the
// API-side write time): its later stages carry the same trace id and point
// at the root span id the first process exported.
func TestRestartKeepsTraceAndRoot(t *testing.T) {
	r, err := otlpreceiver.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close) // after the tracers' flush (cleanups run last first)
	c := config.Tracing{Endpoint: r.Endpoint, Insecure: true}
	first := startTracer(t, c, nil, nil)
	first.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
		{Type: tracker.EpisodeStalled, Episode: ep, Stage: "observed", Reason: "controller_lagging", At: t0.Add(time.Minute)}})
	before := waitSpans(t, r, 1)[0]

	second := startTracer(t, c, nil, nil)
	rec := ep
	rec.Recovered, rec.Start = true, ep.APIStart
	second.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeRecovered, Episode: rec, At: t0.Add(2 * time.Minute)},
		{Type: tracker.EpisodeOpened, Episode: rec, At: t0.Add(2 * time.Minute)}, reached(rec, "available", 150*time.Second),
		{Type: tracker.EpisodeClosed, Episode: rec, Outcome: tracker.OutcomeConverged, At: rec.Start.Add(150 * time.Second)}})
	spans := waitSpans(t, r, 3)
	av := byName(spans)["available"]
	if av.Span == nil || av.TraceID() != before.TraceID() || av.ParentID() != before.SpanID() {
		t.Fatalf("after the restart: available %+v, first root trace %s span %s", av, before.TraceID(), before.SpanID())
	}
	if av.Attr("kce.stage") != "available" || av.Attr("kce.recovered") != "true" || av.Duration() != 150*time.Second {
		t.Errorf("recovered stage %v %v", av.Attributes, av.Duration())
	}
}

// Warning Events of the store become events of the span whose time range
// holds them.
func TestWarningEventsAsSpanEvents(t *testing.T) {
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	at := t0.Add(time.Second)
	src := fakeSource{timeline.Episode{UID: ep.UID, Generation: ep.Generation, Entries: []timeline.Entry{
		{Time: at, APITime: &at, Type: timeline.EntryEvent, Reason: "FailedCreate", Message: `pods "web-1" is forbidden: exceeded quota`,
			Object: &timeline.ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-5d4f"}, Controller: "replicaset-controller", Count: 4},
		{Time: at, Type: timeline.EntryReady, Reason: "ready"},
	}}}
	tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true}, src, nil)
	tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
		{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeDeleted, At: t0.Add(2 * time.Second)}})
	root := waitSpans(t, r, 1)[0]
	if len(root.Events) != 1 {
		t.Fatalf("%d span events, want the 1 Warning Event", len(root.Events))
	}
	ev := root.Events[0]
	got := otlpreceiver.Span{Span: &tracepb.Span{Attributes: ev.Attributes}}
	if ev.Name != "FailedCreate" || ev.TimeUnixNano != uint64(at.UnixNano()) || got.Attr("kce.event.object") != "ReplicaSet shop/web-5d4f" ||
		got.Attr("kce.event.count") != "4" || !strings.Contains(got.Attr("kce.event.message"), "exceeded quota") {
		t.Errorf("span event %v", ev)
	}
}

type fakeSource []timeline.Episode

func (f fakeSource) Select(q timeline.Query, _ time.Time) timeline.Selection {
	var out []timeline.Episode
	for _, e := range f {
		if q.TraceID == "" || timeline.TraceID(e.UID, e.Generation) == q.TraceID {
			out = append(out, e)
		}
	}
	return timeline.Literal(out)
}

func (f fakeSource) Kinds() []string { return nil }

// Custom resources have no k8s.* name key of their own.
func TestCustomResourceIdentity(t *testing.T) {
	cr := tracker.Episode{Kind: "Certificate.cert-manager.io", UID: "u", Namespace: "", Name: "wildcard", Generation: 2}
	got := map[string]string{}
	for _, kv := range identity(cr) {
		got[string(kv.Key)] = kv.Value.String()
	}
	want := map[string]string{"kce.kind": "Certificate.cert-manager.io", "kce.name": "wildcard", "kce.uid": "u", "kce.generation": "2"}
	if len(got) != len(want) {
		t.Fatalf("identity %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if rootName(cr) != "rollout Certificate.cert-manager.io" {
		t.Errorf("root name %q", rootName(cr))
	}
}

// An unreachable endpoint: the tracker is never held up, spans are
// dropped, and the log says so at most once a minute.
func TestUnreachableEndpointNeverBlocks(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	// An export attempt lasts 3 s: a sink that waited for one would take
	// that long in one call.
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "3000")
	var logs lockedWriter
	tr := startTracer(t, config.Tracing{Endpoint: addr, ClientType: "http", Insecure: true, Timeout: config.Duration(2 * time.Second)}, nil, &logs)
	start := time.Now()
	var slowest time.Duration
	const episodes = 5000 // 5 spans each: far more than both queues hold
	for i := range episodes {
		e := ep
		e.UID = e.UID[:30] + string(rune('a'+i%26)) + time.Duration(i).String()
		evs := []tracker.Event{{Type: tracker.EpisodeOpened, Episode: e, At: t0}}
		for _, s := range stages {
			evs = append(evs, reached(e, s.stage, s.d))
		}
		callStart := time.Now()
		tr.ObserveEpisodes(append(evs, tracker.Event{Type: tracker.EpisodeClosed, Episode: e, Outcome: tracker.OutcomeConverged, At: t0.Add(3 * time.Second)}))
		slowest = max(slowest, time.Since(callStart))
	}
	t.Logf("%d episodes observed in %v with the endpoint down, slowest call %v", episodes, time.Since(start), slowest)
	if slowest > time.Second {
		t.Errorf("one ObserveEpisodes call took %v: the sink waited for the exporter", slowest)
	}
	if n := len(tr.open); n != 0 {
		t.Errorf("%d episodes still held after their close", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logLines(&logs), "tracing: spans dropped or not exported") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logLines(&logs), "tracing: spans dropped"); n != 1 {
		t.Errorf("%d log lines about dropped spans, want 1 within the minute:\n%s", n, logLines(&logs))
	}
}

func logLines(l *lockedWriter) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func TestLimitedLog(t *testing.T) {
	now := t0
	var buf bytes.Buffer
	l := &limitedLog{logger: slog.New(slog.NewTextHandler(&buf, nil)), every: time.Minute, now: func() time.Time { return now }}
	for i := range 100 {
		now = t0.Add(time.Duration(i) * 500 * time.Millisecond) // 100 errors in 50 s
		l.handle(context.DeadlineExceeded)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 100 errors in 50 s, want 1:\n%s", n, buf.String())
	}
	now = t0.Add(61 * time.Second)
	l.handle(context.DeadlineExceeded)
	if !strings.Contains(buf.String(), "errors_not_logged_since_last=99") || strings.Count(buf.String(), "\n") != 2 {
		t.Fatalf("after the minute:\n%s", buf.String())
	}
}

func TestExemplarTraceIDFollowsSampling(t *testing.T) {
	tid := timeline.TraceID(ep.UID, ep.Generation)
	for _, tc := range []struct {
		fraction *float64
		want     string
	}{{nil, tid}, {ptr(1.0), tid}, {ptr(0.0), ""}} {
		tr, err := New(context.Background(), Options{Config: config.Tracing{Endpoint: "127.0.0.1:1", SamplingFraction: tc.fraction}})
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.ExemplarTraceID(ep.UID, ep.Generation); got != tc.want {
			t.Errorf("fraction %v: %q, want %q", tc.fraction, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestSpanIDsAreDerived(t *testing.T) {
	tid := TraceID(ep.UID, ep.Generation)
	if tid.String() != timeline.TraceID(ep.UID, ep.Generation) {
		t.Fatalf("trace id %s, want timeline.TraceID %s", tid, timeline.TraceID(ep.UID, ep.Generation))
	}
	seen := map[string]string{}
	for _, role := range []string{"root", "stage/observed", "stage/updated", "stage/available", "stage/ready", "stage/endpoints_ready", "closed"} {
		id := spanID(tid, role)
		if !id.IsValid() || id != spanID(tid, role) {
			t.Fatalf("%s: span id %s not valid or not stable", role, id)
		}
		if other, dup := seen[id.String()]; dup {
			t.Fatalf("%s and %s share span id %s", role, other, id)
		}
		seen[id.String()] = role
	}
	if RootSpanID(TraceID(ep.UID, ep.Generation+1)) == RootSpanID(tid) {
		t.Error("two generations share a root span id")
	}
}

func TestBadTLSFilesFailTheStart(t *testing.T) {
	_, err := New(context.Background(), Options{Config: config.Tracing{Endpoint: "c:4317", TLSConfig: config.TracingTLS{CAFile: "/nonexistent/ca.pem"}}})
	if err == nil || !strings.Contains(err.Error(), "tracing.tlsConfig") || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("err = %v", err)
	}
}

// The real timeline store as the source: a Warning Event it recorded for
// the open episode is a span event of the stalled root.
func TestWarningEventsFromTheStore(t *testing.T) {
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	store := timeline.NewStore(timeline.Config{})
	tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true}, store, nil)
	opened := []tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0}}
	store.ObserveEpisodes(opened)
	at := t0.Add(2 * time.Second)
	if !store.Add(ep.UID, timeline.Entry{Time: at, Type: timeline.EntryEvent, Reason: "FailedCreate", Message: "exceeded quota",
		Object: &timeline.ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-5d4f", UID: "rs-uid"}}) {
		t.Fatal("the store has no open episode")
	}
	stalled := []tracker.Event{{Type: tracker.EpisodeStalled, Episode: ep, Stage: "available", Reason: "replica_failure", At: t0.Add(5 * time.Minute)}}
	store.ObserveEpisodes(stalled)
	tr.ObserveEpisodes(append(opened, stalled...))
	root := waitSpans(t, r, 1)[0]
	if len(root.Events) != 1 || root.Events[0].Name != "FailedCreate" || root.Events[0].TimeUnixNano != uint64(at.UnixNano()) {
		t.Fatalf("stalled root events %v, want FailedCreate at %v", root.Events, at)
	}
}

// The SDK's variables apply to what the config leaves out, and a key set
// in the config wins over its variable.
func TestEnvironmentPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		headers    map[string]string
		wantTenant string
	}{
		{"env only", nil, "from-env"},
		{"config wins", map[string]string{"X-Scope-OrgID": "from-config"}, "from-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := otlpreceiver.StartHTTP()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-Scope-OrgID=from-env")
			t.Setenv("OTEL_SERVICE_NAME", "kce-prod")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.cluster.name=eu-1")
			tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true, Headers: tc.headers}, nil, nil)
			tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
				{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: t0.Add(time.Second)}})
			root := waitSpans(t, r, 1)[0]
			if h := r.Headers(); h[0]["X-Scope-Orgid"] != tc.wantTenant {
				t.Errorf("X-Scope-OrgID %q, want %q", h[0]["X-Scope-Orgid"], tc.wantTenant)
			}
			if root.Resource["service.name"] != "kce-prod" || root.Resource["k8s.cluster.name"] != "eu-1" || root.Resource["service.version"] != "1.2.3" {
				t.Errorf("resource %v: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES must apply", root.Resource)
			}
		})
	}
}

// OTEL_TRACES_SAMPLER decides when samplingFraction is unset; a
// samplingFraction decides over it.
func TestSamplerPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fraction *float64
		want     int
	}{{"env always_off", nil, 0}, {"config 1 wins", ptr(1.0), 1}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := otlpreceiver.StartHTTP()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
			tr, err := New(context.Background(), Options{Config: config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true, SamplingFraction: tc.fraction}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tr.Run(ctx) }()
			tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
				{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: t0.Add(time.Second)}})
			// Run drains the queue and flushes the provider before it
			// returns: what was sampled has arrived then.
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := len(r.Spans()); n != tc.want {
				t.Errorf("%d spans, want %d", n, tc.want)
			}
		})
	}
}

// Spans nest: the root ends at or after its last child. The tracker's
// episode converges in a record received at +5.05s but handled after a
// Tick at +5.1s that counted its stages over 5 s: the stages are timed at
// the Tick (5.1 s), and so is the close that ends the root (issue 25: at
// its receive time, the root ended 50 ms before its children).
func TestRootEndsAfterItsChildrenWhenATickCameBetween(t *testing.T) {
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", Insecure: true}, nil, nil)

	rollouts := tracker.NewRolloutTracker(tracker.RolloutConfig{Thresholds: []float64{1, 5}})
	deploy := func(observed int64, ready int32) tracker.Workload {
		return tracker.Workload{Kind: tracker.Deployment, UID: ep.UID, Namespace: ep.Namespace, Name: ep.Name,
			Generation: 1, ObservedGeneration: observed, Created: t0, SpecWritten: t0, TemplateHash: "t1", SpecReplicas: 3,
			Status: tracker.Status{Replicas: 3, UpdatedReplicas: ready, AvailableReplicas: ready}}
	}
	tr.ObserveEpisodes(rollouts.Observe(deploy(0, 0), tracker.LiveAt(t0)))
	tr.ObserveEpisodes(rollouts.Tick(t0.Add(5100 * time.Millisecond)))
	tr.ObserveEpisodes(rollouts.Observe(deploy(1, 3), tracker.LiveAt(t0.Add(5050*time.Millisecond))))

	spans := waitSpans(t, r, 4)
	m := byName(spans)
	root := m["rollout Deployment"]
	if len(spans) != 4 || root.Span == nil {
		t.Fatalf("got %v, want the root and 3 stages", slices.Collect(mapKeys(m)))
	}
	if root.Duration() != 5100*time.Millisecond {
		t.Errorf("root lasts %v, want 5.1s", root.Duration())
	}
	for name, s := range m {
		if s.ParentID() == "" {
			continue
		}
		if s.StartTimeUnixNano < root.StartTimeUnixNano || s.EndTimeUnixNano > root.EndTimeUnixNano {
			t.Errorf("span %s [%d, %d] outside its root [%d, %d]", name, s.StartTimeUnixNano, s.EndTimeUnixNano, root.StartTimeUnixNano, root.EndTimeUnixNano)
		}
	}
}
