package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracing"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracing/otlpreceiver"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// traceEnv makes the batch processor send within 100 ms instead of 5 s.
var traceEnv = []string{"OTEL_BSP_SCHEDULE_DELAY=100"}

// tracingConfig writes a --config.file that sends spans to r.
func tracingConfig(t *testing.T, r *otlpreceiver.Receiver, client string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kce.yaml")
	doc := fmt.Sprintf("tracing:\n  endpoint: %s\n  clientType: %s\n  insecure: true\n", r.Endpoint, client)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// spansOf waits until the spans of namespace ns received by r satisfy cond.
func spansOf(t *testing.T, r *otlpreceiver.Receiver, ns string, timeout time.Duration, what string, cond func([]otlpreceiver.Span) bool) []otlpreceiver.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	filter := func(all []otlpreceiver.Span) []otlpreceiver.Span {
		var out []otlpreceiver.Span
		for _, s := range all {
			if s.Attr("k8s.namespace.name") == ns {
				out = append(out, s)
			}
		}
		return out
	}
	all, err := r.Wait(ctx, func(all []otlpreceiver.Span) bool { return cond(filter(all)) })
	if err != nil {
		var names []string
		for _, s := range filter(all) {
			names = append(names, s.Name)
		}
		t.Fatalf("%s: %v; spans of %s: %v", what, err, ns, names)
	}
	return filter(all)
}

func named(spans []otlpreceiver.Span, name string) []otlpreceiver.Span {
	var out []otlpreceiver.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// An OpenMetrics exemplar of a bucket line: its series labels, its own
// labels and its value.
type exemplar struct {
	series, labels map[string]string
	value          float64
}

var (
	bucketLine = regexp.MustCompile(`^kube_convergence_rollout_duration_seconds_bucket\{([^}]*)\} \S+ # \{([^}]*)\} (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"`)
)

// openMetricsExemplars scrapes /metrics as OpenMetrics (the text format
// that carries exemplars) and returns the duration histogram's exemplars.
func openMetricsExemplars(t *testing.T, e *exporterProc) []exemplar {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, e.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q: OpenMetrics not negotiated", ct)
	}
	parse := func(s string) map[string]string {
		m := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(s, -1) {
			m[p[1]] = p[2]
		}
		return m
	}
	var out []exemplar
	for line := range strings.SplitSeq(string(b), "\n") {
		m := bucketLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("exemplar value in %q: %v", line, err)
		}
		out = append(out, exemplar{series: parse(m[1]), labels: parse(m[2]), value: v})
	}
	return out
}

