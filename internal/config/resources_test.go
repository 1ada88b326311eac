package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
		{"unknown preset", "resources:\n- group: example.org\n  resource: buckets\n  preset: crossplane-manged\n",
			`line 4: resources[0].preset: unknown preset "crossplane-manged" (known: ` + presetNames() + `)`},
		{"Argo CD Application", "resources:\n- {group: argoproj.io, resource: applications}\n",
			`line 2: resources[0]: applications.argoproj.io: Argo CD Applications cannot be judged: their CRD has no status subresource`},
		{"zero stall threshold", "resources:\n- {group: a.io, resource: bs, stallThreshold: 0s}\n", `line 2: resources[0].stallThreshold: must be a positive duration such as "10m", got 0s`},
		{"operator too long", "resources:\n- group: a.io\n  resource: bs\n  operator: " + strings.Repeat("o", 64) + "\n",
			`line 4: resources[0].operator: at most 63 characters (it is a label value), got 64`},
		{"observedGenerationLag not a bool", "resources:\n- group: a.io\n  resource: bs\n  observedGenerationLag: sometimes\n",
			`line 4: cannot unmarshal !!str ` + "`sometimes`" + ` into bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
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

// A preset applies by group and resource, or by name; every key set in
// the file overrides the preset's.
func TestResourcesPresets(t *testing.T) {
	c, err := Parse([]byte(`
resources:
  - {group: helm.toolkit.fluxcd.io, resource: helmreleases}
  - {group: database.example.org, resource: postgresinstances, preset: crossplane-managed}
  - {group: monitoring.coreos.com, resource: prometheuses, conditions: [Available]}
  - {group: helm.toolkit.fluxcd.io, resource: helmcharts, preset: flux-helmrelease, observedGeneration: '{.status.seen}'}
  - {group: keda.sh, resource: scaledobjects, ready: ['{.status.hpaName}=keda-hpa-web']}
  - {group: example.com, resource: widgets}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		conditions, observed []string
	}{
		{[]string{"Ready"}, []string{"observedGeneration", "lastAttemptedGeneration"}},
		{[]string{"Synced", "Ready"}, []string{"observedGeneration"}},
		{[]string{"Available"}, []string{"observedGeneration"}}, // conditions set: the preset's Reconciled is not added
		{[]string{"Ready"}, nil},                            // observedGeneration set: the preset's fields are not read
		{nil, []string{"observedGeneration"}},               // ready replaces the preset's conditions
		{[]string{"Ready"}, []string{"observedGeneration"}}, // no preset
	} {
		r := c.Resources[i]
		if !reflect.DeepEqual(r.Conditions, want.conditions) || !reflect.DeepEqual(r.ObservedFields, want.observed) {
			t.Errorf("resources[%d] %s: conditions %v observed fields %v, want %v %v", i, r, r.Conditions, r.ObservedFields, want.conditions, want.observed)
		}
	}
}

// Every preset has a kebab-case name, a source read, and conditions;
// those chosen by group and resource are unique.
func TestPresetsWellFormed(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]string{}
	for _, p := range Presets {
		if !kebab.MatchString(p.Name) || p.Source == "" || len(p.Conditions) == 0 {
			t.Errorf("preset %+v: want a kebab-case name, a source and conditions", p)
		}
		if p.Group == "" {
			continue
		}
		key := p.Resource + "." + p.Group
		if other, dup := seen[key]; dup {
			t.Errorf("presets %s and %s both select %s", other, p.Name, key)
		}
		seen[key] = p.Name
	}
}

// docs/resources.md lists every preset in its table, and every refused
// resource: the names are public.
func TestPresetsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "resources.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Presets {
		row := "| `" + p.Name + "` | "
		if p.Group != "" {
			row += "`" + p.Group + "/" + p.Resource + "` |"
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/resources.md has no row %q", row)
		}
	}
	for _, r := range Refused {
		if !strings.Contains(string(doc), "| `"+r.Group+"/"+r.Resource+"` | [refused]") {
			t.Errorf("docs/resources.md does not list %s/%s as refused", r.Group, r.Resource)
		}
	}
}
