package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The foundation's acceptance: the real binary against a real API server.
func TestExporterReadyMetricsAndCleanShutdown(t *testing.T) {
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(readOnlyUser), "--web.external-url=http://kce.example:10329/")
	body := e.waitReady(60 * time.Second)
	if !strings.Contains(body, "collector rollouts: synced") {
		t.Errorf("/readyz body does not report the synced collector:\n%s", body)
	}
	mfs := e.scrape()
	for name, labels := range map[string]map[string]string{
		"kube_convergence_build_info":      nil,
		"kube_convergence_collector_up":    {"collector": "rollouts"},
		"kube_convergence_informer_synced": {"collector": "rollouts", "resource": "deployments.apps"},
		"kube_convergence_web_info":        {"external_url": "http://kce.example:10329/"},
	} {
		if v, ok := value(mfs, name, labels); !ok || v != 1 {
			t.Errorf("%s%v = %v (found %v), want 1", name, labels, v, ok)
		}
	}
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Errorf("process metrics missing without --web.disable-exporter-metrics")
	}
	// promtool checks the exposition's names, HELP and types.
	_, raw, _ := e.get("/metrics")
	check := exec.CommandContext(context.Background(), promtool(t), "check", "metrics")
	check.Stdin = strings.NewReader(raw)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	documented(t, mfs)
	if code, _, _ := e.get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, page, _ := e.get("/"); code != 200 || !strings.Contains(page, "/metrics") {
		t.Errorf("landing page = %d", code)
	}
	took, err := e.stop(15 * time.Second)
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, tail(e.logs.String(), 20))
	}
	t.Logf("SIGTERM to exit: %v", took)
	if !strings.Contains(e.logs.String(), "shutting down") {
		t.Errorf("no shutdown log line")
	}
}

func TestExporterDisableExporterMetrics(t *testing.T) {
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--web.disable-exporter-metrics")
	e.waitReady(60 * time.Second)
	for name := range e.scrape() {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			t.Errorf("%s exposed with --web.disable-exporter-metrics", name)
		}
	}
}

// A resource that RBAC forbids disables that collector, visibly, and keeps
// the process up and ready.
func TestForbiddenResourceDisablesCollector(t *testing.T) {
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(noEndpointsUser))
	body := e.waitReady(60 * time.Second)
	if !strings.Contains(body, "collector rollouts: disabled (forbidden by RBAC") {
		t.Errorf("/readyz does not name the forbidden collector:\n%s", body)
	}
	// webhooks reads endpointslices as an optional resource: it runs
	// without them (endpoints_unknown instead of no_ready_endpoints, in
	// TestWebhookOutageFindings) and says so.
	mfs := e.scrape()
	for c, want := range map[string]float64{"rollouts": 0, "webhooks": 1} {
		if v, ok := value(mfs, "kube_convergence_collector_up", map[string]string{"collector": c}); !ok || v != want {
			t.Errorf("collector_up{%s} = %v (found %v), want %v", c, v, ok, want)
		}
	}
	if !strings.Contains(e.logs.String(), "collector runs without a resource RBAC forbids") {
		t.Errorf("no log line saying webhooks runs without endpointslices:\n%s", tail(e.logs.String(), 20))
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "RBAC forbids list/watch") || !strings.Contains(logs, "endpointslices.discovery.k8s.io") {
		t.Errorf("no log line naming the forbidden resource:\n%s", tail(logs, 20))
	}
}

func TestBadInputFailsClearly(t *testing.T) {
	run := func(args ...string) (int, string) {
		cmd := exec.CommandContext(context.Background(), exporter, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return code, string(out)
	}
	t.Run("bad flag", func(t *testing.T) {
		code, out := run("--web.listen-adress=:1") //nolint:misspell // the typo is the test
		if code != 2 || !strings.Contains(out, "unknown long flag '--web.listen-adress'") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})
	t.Run("unknown config key", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "kce.yaml")
		if err := os.WriteFile(cfg, []byte("collectors:\n  rollouts:\n    enabled: true\n    stallThreshold: 1m\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := run("--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--web.listen-address="+freeAddr(t))
		if code != 1 || !strings.Contains(out, cfg+`: line 4: unknown key \"stallThreshold\"`) {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})
	t.Run("bad admission probe", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "kce.yaml")
		if err := os.WriteFile(cfg, []byte("admissionProbes:\n  - name: p\n    resource: configmaps\n    namespace: default\n    operation: PATCH\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := run("--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--web.listen-address="+freeAddr(t))
		if code != 1 || !strings.Contains(out, cfg+`: line 5: admissionProbes[0].operation: want one of CREATE, UPDATE, DELETE, got \"PATCH\"`) {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})
	t.Run("unreachable API server", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		addr := freeAddr(t) // nothing listens there
		if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
			t.Fatal(err)
		}
		e := startExporter(t, "--kubeconfig="+kc)
		eventually(t, 20*time.Second, "a clear log line and a not-ready /readyz", func() (bool, string) {
			code, body, _ := e.get("/readyz")
			logs := e.logs.String()
			ok := code == 503 && strings.Contains(body, "cannot reach the Kubernetes API server at https://"+addr) &&
				strings.Contains(logs, "API server unreachable, retrying")
			return ok, body + "\n" + tail(logs, 5)
		})
		if code, _, _ := e.get("/healthz"); code != 200 {
			t.Errorf("/healthz = %d while the API server is unreachable, want 200 (alive)", code)
		}
	})
}

// documented fails for every kube_convergence_* family the running exporter
// exposes that the README's metric reference lacks, or lists with another type.
func documented(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "kube_convergence_") {
			continue
		}
		row := "| `" + name + "` | " + strings.ToLower(mf.GetType().String()) + " |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("exposed metric %s (%s) is not in the README's metric reference", name, mf.GetType())
		}
	}
}
