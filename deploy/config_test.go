package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
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
	d := workload(t, objs)
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
// and watch on everything it makes the exporter read, and the Roles its
// admission probes need (the same as `kube-convergence-exporter rbac
// --config.file`, in process; TestConfigRBACFromBinary and
// TestHelmProbeRoles ask the binary).
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
	checkProbeRoles(t, objs, cfg)
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

// TestChartREADMEShowsConfigExample keeps the chart README's examples of
// config and rbac.extraRules, and of config.admissionProbes, the files the
// tests render.
func TestChartREADMEShowsConfigExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{chartConfigValues, chartProbeValues} {
		values, err := os.ReadFile(file)
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
			t.Errorf("the chart's README.md lacks a yaml block with the values of %s:\n%s", file, strings.Join(body, ""))
		}
	}
}

// TestHelmConfigSchemaMatchesExporter keeps the schema of value config in
// step with the exporter's configuration file: the same top-level keys and
// the same keys of a resources and an admissionProbes entry as package
// config's yaml tags.
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
	if got, want := sortedKeys(cfgSchema.Properties["admissionProbes"].Items.Properties), yamlKeys(t, config.AdmissionProbe{}); !slices.Equal(got, want) {
		t.Errorf("values.schema.json config.admissionProbes[] keys %v, the exporter's configuration file has %v", got, want)
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

// TestExampleOverlayConfigRuns runs the real exporter as the example
// overlay's ServiceAccount, bound to the overlay's rendered ClusterRole
// (applied for real, under a name of this test's own), with the rendered
// config.yaml and the Deployment's other arguments, against the sandbox:
// without cert-manager it is ready with certificates.cert-manager.io
// crd_missing and nothing forbidden; once a CRD of that name is
// established it tracks the resource, so the overlay's rules suffice to
// list and watch it.
func TestExampleOverlayConfigRuns(t *testing.T) {
	if sb == nil {
		t.Skip("needs the sandbox; skipped with -short")
	}
	const namespace, roleName = "monitoring", "kce-deploy-example-config"
	k := kustomizations()["overlays/example"]
	objs := kustomize(t, k)
	rc := configFile(t, objs)
	if rc == nil {
		t.Fatal("the example overlay passes no --config.file")
	}
	kubectl := tool(t, "kubectl")
	admin := "--kubeconfig=" + sb.Kubeconfig("")
	dir := t.TempDir()

	// The ServiceAccount, ClusterRole and binding as rendered; the role
	// and binding renamed, so that no other test's apply replaces them.
	docs := []string{`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + namespace + `"}}`}
	var sa string
	for _, o := range objs {
		switch o.kind() {
		case "ServiceAccount":
			sa = o.name()
		case "ClusterRole":
			o.meta()["name"] = roleName
		case "ClusterRoleBinding":
			o.meta()["name"] = roleName
			o["roleRef"].(map[string]any)["name"] = roleName
		default:
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	rbacFile := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(rbacFile, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := command(t.Context(), "", kubectl, admin, "apply", "-f", rbacFile); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = command(context.Background(), "", kubectl, admin, "delete", "--ignore-not-found", "clusterrolebinding/"+roleName, "clusterrole/"+roleName)
	})
	token, err := command(t.Context(), "", kubectl, admin, "-n", namespace, "create", "token", sa, "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "sa.kubeconfig")
	adminConfig, err := os.ReadFile(sb.Kubeconfig(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, adminConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"config", "set-credentials", "exporter", "--token=" + strings.TrimSpace(string(token))},
		{"config", "set-context", "--current", "--user=exporter"},
	} {
		if out, err := command(t.Context(), "", kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if out, err := command(t.Context(), "", kubectl, "--kubeconfig="+kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); err != nil || string(out) != "system:serviceaccount:"+namespace+":"+sa {
		t.Fatalf("the exporter's kubeconfig authenticates as %q (%v), want the overlay's service account", out, err)
	}

	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, rc.content, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	probe := "127.0.0.1:" + strconv.Itoa(port)
	if port, err = sandbox.FreePort(); err != nil {
		t.Fatal(err)
	}
	mainAddr := "127.0.0.1:" + strconv.Itoa(port)
	var d appsv1.Deployment
	decode(t, only(t, objs, "Deployment"), &d)
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		switch name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); name {
		case "web.listen-address":
			a = "--web.listen-address=127.0.0.1:" + strconv.Itoa(port)
		case "web.probe-address":
			a = "--web.probe-address=" + probe
		case "config.file":
			a = "--config.file=" + cfgFile
		case "web.config.file":
			continue // TLS and basic auth: TestWebConfigProbes
		}
		args = append(args, a)
	}
	logs := runExporter(t, buildExporter(t), append(args, "--kubeconfig="+kubeconfig))

	readyz := func(want string) string {
		t.Helper()
		client := &http.Client{Timeout: 5 * time.Second}
		deadline := time.Now().Add(60 * time.Second)
		var last string
		for {
			// The main listener's /readyz names each resource's state; the
			// probe listener's says the verdict only.
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+mainAddr+"/readyz", nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := client.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
				if resp.StatusCode == http.StatusOK && strings.Contains(string(b), want) {
					return string(b)
				}
				if strings.Contains(string(b), "forbidden") {
					t.Fatalf("/readyz under the overlay's ClusterRole names something forbidden:\n%s", b)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: no 200 with %q after 60s, last: %s\nexporter log:\n%s", want, last, logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	readyz("resource certificates.cert-manager.io: crd_missing")

	// A CRD of cert-manager's name (the smallest that is served with a
	// status subresource): tracked without a restart, with the overlay's rules.
	crd := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(crd, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Certificate, plural: certificates, singular: certificate, listKind: CertificateList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := command(t.Context(), "", kubectl, admin, "apply", "-f", crd); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = command(context.Background(), "", kubectl, admin, "delete", "--ignore-not-found", "-f", crd)
	})
	established := time.Now()
	readyz("resource certificates.cert-manager.io: tracking, synced")
	t.Logf("certificates.cert-manager.io tracking and synced %v after the CRD was applied", time.Since(established).Round(10*time.Millisecond))
	if strings.Contains(logs(), "forbidden") {
		t.Errorf("forbidden under the overlay's ClusterRole; exporter log:\n%s", logs())
	}
}
