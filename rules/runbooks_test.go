package rules_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/dashboards"
)

const runbookPrefix = "https://github.com/kube-convergence/kube-convergence-exporter/blob/main/"

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation dropped, spaces as dashes.
func githubAnchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			out[githubAnchor(strings.TrimLeft(l, "#"))] = true
		}
	}
	return out
}

// Every bundled alert has a runbook_url that resolves to a section of a
// file in docs/, and a dashboard_url that names a generated dashboard by
// its stable uid.
func TestEveryAlertLinksARunbookSectionAndADashboard(t *testing.T) {
	uids := map[string]bool{}
	for _, d := range dashboards.All() {
		uids[d.UID] = true
	}
	files, err := filepath.Glob("*.rules.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule files: %v", err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `yaml:"alert"`
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatal(err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				rb := r.Annotations["runbook_url"]
				doc, anchor, ok := strings.Cut(strings.TrimPrefix(rb, runbookPrefix), "#")
				if !strings.HasPrefix(rb, runbookPrefix+"docs/") || !ok {
					t.Errorf("%s: %s: runbook_url %q is not a section of a file in docs/", f, r.Alert, rb)
					continue
				}
				if !anchors(t, filepath.Join("..", doc))[anchor] {
					t.Errorf("%s: %s: runbook_url %q: %s has no section #%s", f, r.Alert, rb, doc, anchor)
				}
				du := r.Annotations["dashboard_url"]
				if uid, ok := strings.CutPrefix(du, "/d/"); !ok || !uids[uid] {
					t.Errorf("%s: %s: dashboard_url %q is not /d/<uid> of a generated dashboard", f, r.Alert, du)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d alerts found", n)
	}
}
