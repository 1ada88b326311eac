package dashboards

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Two shards of two replicas each, on a real Prometheus engine (promtool):
// a family without a namespace label (failing objects per controller,
// every shard's series alike but for the target) is one count per shard,
// summed over shards, each shard's replicas folded (they disagree: one
// replica saw an object more). Without kube_convergence_shard_info the
// fold is the busiest shard; the plain sum, the bug this prevents, counts
// every replica.
func TestReplicasFoldsReplicasAndAddsShards(t *testing.T) {
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".bin")
	}
	promtool, err := filepath.Abs(filepath.Join(dir, "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("promtool not built (run make tools, or set KCE_BIN_DIR): %v", err)
	}
	q := func(sel string) string {
		return fmt.Sprintf("sum by (controller) (%s)", replicas(fmt.Sprintf(`kube_convergence_controller_failing_objects{%s}`, sel)))
	}
	target := func(instance, pod string) string {
		return fmt.Sprintf(`job="kce", instance=%q, pod=%q, namespace="monitoring"`, instance, pod)
	}
	failing := func(instance, pod, env string) string {
		return fmt.Sprintf("      - series: 'kube_convergence_controller_failing_objects{%s, controller=\"kcm\", env=%q}'\n", target(instance, pod), env)
	}
	info := func(instance, pod, shard string) string {
		return fmt.Sprintf("      - series: 'kube_convergence_shard_info{%s, shard=%q, total_shards=\"2\"}'\n        values: '1x10'\n", target(instance, pod), shard)
	}
	test := "rule_files: []\nevaluation_interval: 1m\ntests:\n" +
		"  - interval: 1m\n    input_series:\n" +
		failing("a0", "kce-0", "sharded") + "        values: '3x10'\n" +
		failing("a1", "kce-0b", "sharded") + "        values: '4x10'\n" +
		failing("b0", "kce-1", "sharded") + "        values: '5x10'\n" +
		failing("b1", "kce-1b", "sharded") + "        values: '5x10'\n" +
		info("a0", "kce-0", "0") + info("a1", "kce-0b", "0") + info("b0", "kce-1", "1") + info("b1", "kce-1b", "1") +
		failing("c0", "old-0", "no-info") + "        values: '3x10'\n" +
		failing("c1", "old-1", "no-info") + "        values: '3x10'\n" +
		"    promql_expr_test:\n" +
		"      - expr: '" + q(`env="sharded"`) + "'\n        eval_time: 5m\n        exp_samples: [{labels: '{controller=\"kcm\"}', value: 9}]\n" +
		"      - expr: '" + q(`env="no-info"`) + "'\n        eval_time: 5m\n        exp_samples: [{labels: '{controller=\"kcm\"}', value: 3}]\n"
	f := filepath.Join(t.TempDir(), "replicas.test.yml")
	if err := os.WriteFile(f, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, test)
	}
}
