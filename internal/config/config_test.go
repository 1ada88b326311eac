package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrorsNameLineAndKey(t *testing.T) {
	const positive = `must be a positive duration such as "5m", got %s (an unconverged object counts as stalled once it is older than this)`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown top-level key", "collectors: {}\nstal: {threshold: 1m}\n", `line 2: unknown key "stal"`},
		{"unknown nested key", "stall:\n  threshold: 1m\n  treshold: 2m\n", `line 3: unknown key "treshold"`},
		{"bad duration", "stall:\n  threshold: soon\n", `line 2: want a duration such as "5m", got "soon"`},
		{"unknown collector", "collectors:\n  rollout: {enabled: false}\n", `line 2: collectors: unknown collector "rollout" (known: rollouts, pods, endpoints, watch, resources, retries, churn, webhooks, admission_probes, timelines)`},
		{"bad mode", "namespaceLabel: {mode: some}\n", `line 1: namespaceLabel: unknown mode "some" (want keep, drop or allowlist)`},
		{"allowlist without list", "namespaceLabel:\n  mode: allowlist\n", `line 2: namespaceLabel: mode allowlist needs a non-empty allow list`},
		{"allow without allowlist", "namespaceLabel:\n  mode: keep\n  allow: [a]\n", `line 3: namespaceLabel: allow is only used with mode "allowlist"`},
		{"bad kind", "stall:\n  perKind:\n    Job: 1m\n", `line 3: stall.perKind: unknown kind "Job" (want Deployment, StatefulSet, DaemonSet, Pod)`},
		{"zero per-kind threshold", "stall:\n  perKind:\n    Deployment: 1m\n    Pod: 0s\n", "line 4: stall.perKind.Pod: " + fmt.Sprintf(positive, "0s")},
		{"negative per-kind threshold", "stall: {perKind: {StatefulSet: -1m}}\n", "line 1: stall.perKind.StatefulSet: " + fmt.Sprintf(positive, "-1m0s")},
		{"zero threshold", "stall:\n  threshold: 0s\n", "line 2: stall.threshold: " + fmt.Sprintf(positive, "0s")},
		{"empty threshold", "stall:\n  threshold:\n", "line 2: stall.threshold: " + fmt.Sprintf(positive, "0s")},
		{"zero series limit", "stall:\n  seriesLimit: 0\n", `line 2: stall.seriesLimit: must be positive, got 0 (it caps the per-object stalled series of each collector)`},
		{"two errors on one line", "stall:\n  threshold: 0s\n  perKind: {Pod: 0s}\n", "line 2: stall.threshold: " + fmt.Sprintf(positive, "0s") + "; line 3: stall.perKind.Pod: " + fmt.Sprintf(positive, "0s")},
		{"second document", "stall: {threshold: 1m}\n---\nstall: {threshold: 2m}\n", `line 2: a second YAML document: the file must hold exactly one (everything after the first "---" separator would be ignored)`},
		{"empty second document", "collectors: {}\n---\n", `line 2: a second YAML document: the file must hold exactly one (everything after the first "---" separator would be ignored)`},
		{"broken second document", "collectors: {}\n---\ncollectors: [\n", `line 3: did not find expected node content`},
		{"not yaml", "collectors: [\n", `line 1: did not find expected node content`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// Documents that must stay valid: a leading "---" and a "..." end marker
// are one document.
func TestParseAcceptsOneDocument(t *testing.T) {
	for _, doc := range []string{"---\nstall: {threshold: 1m}\n", "stall: {threshold: 1m}\n...\n", "# only a comment\n", ""} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("Parse(%q) = %v", doc, err)
		}
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	for doc, want := range map[string]string{
		"bogus: 1\n":                            `: line 1: unknown key "bogus"`,
		"stall:\n  perKind:\n    Pod: 0s\n":     `: line 3: stall.perKind.Pod: must be a positive duration`,
		"collectors: {}\n---\ncollectors: {}\n": `: line 2: a second YAML document`,
	} {
		p := filepath.Join(t.TempDir(), "kce.yaml")
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.HasPrefix(err.Error(), "config file "+p+want) {
			t.Errorf("Load(%q) error = %v, want prefix %q", doc, err, "config file "+p+want)
		}
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
