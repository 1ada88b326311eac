package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResourcesErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"bad JSONPath", "resources:\n  - group: cert-manager.io\n    resource: certificates\n    observedGeneration: '{.status.observedGeneration'\n",
			`line 4: resources[0].observedGeneration: JSONPath "{.status.observedGeneration": unclosed action`},
		{"path without braces", "resources:\n- {group: a.io, resource: bs, observedGeneration: .status.x}\n",
			`line 2: resources[0].observedGeneration: want a JSONPath in braces such as '{.status.observedGeneration}', got ".status.x"`},
		{"bad ready expression", "resources:\n- group: a.io\n  resource: bs\n  ready: ['{.status.phase}']\n",
			`line 4: resources[0].ready[0]: want '{path}=value' such as '{.status.phase}=Ready', got "{.status.phase}"`},
		{"built-in resource", "resources:\n- group: apps\n  resource: deployments\n",
			`line 2: resources[0]: "apps" is a built-in API group, not a custom resource's (a CRD's group has at least one dot); built-in workloads are tracked by the rollouts collector`},
		{"core group", "resources:\n- resource: pods\n",
			`line 2: resources[0]: group is required (core resources have no CRD; Deployments, StatefulSets and DaemonSets are tracked by the rollouts collector)`},
		{"duplicate", "resources:\n- {group: cert-manager.io, resource: certificates}\n- group: cert-manager.io\n  resource: certificates\n  version: v1\n",
			`line 3: resources[1]: certificates.cert-manager.io is already configured at line 2`},
		{"conditions and ready", "resources:\n- group: a.io\n  resource: bs\n  conditions: [Ready]\n  ready: ['{.status.phase}=Ready']\n",
			`line 4: resources[0]: conditions and ready are exclusive (ready replaces conditions)`},
		{"unknown key", "resources:\n- group: a.io\n  resource: bs\n  condition: [Ready]\n", `line 4: unknown key "condition"`},
		{"zero stall threshold", "resources:\n- {group: a.io, resource: bs, stallThreshold: 0s}\n", `line 2: resources[0].stallThreshold: must be a positive duration such as "10m", got 0s`},
		{"operator too long", "resources:\n- group: a.io\n  resource: bs\n  operator: " + strings.Repeat("o", 64) + "\n",
			`line 4: resources[0].operator: at most 63 characters (it is a label value), got 64`},
		{"observedGenerationLag not a bool", "resources:\n- group: a.io\n  resource: bs\n  observedGenerationLag: sometimes\n",
			`line 4: cannot unmarshal !!str ` + "`sometimes`" + ` into bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestResourcesDefaults(t *testing.T) {
	c, err := Parse([]byte(`
stall: {threshold: 2m}
resources:
  - group: cert-manager.io
    resource: certificates
  - group: example.io
    resource: widgets
    version: v1beta1
    ready: ['{.status.phase}=Ready', '{.status.ok}=true']
    observedGeneration: '{.status.lastObserved}'
    stallThreshold: 10m
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Resources[0].Conditions; !reflect.DeepEqual(got, []string{"Ready"}) {
		t.Errorf("default conditions = %v, want [Ready]", got)
	}
	r := c.Resources[1]
	if len(r.Conditions) != 0 || !reflect.DeepEqual(r.ReadyExprs, []ReadyExpr{{"{.status.phase}", "Ready"}, {"{.status.ok}", "true"}}) {
		t.Errorf("ready = %+v, conditions %v", r.ReadyExprs, r.Conditions)
	}
	if got := c.ResourceStallThreshold(c.Resources[0], time.Minute); got != 2*time.Minute {
		t.Errorf("stall threshold without override = %v, want stall.threshold 2m", got)
	}
	if got := c.ResourceStallThreshold(r, time.Minute); got != 10*time.Minute {
		t.Errorf("stall threshold = %v, want 10m", got)
	}
}

// The process exits at start naming the file and the line.
func TestResourcesLoadNamesFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kce.yaml")
	if err := os.WriteFile(path, []byte("resources:\n- group: a.io\n  resource: bs\n  observedGeneration: '{.status[}'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), "config file "+path+": line 4: resources[0].observedGeneration: JSONPath") {
		t.Fatalf("Load error = %v", err)
	}
}
