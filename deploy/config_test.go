package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// chartConfigValues is the chart's example of value config and
// rbac.extraRules (cert-manager Certificates); the chart's README shows it.
var chartConfigValues = filepath.Join(chartDir, "ci", "cert-manager-values.yaml")

// renderedConfig is the exporter's configuration file as a rendering
// mounts it.
type renderedConfig struct {
	path      string // --config.file
	configMap string // the ConfigMap it comes from
	content   []byte
}

// configFile returns the file --config.file names in the rendered
// Deployment, read from the rendered ConfigMap through the pod's volume;
// nil without --config.file. A broken chain (no volume, no ConfigMap, no
// key) fails the test.
func configFile(t *testing.T, objs []object) *renderedConfig {
	t.Helper()
	var d appsv1.Deployment
	decode(t, only(t, objs, "Deployment"), &d)
	c := d.Spec.Template.Spec.Containers[0]
	file := argFlags(c.Args)["config.file"]
	if file == "" {
		return nil
	}
	for _, m := range c.VolumeMounts {
		if filepath.Dir(file) != m.MountPath {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("--config.file=%s: mount %s is not read-only", file, m.Name)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			key := filepath.Base(file)
			for _, item := range v.ConfigMap.Items {
				if item.Path == filepath.Base(file) {
					key = item.Key
				}
			}
			for _, o := range byKind(objs, "ConfigMap") {
				var cm corev1.ConfigMap
				decode(t, o, &cm)
				if cm.Name != v.ConfigMap.Name {
					continue
				}
				content, ok := cm.Data[key]
				if !ok {
					t.Fatalf("--config.file=%s: ConfigMap %s has no key %s", file, cm.Name, key)
				}
				return &renderedConfig{path: file, configMap: cm.Name, content: []byte(content)}
			}
			t.Fatalf("--config.file=%s: the ConfigMap %s of volume %s is not in the rendering", file, v.ConfigMap.Name, v.Name)
		}
	}
	t.Fatalf("--config.file=%s is not on a mounted ConfigMap volume", file)
	return nil
}

// checkConfig asserts that a rendering with --config.file holds a
// configuration the exporter accepts, and a ClusterRole that grants list
// and watch on everything it makes the exporter read (the same as
// `kube-convergence-exporter rbac --config.file`, in process; TestConfig
// RBACFromBinary asks the binary).
func checkConfig(t *testing.T, objs []object) {
	t.Helper()
	rc := configFile(t, objs)
	if rc == nil {
		return
	}
	cfg, err := config.Parse(rc.content)
	if err != nil {
		t.Fatalf("ConfigMap %s: the exporter would refuse its config file: %v\n%s", rc.configMap, err, rc.content)
	}
	var role rbacv1.ClusterRole
	decode(t, only(t, objs, "ClusterRole"), &role)
	for _, r := range all.ResourcesOf(cfg) {
		for _, verb := range []string{"list", "watch"} {
			if !grants(role.Rules, r.Group, r.Resource, verb) {
				t.Errorf("ClusterRole %s does not grant %s on %s, which ConfigMap %s makes the exporter read", role.Name, verb, r, rc.configMap)
			}
		}
	}
}

// grants reports whether one of rules allows verb on group/resource.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// TestConfigRBACFromBinary runs the real binary on the configuration files
// the example overlay and the chart's example values render: `rbac
// --config.file` loads each as `serve` does (strictly, exit 1 naming the
// line of a typo) and prints the ClusterRole it needs, which the rendered
// ClusterRole must cover rule by rule. A typo in either example cannot
// ship.
func TestConfigRBACFromBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := buildExporter(t)
	for name, objs := range map[string][]object{
		"overlays/example":             kustomize(t, kustomizations()["overlays/example"]),
		"chart ci/cert-manager-values": helmTemplate(t, "kube-convergence-exporter", "monitoring", "-f", chartConfigValues),
	} {
		t.Run(name, func(t *testing.T) {
			rc := configFile(t, objs)
			if rc == nil {
				t.Fatal("no --config.file")
			}
			file := filepath.Join(t.TempDir(), filepath.Base(rc.path))
			if err := os.WriteFile(file, rc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := command(t.Context(), "", bin, "rbac", "--config.file", file)
			if err != nil {
				t.Fatalf("the exporter refuses the rendered %s: %v", rc.path, err)
			}
			printed, err := parseObjects(out)
			if err != nil || len(printed) != 1 {
				t.Fatalf("rbac output: %d objects, %v\n%s", len(printed), err, out)
			}
			var need rbacv1.ClusterRole
			decode(t, printed[0], &need)
			if !slices.ContainsFunc(need.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, "cert-manager.io") }) {
				t.Errorf("rbac --config.file names no cert-manager.io rule: the example tracks nothing?\n%s", out)
			}
			var have rbacv1.ClusterRole
			decode(t, only(t, objs, "ClusterRole"), &have)
			for _, r := range need.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							if !grants(have.Rules, g, res, v) {
								t.Errorf("rendered ClusterRole lacks %s on %s.%s, which `rbac --config.file` prints", v, res, g)
							}
						}
					}
				}
			}
		})
	}
}

// TestChartREADMEShowsConfigExample keeps the chart README's example of
// config and rbac.extraRules the file the tests render.
func TestChartREADMEShowsConfigExample(t *testing.T) {
	values, err := os.ReadFile(chartConfigValues)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The values without their leading comment.
	var body []string
	for _, l := range strings.SplitAfter(string(values), "\n") {
		if len(body) > 0 || !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	if !strings.Contains(string(readme), "```yaml\n"+strings.Join(body, "")+"```\n") {
		t.Errorf("the chart's README.md lacks a yaml block with the values of %s:\n%s", chartConfigValues, strings.Join(body, ""))
	}
}

// TestHelmConfigSchemaMatchesExporter keeps the schema of value config in
// step with the exporter's configuration file: the same top-level keys and
// the same keys of a resources entry as package config's yaml tags.
func TestHelmConfigSchemaMatchesExporter(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	type props struct {
		Properties map[string]struct {
			Items struct {
				Properties map[string]any `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	var schema struct {
		Properties map[string]props `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	cfgSchema := schema.Properties["config"]
	if got, want := sortedKeys(cfgSchema.Properties), yamlKeys(t, config.Config{}); !slices.Equal(got, want) {
		t.Errorf("values.schema.json config keys %v, the exporter's configuration file has %v", got, want)
	}
	if got, want := sortedKeys(cfgSchema.Properties["resources"].Items.Properties), yamlKeys(t, config.Resource{}); !slices.Equal(got, want) {
		t.Errorf("values.schema.json config.resources[] keys %v, the exporter's configuration file has %v", got, want)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// yamlKeys returns the keys a struct type decodes from: its yaml tags.
func yamlKeys(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if name == "-" || !typ.Field(i).IsExported() {
			continue
		}
		if name == "" || opts != "" {
			t.Fatalf("%s.%s: tag %q: this test reads plain yaml:\"key\" tags only", typ, typ.Field(i).Name, typ.Field(i).Tag)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
