package deploy_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// The chart's computed sampleLimit is config.Config.SampleLimit of its
// config for serviceMonitor.namespaces, in every namespace label mode and
// both classic bucket modes; a set sampleLimit wins.
func TestHelmSampleLimitFollowsTheFormula(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		namespaces   int // 0: the chart's default
		set          int // serviceMonitor.sampleLimit; 0: computed
	}{
		{name: "defaults"},
		{name: "400 namespaces", namespaces: 400},
		{name: "drop", config: "namespaceLabel: {mode: drop}\n", namespaces: 400},
		{name: "allowlist", config: "namespaceLabel: {mode: allowlist, allow: [prod, payments, staging]}\n"},
		{name: "allowlist longer than the namespaces", config: "namespaceLabel: {mode: allowlist, allow: [a, b, c, d]}\n", namespaces: 2},
		{name: "thresholds", config: "histograms: {classicBuckets: thresholds}\n", namespaces: 1000},
		{name: "set", config: "histograms: {classicBuckets: thresholds}\n", set: 12345},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			n := config.BudgetDefaultNamespaces
			args := []string{"--set", "serviceMonitor.enabled=true"}
			if tc.namespaces > 0 {
				n = tc.namespaces
				args = append(args, "--set", "serviceMonitor.namespaces="+strconv.Itoa(n))
			}
			want := cfg.SampleLimit(n)
			if tc.set > 0 {
				want = tc.set
				args = append(args, "--set", "serviceMonitor.sampleLimit="+strconv.Itoa(tc.set))
			}
			if tc.config != "" {
				var c map[string]any
				if err := yaml.Unmarshal([]byte(tc.config), &c); err != nil {
					t.Fatal(err)
				}
				b, err := yaml.Marshal(map[string]any{"config": c})
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, b, 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", f)
			}
			sms := byKind(helmTemplate(t, "kce", "monitoring", args...), "ServiceMonitor")
			if len(sms) != 1 {
				t.Fatalf("%d ServiceMonitors, want 1", len(sms))
			}
			spec, _ := sms[0]["spec"].(map[string]any)
			got, ok := spec["sampleLimit"].(float64)
			if !ok {
				if i, isInt := spec["sampleLimit"].(int); isInt {
					got, ok = float64(i), true
				}
			}
			if !ok || int(got) != want {
				t.Errorf("sampleLimit %v, want %d (config.Config.SampleLimit(%d) of %q)", spec["sampleLimit"], want, n, tc.config)
			}
		})
	}
}
