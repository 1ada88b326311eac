package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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
	code, out, errs := runCLI(t, "slo", "generate", "-f", "rules/slos.yaml")
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
	// The 1-day pod-startup SLO's dropped pair is a note on stderr, not
	// part of the rule file.
	if !strings.Contains(errs, "note: rules/slos.yaml:") || !strings.Contains(errs, "6h/30m at 6x dropped") {
		t.Errorf("stderr lacks the note on dropped pairs: %q", errs)
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
		"-f", filepath.Join("..", "..", "slo", "testdata", "openslo.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var obj struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
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
	if code, _, errs := runCLI(t, "slo", "generate", "--format=json", "-f", "x"); code != 2 || !strings.Contains(errs, "prometheusrule") {
		t.Errorf("--format=json: exit %d, %q", code, errs)
	}
}

// serve stays the default command: the SLO commands must not take over.
func TestServeIsStillTheDefault(t *testing.T) {
	code, _, errs := runCLI(t, "--kubeconfig="+filepath.Join(t.TempDir(), "missing"), "--web.listen-address=127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "kubeconfig") {
		t.Errorf("default command: exit %d, want 1 on the missing kubeconfig:\n%s", code, errs)
	}
}
