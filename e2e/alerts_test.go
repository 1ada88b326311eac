package e2e

// The end-to-end acceptance of the bundled alerts: labels that
// survive a prometheus-operator style scrape, and KubeConvergenceExporterAbsent
// when the exporter's target disappears.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/rules"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// operatorRelabelConfigs are the relabel_configs prometheus-operator
// generates for a ServiceMonitor endpoint (port "metrics", role endpoints;
// its golden file pkg/prometheus/testdata/HonorLabelsOverriding.golden, one
// shard): the target gets namespace, service, pod, container, job and
// endpoint labels from service discovery.
func operatorRelabelConfigs() []map[string]any {
	return []map[string]any{
		{"source_labels": []string{"job"}, "target_label": "__tmp_prometheus_job_name"},
		{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": "metrics"},
		{"source_labels": []string{"__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"}, "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
		{"source_labels": []string{"__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"}, "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
		{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
		{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		{"action": "drop", "source_labels": []string{"__meta_kubernetes_pod_phase"}, "regex": "(Failed|Succeeded)"},
		{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job", "replacement": "${1}"},
		{"target_label": "endpoint", "replacement": "metrics"},
		{"source_labels": []string{"__address__", "__tmp_hash"}, "target_label": "__tmp_hash", "regex": "(.+);", "replacement": "$1", "action": "replace"},
		{"source_labels": []string{"__tmp_hash"}, "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
		{"source_labels": []string{"__tmp_hash"}, "regex": "0", "action": "keep"},
	}
}

// discoveredLabels are what Kubernetes service discovery (role endpoints)
// attaches to the exporter's endpoint in namespace monitoring, Service
// service.
func discoveredLabels(service string) map[string]string {
	return map[string]string{
		"__meta_kubernetes_namespace":                    "monitoring",
		"__meta_kubernetes_service_name":                 service,
		"__meta_kubernetes_endpoint_port_name":           "metrics",
		"__meta_kubernetes_endpoint_address_target_kind": "Pod",
		"__meta_kubernetes_endpoint_address_target_name": service + "-7c9d8-abcde",
		"__meta_kubernetes_pod_name":                     service + "-7c9d8-abcde",
		"__meta_kubernetes_pod_container_name":           "exporter",
		"__meta_kubernetes_pod_phase":                    "Running",
	}
}

// shortenedRules writes the bundled rule files into dir with two waits
// shortened, so that a test sees the alert in seconds: for and the
// progress offset of KubeConvergenceRolloutStuck (15m, 10m -> 10s, 10s) and
// the for of KubeConvergenceExporterAbsent (15m -> 5s). Every expression
// is otherwise the bundled one, which the function checks.
func shortenedRules(t *testing.T, dir string) []string {
	t.Helper()
	type edit struct{ forWas, forNow, offsetWas, offsetNow string }
	edits := map[string]edit{
		"KubeConvergenceRolloutStuck":   {"15m", "10s", "offset 10m", "offset 10s"},
		"KubeConvergenceExporterAbsent": {"15m", "5s", "", ""},
	}
	files, err := filepath.Glob(filepath.Join("..", "rules", "*.rules.yml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("bundled rule files: %v %v", files, err)
	}
	var out []string
	done := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf slo.RuleFile
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatal(err)
		}
		for gi := range rf.Groups {
			for ri := range rf.Groups[gi].Rules {
				r := &rf.Groups[gi].Rules[ri]
				e, ok := edits[r.Alert]
				if !ok {
					continue
				}
				if r.For != e.forWas || (e.offsetWas != "" && strings.Count(r.Expr, e.offsetWas) == 0) {
					t.Fatalf("%s: for %q, expr %q: the bundled rule changed, update the test", r.Alert, r.For, r.Expr)
				}
				r.For = e.forNow
				if e.offsetWas != "" {
					r.Expr = strings.ReplaceAll(r.Expr, e.offsetWas, e.offsetNow)
				}
				done[r.Alert] = true
			}
		}
		y, err := rf.YAML("Bundled " + filepath.Base(f) + " with shortened waits (e2e/alerts_test.go).")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, y, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	for a := range edits {
		if !done[a] {
			t.Fatalf("%s not found in the bundled rules", a)
		}
	}
	return out
}

func startAlertmanager(ctx context.Context, t *testing.T) (*sandbox.Alertmanager, *sandbox.WebhookReceiver) {
	t.Helper()
	receiver, err := sandbox.NewWebhookReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { receiver.Close() })
	am, err := sandbox.StartAlertmanager(ctx, sandbox.AlertmanagerOptions{WebhookURL: receiver.URL(), GroupWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := am.Stop(); err != nil {
			t.Error(err)
		}
	})
	return am, receiver
}

func startPrometheus(ctx context.Context, t *testing.T, o sandbox.PrometheusOptions) *sandbox.Prometheus {
	t.Helper()
	prom, err := sandbox.StartPrometheus(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	return prom
}

func count(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, q string) int {
	t.Helper()
	v, err := prom.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 {
		return 0
	}
	return int(v[0].Value)
}

// The shared exporter scraped the way prometheus-operator scrapes a
// ServiceMonitor in namespace monitoring: job kube-convergence-exporter with
// honor_labels: true (what deploy/ ships), and the same target without it.
// With honorLabels the exporter's namespace label (the workload's) is kept
// on every family and on the bundled rules' results: the stuck-rollout
// alert names the workload's namespace, a namespace-scoped SLI counts its
// events. Without it Prometheus renames the exporter's label to
// exported_namespace and writes the target's namespace (monitoring) in its
// place.
func TestBundledRulesKeepNamespaceBehindServiceMonitorScrape(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	ns := namespace(t, "labels-stuck")
	// A namespace-scoped SLI, generated like a user's SLO file: every
	// Deployment rollout of ns counts, by the exporter's namespace label.
	spec := fmt.Sprintf(`service: e2e
slos:
  - name: ns-rollouts
    objective: 0.99
    period: 30d
    sli:
      latency:
        metric: kube_convergence_rollout_duration_seconds
        threshold: 300
        match: {namespace: %s, stage: observed}
`, ns)
	f, err := slo.Parse("ns.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	rf, err := slo.GenerateWith(f, slo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	y, err := rf.YAML("")
	if err != nil {
		t.Fatal(err)
	}
	nsRules := filepath.Join(dir, "ns.rules.yml")
	if err := os.WriteFile(nsRules, y, 0o644); err != nil {
		t.Fatal(err)
	}
	ruleFiles := append(shortenedRules(t, dir), nsRules)

	addr := strings.TrimPrefix(e.url, "http://")
	scrape := func(job string, honor bool) sandbox.ScrapeTarget {
		return sandbox.ScrapeTarget{
			Job:    job,
			Addr:   addr,
			Labels: discoveredLabels(job),
			Extra: map[string]any{
				"honor_labels":                     honor,
				"relabel_configs":                  operatorRelabelConfigs(),
				"scrape_native_histograms":         true,
				"always_scrape_classic_histograms": true,
			},
		}
	}
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		Targets: []sandbox.ScrapeTarget{
			scrape("kube-convergence-exporter", true),
			// Not the default selector: the bundled rules' exporter alerts
			// and no-events tickets do not see it, the SLIs do (they do
			// not select on job), so the checks below filter by job.
			scrape("without-honor-labels", false),
		},
		RuleFiles: ruleFiles,
		ExtraArgs: []string{"--enable-feature=created-timestamp-zero-ingestion"},
	})
	// The relabelling ran: up carries the discovered target labels.
	if _, err := prom.WaitFor(ctx, `up{job="kube-convergence-exporter", namespace="monitoring", service="kube-convergence-exporter", endpoint="metrics", pod="kube-convergence-exporter-7c9d8-abcde", container="exporter"} == 1`,
		func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// A Deployment that never becomes Ready: observed at once, stalled
	// before available from the shared exporter's 15 s threshold on.
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "stuck", 1, demo.NeverReady), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prom.WaitFor(ctx, fmt.Sprintf(`kube_convergence_rollout_stalled_seconds{job="kube-convergence-exporter", namespace=%q}`, ns),
		func(v model.Vector) bool { return len(v) == 1 }, time.Minute); err != nil {
		t.Fatal(err)
	}

	// The families with a namespace label of their own are those that
	// carry exported_namespace when scraped without honor_labels (the
	// others get the target's namespace, monitoring, either way). With
	// honor_labels every one of them keeps the exporter's value: never the
	// target's, never exported_namespace; and the same series exist under
	// both scrapes.
	v, err := prom.Query(ctx, `count by (__name__) ({__name__=~"kube_convergence_.+", job="without-honor-labels", exported_namespace!=""})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) < 5 {
		t.Fatalf("only %d exporter families with a namespace label: %v", len(v), v)
	}
	for _, s := range v {
		name := string(s.Metric["__name__"])
		if n := count(ctx, t, prom, fmt.Sprintf(`count({__name__=%q, job="without-honor-labels", exported_namespace!="", namespace!="monitoring"})`, name)); n != 0 {
			t.Errorf("%s: without honor_labels %d series do not carry the target's namespace", name, n)
		}
		if n := count(ctx, t, prom, fmt.Sprintf(`count({__name__=%q, job="kube-convergence-exporter", namespace="monitoring"})`, name)); n != 0 {
			t.Errorf("%s: %d series with the target's namespace=monitoring behind honor_labels: true", name, n)
		}
		if n := count(ctx, t, prom, fmt.Sprintf(`count({__name__=%q, job="kube-convergence-exporter", exported_namespace!=""})`, name)); n != 0 {
			t.Errorf("%s: %d series with exported_namespace behind honor_labels: true", name, n)
		}
	}
	t.Logf("%d families with a namespace label keep it behind honor_labels: true; without it they carry exported_namespace and namespace=\"monitoring\"", len(v))

	// The namespace-scoped SLI counts ns's rollout through the honoured
	// label; the same selector on the renamed series counts nothing.
	waitSLI(ctx, t, prom, `slo:sli_total:rate5m{sloth_slo="ns-rollouts"} > 0`)
	if n := count(ctx, t, prom, fmt.Sprintf(`count(kube_convergence_rollout_duration_seconds_bucket{job="without-honor-labels", namespace=%q})`, ns)); n != 0 {
		t.Errorf("without honor_labels %d series still carry namespace=%s", n, ns)
	}

	// The bundled stuck-rollout alert (waits shortened) names the
	// workload's namespace; stage and reason are annotations. The scrape
	// without honor_labels gives the same alert naming the target's
	// namespace, monitoring: the routing-by-namespace bug this pins.
	v, err = prom.WaitFor(ctx, fmt.Sprintf(`ALERTS{alertname="KubeConvergenceRolloutStuck", alertstate="firing", name="stuck", namespace=%q}`, ns),
		func(v model.Vector) bool { return len(v) >= 1 }, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v {
		if _, ok := s.Metric["stage"]; ok {
			t.Errorf("alert labels %v: stage is an annotation, not a label", s.Metric)
		}
		if s.Metric["job"] != "kube-convergence-exporter" {
			t.Errorf("alert %v: fired for the scrape without honor_labels too", s.Metric)
		}
	}
	if n := count(ctx, t, prom, `count(ALERTS{alertname="KubeConvergenceRolloutStuck", job="without-honor-labels", namespace="monitoring"})`); n == 0 {
		t.Error("the scrape without honor_labels should give a stuck alert that names the target's namespace monitoring")
	}

	failures, err := prom.RuleEvaluationFailures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("prometheus_rule_evaluation_failures_total = %v, want 0", failures)
	}
}

// The exporter is stopped while Prometheus runs and its target is removed
// from service discovery (a deleted Service or a ServiceMonitor that no
// longer selects it): there is no up series left to be 0. The bundled
// KubeConvergenceExporterAbsent (its expression as shipped, its 15m for
// shortened to 5s) reaches Alertmanager's webhook.
func TestExporterAbsentReachesAlertmanager(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""))
	if err := e.ready(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	am, receiver := startAlertmanager(ctx, t)

	dir := t.TempDir()
	sd := filepath.Join(dir, "targets.json")
	writeTargets := func(addrs ...string) {
		t.Helper()
		groups := []map[string]any{}
		if len(addrs) > 0 {
			groups = append(groups, map[string]any{"targets": addrs, "labels": map[string]string{"__meta_kubernetes_namespace": "monitoring"}})
		}
		b, err := json.Marshal(groups)
		if err != nil {
			t.Fatal(err)
		}
		// Rename into place: Prometheus watches the file and must never
		// read half of it.
		tmp := sd + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, sd); err != nil {
			t.Fatal(err)
		}
	}
	writeTargets(strings.TrimPrefix(e.url, "http://"))
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		Targets: []sandbox.ScrapeTarget{{
			Job: "kube-convergence-exporter",
			Extra: map[string]any{
				"honor_labels":    true,
				"file_sd_configs": []map[string]any{{"files": []string{sd}, "refresh_interval": "1s"}},
				"relabel_configs": []map[string]any{{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"}},
			},
		}},
		RuleFiles:       shortenedRules(t, dir),
		AlertmanagerURL: am.URL(),
	})
	if _, err := prom.WaitFor(ctx, `up{job="kube-convergence-exporter", namespace="monitoring"} == 1`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The bundled expression, evaluated: nothing while the target is up.
	bundled := bundledExpr(t, "KubeConvergenceExporterAbsent")
	if want := `absent(up{job="kube-convergence-exporter"} == 1)`; bundled != want {
		t.Fatalf("bundled KubeConvergenceExporterAbsent is %q, want %q", bundled, want)
	}
	if v, err := prom.Query(ctx, bundled); err != nil || len(v) != 0 {
		t.Fatalf("%s while the exporter is up: %v %v", bundled, v, err)
	}

	if _, err := e.stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	writeTargets()
	stopped := time.Now()
	// The target is gone: no up series at all, not up == 0.
	if _, err := prom.WaitFor(ctx, `absent(up{job="kube-convergence-exporter"})`, func(v model.Vector) bool { return len(v) == 1 }, time.Minute); err != nil {
		t.Fatal(err)
	}
	alert, err := receiver.WaitFor(ctx, func(a sandbox.ReceivedAlert) bool {
		return a.Status == "firing" && a.Labels["alertname"] == "KubeConvergenceExporterAbsent"
	}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KubeConvergenceExporterAbsent at the webhook %v after the exporter stopped and its target was removed", time.Since(stopped).Round(time.Second))
	if alert.Labels["severity"] != "warning" {
		t.Errorf("labels %v", alert.Labels)
	}
	for _, k := range []string{"summary", "description", "runbook_url", "dashboard_url"} {
		if alert.Annotations[k] == "" {
			t.Errorf("annotation %s missing: %v", k, alert.Annotations)
		}
	}
}

// bundledExpr is the expression of the bundled alert name: in the SLO
// rules as slos.yaml renders them first, else in a bundled rule file.
func bundledExpr(t *testing.T, name string) string {
	t.Helper()
	b, err := rules.SLORules()
	if err != nil {
		t.Fatal(err)
	}
	sources := [][]byte{b}
	files, err := filepath.Glob(filepath.Join("..", "rules", "*.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, b)
	}
	for _, b := range sources {
		var rf slo.RuleFile
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatal(err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == name {
					return r.Expr
				}
			}
		}
	}
	t.Fatalf("%s is not a bundled alert", name)
	return ""
}
