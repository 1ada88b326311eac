package rules

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// The bundled SLOs generated for a central ruler (--group-by cluster)
// load in Prometheus and keep clusters apart: testdata/groupby.test.yml.
func TestGroupByClusterRules(t *testing.T) {
	pt := promtool(t)
	f, err := slo.Parse(SLOSpecPath, SLOSpec())
	if err != nil {
		t.Fatal(err)
	}
	rf, err := slo.GenerateWith(f, slo.Options{GroupBy: []string{"cluster"}, ExporterAlerts: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := rf.YAML("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "groupby.rules.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join("testdata", "groupby.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "groupby.test.yml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, time.Minute, pt, "check", "rules", filepath.Join(dir, "groupby.rules.yml"))
	run(t, 2*time.Minute, pt, "test", "rules", filepath.Join(dir, "groupby.test.yml"))
}
