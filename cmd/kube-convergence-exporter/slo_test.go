package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/rules"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = runMain(args, &out, &errs)
	return code, out.String(), errs.String()
}

// `slo generate -f rules/slos.yaml` from the repository root prints the
// committed rule file byte for byte: the CLI and make generate agree.
func TestSLOGenerateMatchesCommittedRules(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	code, out, errs := runCLI(t, "slo", "generate", "-f", "rules/slos.yaml", "--exporter-alerts")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want, err := os.ReadFile("rules/kube-convergence-slos.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Error("slo generate -f rules/slos.yaml differs from rules/kube-convergence-slos.rules.yml: run make generate")
	}
	if errs != "" {
		t.Errorf("stderr: %q", errs)
	}
}

func TestSLOValidate(t *testing.T) {
	code, out, errs := runCLI(t, "slo", "validate", "-f", filepath.Join("..", "..", "rules", "slos.yaml"))
	if code != 0 || !strings.Contains(out, "5 SLO(s) valid") {
		t.Errorf("bundled SLOs: exit %d\n%s%s", code, out, errs)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "service: shop\nslos:\n  - name: x\n    objective: 1.5\n    period: 30d\n    sli:\n      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 4}\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "slo", "validate", "-f", bad)
	if code != 1 {
		t.Errorf("invalid file: exit %d, want 1", code)
	}
	for _, want := range []string{bad + ":4: slo \"x\": objective 1.5 is outside (0, 1)", bad + ":7: slo \"x\": threshold 4.0 is not a bucket boundary"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}

	if code, _, errs := runCLI(t, "slo", "validate"); code != 2 || !strings.Contains(errs, "--file") {
		t.Errorf("no --file: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "slo", "validate", "-f", "-"); code != 2 || !strings.Contains(errs, "--file=-") {
		t.Errorf("-f -: exit %d, %q", code, errs)
	}
	if code, _, _ := runCLI(t, "slo", "validate", "-f", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 {
		t.Errorf("missing file: exit %d, want 1", code)
	}
}

func TestSLOGeneratePrometheusRule(t *testing.T) {
	code, out, errs := runCLI(t, "slo", "generate", "--format=prometheusrule", "--prometheusrule.name=shop", "--prometheusrule.namespace=monitoring",
		"--label", "release=kube-prometheus-stack", "--label=team=shop", "-f", filepath.Join("..", "..", "slo", "testdata", "openslo.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var obj struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Groups []struct {
				Name string `yaml:"name"`
			} `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Kind != "PrometheusRule" || obj.Metadata.Name != "shop" || obj.Metadata.Namespace != "monitoring" || len(obj.Spec.Groups) != 3 {
		t.Errorf("PrometheusRule %+v", obj)
	}
	if obj.Metadata.Labels["release"] != "kube-prometheus-stack" || obj.Metadata.Labels["team"] != "shop" || len(obj.Metadata.Labels) != 2 {
		t.Errorf("--label: metadata.labels %v", obj.Metadata.Labels)
	}
	if code, _, errs := runCLI(t, "slo", "generate", "--label", "bad key=x", "-f", "x"); code != 2 || !strings.Contains(errs, "--label bad key") {
		t.Errorf("--label with a bad key: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "slo", "generate", "--format=json", "-f", "x"); code != 2 || !strings.Contains(errs, "prometheusrule") {
		t.Errorf("--format=json: exit %d, %q", code, errs)
	}
}

// The selector goes into the exporter alerts and the no-events tickets;
// a selector that matches everything is refused.
func TestSLOGenerateSelector(t *testing.T) {
	spec := filepath.Join("..", "..", "rules", "slos.yaml")
	code, out, errs := runCLI(t, "slo", "generate", "-f", spec, "--exporter-alerts", `--selector=job="kce", namespace="monitoring"`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`absent(up{job="kce", namespace="monitoring"} == 1)`, `(count(up{job="kce", namespace="monitoring"} == 1) > 0)`, `--selector='job="kce", namespace="monitoring"' --exporter-alerts`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s", want)
		}
	}
	if strings.Contains(out, `job="kube-convergence-exporter"`) {
		t.Error("the default job is still in the output")
	}
	// Without --exporter-alerts: no exporter group (a user's SLO file next
	// to the bundled rules would define it twice).
	if _, out, _ := runCLI(t, "slo", "generate", "-f", spec); strings.Contains(out, "KubeConvergenceExporterAbsent") {
		t.Error("exporter alerts without --exporter-alerts")
	}
	for _, sel := range []string{`job=~".*"`, `{job="x"}`, `job=`} {
		if code, _, errs := runCLI(t, "slo", "generate", "-f", spec, "--selector="+sel); code != 1 || !strings.Contains(errs, "selector") {
			t.Errorf("--selector=%s: exit %d, %q", sel, code, errs)
		}
	}
}

// `slo validate` generates the rules too: a series recorded twice fails.
func TestSLOValidateFailsOnDuplicateRecords(t *testing.T) {
	f := filepath.Join(t.TempDir(), "dup.yaml")
	doc := `service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 30d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300, match: {kind: Deployment, stage: available}}
    alerting:
      ticket:
        windows: [{long: 30d, short: 6h, factor: 1}]
`
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "slo", "validate", "-f", f)
	if code != 1 || !strings.Contains(errs, `record slo:sli_error:ratio_rate30d{sloth_window="30d"} twice`) {
		t.Errorf("exit %d, %q", code, errs)
	}
}

// serve stays the default command: the SLO commands must not take over.
func TestServeIsStillTheDefault(t *testing.T) {
	code, _, errs := runCLI(t, "--kubeconfig="+filepath.Join(t.TempDir(), "missing"), "--web.listen-address=127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "kubeconfig") {
		t.Errorf("default command: exit %d, want 1 on the missing kubeconfig:\n%s", code, errs)
	}
}

// --dashboards writes one dashboard for the file's SLOs, with budget
// remaining, burn rate per window and the SLI against the objective, and
// links it from every alert.
func TestSLOGenerateDashboards(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "slo", "generate", "-f", filepath.Join("..", "..", "slo", "testdata", "openslo.yaml"), "--dashboards", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "slo-checkout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID != "slo-checkout" {
		t.Errorf("uid %q", dash.UID)
	}
	titles := map[string]string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			titles[p.Title] += tg.Expr + "\n"
		}
	}
	for title, want := range map[string]string{
		"SLI over each SLO's period":               "1 - slo:sli_error:ratio_period",
		"Error budget remaining":                   "slo:period_error_budget_remaining:ratio",
		"Burn rate per window":                     "slo:sli_error:ratio_rate3d",
		"Burn rate over the last hour (1h window)": "slo:sli_error:ratio_rate1h",
	} {
		if !strings.Contains(titles[title], want) || !strings.Contains(titles[title], `sloth_id=~"checkout-checkout-availability|checkout-checkout-latency-fast|`) {
			t.Errorf("panel %q: want %s selected by the file's sloth_ids, got %q", title, want, titles[title])
		}
	}
	if n := strings.Count(out, "dashboard_url: /d/slo-checkout"); n == 0 || n != strings.Count(out, "- alert:") {
		t.Errorf("%d of %d alerts link the dashboard", n, strings.Count(out, "- alert:"))
	}
}

// --bundled-rules writes the bundled hand-written rule files, rewritten
// for --group-by (rules.WithGroupBy, tested in rules/), next to the SLO
// rules on stdout: the whole bundled set for a central ruler.
func TestSLOGenerateBundledRules(t *testing.T) {
	spec := filepath.Join("..", "..", "rules", "slos.yaml")
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errs := runCLI(t, "slo", "generate", "-f", spec, "--exporter-alerts", "--group-by=cluster", "--bundled-rules", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "sum by (cluster)") {
		t.Error("the SLO rules on stdout are not grouped by cluster")
	}
	files, err := rules.HandWritten()
	if err != nil {
		t.Fatal(err)
	}
	want, err := rules.WithGroupBy(files, []string{"cluster"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range want {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.Data) {
			t.Errorf("%s differs from rules.WithGroupBy's", f.Name)
		}
		if !strings.Contains(errs, "wrote "+filepath.Join(dir, f.Name)) {
			t.Errorf("stderr does not name %s: %q", f.Name, errs)
		}
	}
	webhooks, err := os.ReadFile(filepath.Join(dir, "kube-convergence-webhooks.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(webhooks), "max by (cluster, job, configuration, webhook, type) (kube_convergence_webhook_findings") {
		t.Error("the webhook audit does not keep cluster")
	}

	// As PrometheusRule objects, one per file, in the SLO object's namespace.
	dir = t.TempDir()
	code, _, errs = runCLI(t, "slo", "generate", "-f", spec, "--group-by=cluster", "--format=prometheusrule", "--prometheusrule.namespace=monitoring", "--bundled-rules", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kube-convergence-webhooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name, Namespace string
		} `yaml:"metadata"`
		Spec struct {
			Groups []struct {
				Name string `yaml:"name"`
			} `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Kind != "PrometheusRule" || obj.Metadata.Name != "kube-convergence-webhooks" || obj.Metadata.Namespace != "monitoring" || len(obj.Spec.Groups) == 0 {
		t.Errorf("got %+v", obj)
	}
	if !strings.Contains(string(b), "sum by (cluster, webhook, type)") {
		t.Error("the PrometheusRule is not grouped by cluster")
	}

	if code, _, errs := runCLI(t, "slo", "generate", "-f", spec, "--group-by=le", "--bundled-rules", t.TempDir()); code != 1 || !strings.Contains(errs, `group-by "le"`) {
		t.Errorf("--group-by=le: exit %d, %q", code, errs)
	}
}
