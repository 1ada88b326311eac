package manifests

// deploy/components/prometheus-operator/prometheusrule.yaml is generated (internal/gen, generator
// "prometheusrule"); these tests check what it holds, not how it is made:
// exactly the groups of the bundled rule files, in the order Prometheus
// would load them, and rules that promtool accepts.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// bundledRuleFiles are the rule files the PrometheusRule carries: every
// rules/*.rules.yml, in name order (filepath.Glob sorts, as Prometheus does
// for a rule_files glob), so a new rule file cannot be left out.
func bundledRuleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "rules", "*.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("rules/*.rules.yml: %d files, want at least the alerts, SLO and webhook rules", len(files))
	}
	return files
}

func TestPrometheusRuleHoldsTheBundledRules(t *testing.T) {
	var obj struct {
		Spec struct {
			Groups []map[string]any `yaml:"groups"`
		} `yaml:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(operatorComponent, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for _, f := range bundledRuleFiles(t) {
		var rf struct {
			Groups []map[string]any `yaml:"groups"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, rf.Groups...)
	}
	if len(obj.Spec.Groups) != len(want) {
		t.Fatalf("PrometheusRule has %d groups, the rule files %d", len(obj.Spec.Groups), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(obj.Spec.Groups[i], want[i]) {
			t.Errorf("group %d (%v) differs from the rule files' (%v)", i, obj.Spec.Groups[i]["name"], want[i]["name"])
		}
	}

	// And promtool accepts it as a rule file.
	promtool, err := filepath.Abs(filepath.Join(repoRoot, ".bin", "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("KCE_BIN_DIR"); dir != "" {
		promtool = filepath.Join(dir, "promtool")
	}
	if _, err := os.Stat(promtool); err != nil {
		t.Skipf("promtool not built (make tools): %v", err)
	}
	out, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "prometheusrule.rules.yml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the PrometheusRule's groups: %v\n%s", err, out)
	}
}
