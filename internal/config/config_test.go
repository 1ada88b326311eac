package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrorsNameLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown top-level key", "collectors: {}\nstal: {threshold: 1m}\n", `line 2: unknown key "stal"`},
		{"unknown nested key", "stall:\n  threshold: 1m\n  treshold: 2m\n", `line 3: unknown key "treshold"`},
		{"bad duration", "stall:\n  threshold: soon\n", `line 2: want a non-negative duration`},
		{"unknown collector", "collectors:\n  rollout: {enabled: false}\n", `unknown collector "rollout"`},
		{"bad mode", "namespaceLabel: {mode: some}\n", `unknown mode "some"`},
		{"allowlist without list", "namespaceLabel: {mode: allowlist}\n", `non-empty allow list`},
		{"bad kind", "stall: {perKind: {Job: 1m}}\n", `unknown kind "Job"`},
		{"not yaml", "collectors: [\n", `line 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kce.yaml")
	if err := os.WriteFile(p, []byte("bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p+`: line 1: unknown key "bogus"`) {
		t.Fatalf("Load error = %v", err)
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	c, err := Parse([]byte(`
collectors:
  pods: {enabled: false}
namespaceLabel: {mode: allowlist, allow: [prod]}
stall:
  threshold: 2m
  perKind: {StatefulSet: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Enabled(Pods) || !c.Enabled(Rollouts) || !c.Enabled(Watch) {
		t.Errorf("enabled: pods=%v rollouts=%v watch=%v", c.Enabled(Pods), c.Enabled(Rollouts), c.Enabled(Watch))
	}
	if got := c.StallThreshold("StatefulSet", time.Minute); got != 10*time.Minute {
		t.Errorf("StatefulSet stall = %v", got)
	}
	if got := c.StallThreshold("Deployment", time.Minute); got != 2*time.Minute {
		t.Errorf("Deployment stall = %v", got)
	}
	if got := Default().StallThreshold("Deployment", 45*time.Second); got != 45*time.Second {
		t.Errorf("default stall = %v, want the flag's value", got)
	}
	if c.NamespaceLabelValue("prod") != "prod" || c.NamespaceLabelValue("dev") != NamespaceOther {
		t.Errorf("allowlist folding wrong")
	}
	if c.Stall.SeriesLimit != DefaultStalledSeriesLimit {
		t.Errorf("series limit = %d", c.Stall.SeriesLimit)
	}
	empty, err := Parse(nil)
	if err != nil || !empty.Enabled(Endpoints) || empty.NamespaceLabelValue("x") != "x" {
		t.Fatalf("empty file: %v", err)
	}
}