// A Deployment rollout traced over OTLP/HTTP: one root and one child per
// stage; each stage span lasts what its exemplar on /metrics says (± 1 ms),
// and the exemplar's trace_id is the span's.
func TestTraceSpansMatchExemplars(t *testing.T) {
	t.Parallel()
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	e := startExporterEnv(t, traceEnv, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+tracingConfig(t, r, "http"))
	e.waitReady(60 * time.Second)
	ns := namespace(t, "trace-exemplars")
	service(t, ns, "web")
	d, err := client.AppsV1().Deployments(ns).Create(context.Background(), demo.Deployment(ns, "web", 2, demo.Delays(podCreateDelay, podReadyDelay)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stages := tracker.Stages(tracker.Deployment)
	spans := spansOf(t, r, ns, 90*time.Second, "the closed episode's trace", func(s []otlpreceiver.Span) bool { return len(named(s, "rollout Deployment")) == 1 })
	root := named(spans, "rollout Deployment")[0]
	tid := timeline.TraceID(string(d.UID), 1)
	if root.TraceID() != tid || root.ParentID() != "" || root.Attr("kce.outcome") != "converged" || root.Attr("k8s.deployment.name") != "web" ||
		root.Attr("k8s.deployment.uid") != string(d.UID) || root.Resource["service.name"] != "kube-convergence-exporter" {
		t.Fatalf("root: trace %s (want %s) parent %q attributes %v resource %v", root.TraceID(), tid, root.ParentID(), root.Attributes, root.Resource)
	}
	if len(spans) != 1+len(stages) {
		t.Errorf("%d spans, want the root and %d stages", len(spans), len(stages))
	}

	exemplars := openMetricsExemplars(t, e)
	for _, st := range stages {
		sp := named(spans, string(st))
		if len(sp) != 1 {
			t.Errorf("stage %s: %d spans", st, len(sp))
			continue
		}
		s := sp[0]
		if s.TraceID() != tid || s.ParentID() != root.SpanID() {
			t.Errorf("stage %s: trace %s parent %s, want %s %s", st, s.TraceID(), s.ParentID(), tid, root.SpanID())
		}
		var ex *exemplar
		for i, x := range exemplars {
			if x.series["namespace"] == ns && x.series["stage"] == string(st) && x.labels["uid"] == string(d.UID) {
				ex = &exemplars[i]
			}
		}
		if ex == nil {
			t.Errorf("stage %s: no exemplar of uid %s on /metrics", st, d.UID)
			continue
		}
		t.Logf("stage %-15s span %.6fs, exemplar %.6fs, trace_id %s", st, s.Duration().Seconds(), ex.value, ex.labels["trace_id"])
		if math.Abs(s.Duration().Seconds()-ex.value) > 0.001 {
			t.Errorf("stage %s: span lasts %.6fs, exemplar says %.6fs", st, s.Duration().Seconds(), ex.value)
		}
		if ex.labels["trace_id"] != s.TraceID() || ex.labels["generation"] != "1" || ex.labels["name"] != "web" {
			t.Errorf("stage %s: exemplar labels %v, want trace_id %s", st, ex.labels, s.TraceID())
		}
	}
}

// A rollout whose pods take 12 s to become ready, with a 3 s stall
// threshold, traced over OTLP/gRPC: the root arrives at the threshold with
// kce.stalled=true; the exporter then restarts mid-rollout, and the stages
// the second process sees carry the same trace id and the first process's
// root span id as their parent.
func TestStalledTraceSurvivesRestart(t *testing.T) {
	t.Parallel()
	const threshold = 3 * time.Second
	r, err := otlpreceiver.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	cfg := tracingConfig(t, r, "grpc")
	args := []string{"--kubeconfig=" + sb.Kubeconfig(""), "--config.file=" + cfg, "--stall.threshold=" + threshold.String()}
	first := startExporterEnv(t, traceEnv, args...)
	first.waitReady(60 * time.Second)
	ns := namespace(t, "trace-stall")
	service(t, ns, "web")
	d, err := client.AppsV1().Deployments(ns).Create(context.Background(), demo.Deployment(ns, "web", 1, demo.Delays(time.Second, 12*time.Second)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spans := spansOf(t, r, ns, 30*time.Second, "the stalled root", func(s []otlpreceiver.Span) bool { return len(named(s, "rollout Deployment")) == 1 })
	root := named(spans, "rollout Deployment")[0]
	start := time.Unix(0, int64(root.StartTimeUnixNano))
	arrived := root.Received.Sub(start)
	t.Logf("stalled root: lasts %v, arrived %v after the episode start (threshold %v), stage %s, reason %s",
		root.Duration(), arrived, threshold, root.Attr("kce.stall.stage"), root.Attr("kce.stall.reason"))
	if root.Attr("kce.stalled") != "true" || root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || root.TraceID() != timeline.TraceID(string(d.UID), 1) {
		t.Fatalf("stalled root: trace %s status %v attributes %v", root.TraceID(), root.Status, root.Attributes)
	}
	// Tick runs once a second, the batch delay is 100 ms.
	if root.Duration() < threshold || root.Duration() > threshold+1500*time.Millisecond || arrived < threshold || arrived > threshold+2500*time.Millisecond {
		t.Errorf("stalled root lasts %v and arrived %v after the start, want at the %v threshold (+1 s tick)", root.Duration(), arrived, threshold)
	}
	if got, want := root.SpanID(), tracing.RootSpanID(tracing.TraceID(string(d.UID), 1)).String(); got != want {
		t.Errorf("root span id %s, want the derived %s", got, want)
	}

	if _, err := first.stop(15 * time.Second); err != nil {
		t.Fatalf("first exporter: %v", err)
	}
	second := startExporterEnv(t, traceEnv, args...)
	second.waitReady(60 * time.Second)
	spans = spansOf(t, r, ns, 60*time.Second, "the stages after the restart", func(s []otlpreceiver.Span) bool {
		return len(named(s, "available")) == 1 && len(named(s, "endpoints_ready")) == 1
	})
	// The second process exports the root again when the recovered episode
	// stalls or closes: the same ids, so a backend sees one span.
	for _, r := range named(spans, "rollout Deployment") {
		if r.SpanID() != root.SpanID() || r.TraceID() != root.TraceID() {
			t.Errorf("a root with other ids after the restart: trace %s span %s", r.TraceID(), r.SpanID())
		}
	}
	t.Logf("%d root span exports across the two processes", len(named(spans, "rollout Deployment")))
	for _, name := range []string{"available", "endpoints_ready"} {
		s := named(spans, name)[0]
		t.Logf("after the restart: %s trace %s parent %s recovered=%s", name, s.TraceID(), s.ParentID(), s.Attr("kce.recovered"))
		if s.TraceID() != root.TraceID() || s.ParentID() != root.SpanID() || s.Attr("kce.recovered") != "true" {
			t.Errorf("%s after the restart: trace %s parent %s, want the first process's %s %s", name, s.TraceID(), s.ParentID(), root.TraceID(), root.SpanID())
		}
	}
}

// Faults: a missing tlsConfig file fails the start naming it; an
// unreachable OTLP endpoint holds nothing up (the rollout is measured as
// without tracing) and is logged once, not per export.
func TestTracingFaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Run("missing CA file", func(t *testing.T) {
		cfg := filepath.Join(dir, "tls.yaml")
		if err := os.WriteFile(cfg, []byte("tracing:\n  endpoint: otel:4317\n  tlsConfig:\n    caFile: /nonexistent/ca.pem\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(context.Background(), exporter, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--web.listen-address="+freeAddr(t))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "tracing.tlsConfig") || !strings.Contains(string(out), "/nonexistent/ca.pem") {
			t.Errorf("exit %v, output:\n%s", err, out)
		}
	})
	t.Run("unreachable endpoint", func(t *testing.T) {
		cfg := filepath.Join(dir, "down.yaml")
		if err := os.WriteFile(cfg, []byte("tracing:\n  endpoint: "+freeAddr(t)+"\n  insecure: true\n  timeout: 500ms\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		e := startExporterEnv(t, append(traceEnv, "OTEL_BSP_EXPORT_TIMEOUT=1000"), "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg)
		e.waitReady(60 * time.Second)
		ns := namespace(t, "trace-down")
		if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), demo.Deployment(ns, "web", 1, demo.Delays(podCreateDelay, podReadyDelay)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := stageSeconds(t, e, 1, map[string]string{"kind": "Deployment", "namespace": ns, "change": "create", "stage": "available"})
		if inj := (podCreateDelay + podReadyDelay).Seconds(); got < inj || got > inj+1.5 {
			t.Errorf("available = %.3fs with the OTLP endpoint down, want the injected %.1fs", got, inj)
		}
		const line = "tracing: spans dropped or not exported"
		eventually(t, 30*time.Second, "the dropped-spans log line", func() (bool, string) {
			return strings.Contains(e.logs.String(), line), tail(e.logs.String(), 5)
		})
		if n := strings.Count(e.logs.String(), line); n != 1 {
			t.Errorf("%d dropped-spans log lines, want 1 a minute:\n%s", n, tail(e.logs.String(), 20))
		}
		t.Logf("available %.3fs with the endpoint down; log: %s", got, tail(e.logs.String(), 1))
	})
}

// A quota-blocked rollout: its root, exported at the stall threshold,
// carries the ReplicaSet's FailedCreate Warning Events (recorded by the
// timeline store) as span events.
func TestStalledTraceCarriesWarningEvents(t *testing.T) {
	t.Parallel()
	const threshold = 5 * time.Second
	ctx := context.Background()
	r, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	e := startExporterEnv(t, traceEnv, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+tracingConfig(t, r, "http"), "--stall.threshold="+threshold.String())
	e.waitReady(60 * time.Second)
	ns := namespace(t, "trace-quota")
	podQuota(t, ns, "one-pod", "1")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "big", 3, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spans := spansOf(t, r, ns, threshold+30*time.Second, "the stalled root", func(s []otlpreceiver.Span) bool { return len(named(s, "rollout Deployment")) == 1 })
	root := named(spans, "rollout Deployment")[0]
	if root.Attr("kce.stalled") != "true" || root.Attr("kce.stall.reason") != "replica_failure" {
		t.Errorf("stalled root attributes %v", root.Attributes)
	}
	failed := 0
	for _, ev := range root.Events {
		sev := otlpreceiver.Span{Span: &tracepb.Span{Attributes: ev.Attributes}}
		if ev.Name == "FailedCreate" && strings.Contains(sev.Attr("kce.event.message"), "exceeded quota") && strings.HasPrefix(sev.Attr("kce.event.object"), "ReplicaSet "+ns+"/big-") {
			failed++
		}
	}
	t.Logf("stalled root: %d span events, %d FailedCreate", len(root.Events), failed)
	if failed == 0 {
		_, body, _ := e.get("/api/v1/timelines?namespace=" + ns)
		t.Errorf("no FailedCreate span event on the stalled root; events: %v; the timeline API: %s", root.Events, body)
	}
}
