package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/gen/manifests"
)

// chartProbeValues is the chart's example of config.admissionProbes; the
// chart's README shows it.
var chartProbeValues = filepath.Join(chartDir, "ci", "admission-probes-values.yaml")

// probeVerbs are the verbs a probe's dry-run request needs by operation
// (RBAC authorizes a dry-run like the write; UPDATE reads the object
// first): the truth the renderings are checked against, written out here
// rather than taken from the code under test.
var probeVerbs = map[string][]string{
	config.OperationCreate: {"create"},
	config.OperationUpdate: {"get", "update"},
	config.OperationDelete: {"delete"},
}

// probeNamespaces returns the namespaces the admission probes of a
// rendering's configuration file write to (none without a file or probes).
func probeNamespaces(t *testing.T, objs []object) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	rc := configFile(t, objs)
	if rc == nil {
		return out
	}
	cfg, err := config.Parse(rc.content)
	if err != nil {
		return out // checkConfig reports it
	}
	for _, p := range cfg.AdmissionProbes {
		out[p.Namespace] = true
	}
	return out
}

// rolesByNamespace returns the rules of the Roles among objs by namespace;
// two Roles in one namespace fail the test.
func rolesByNamespace(t *testing.T, objs []object) map[string][]rbacv1.PolicyRule {
	t.Helper()
	out := map[string][]rbacv1.PolicyRule{}
	for _, o := range byKind(objs, "Role") {
		var r rbacv1.Role
		decode(t, o, &r)
		if _, dup := out[r.Namespace]; dup {
			t.Errorf("two Roles in namespace %q", r.Namespace)
		}
		out[r.Namespace] = r.Rules
	}
	return out
}

// checkRoleBindings asserts that every Role of a rendering holds only the
// probes' write verbs on named resources and is bound, in its namespace,
// to the rendering's ServiceAccount and nothing else.
func checkRoleBindings(t *testing.T, objs []object, sa, namespace string) {
	t.Helper()
	roles := map[string]bool{} // namespace/name
	for _, o := range byKind(objs, "Role") {
		var r rbacv1.Role
		decode(t, o, &r)
		roles[r.Namespace+"/"+r.Name] = true
		for _, rule := range r.Rules {
			for _, v := range rule.Verbs {
				if !slices.Contains([]string{"create", "get", "update", "delete"}, v) {
					t.Errorf("Role %s/%s rule %v grants %q: the probes only create, get, update and delete", r.Namespace, r.Name, rule, v)
				}
			}
			if slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") || len(rule.Resources) == 0 {
				t.Errorf("Role %s/%s rule %v: want named resources in named groups", r.Namespace, r.Name, rule)
			}
		}
	}
	bound := map[string]bool{}
	for _, o := range byKind(objs, "RoleBinding") {
		var b rbacv1.RoleBinding
		decode(t, o, &b)
		ref := b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind != "Role" || b.RoleRef.APIGroup != rbacv1.GroupName || !roles[ref] {
			t.Errorf("RoleBinding %s/%s: roleRef %+v is not a Role of the rendering in its namespace", b.Namespace, b.Name, b.RoleRef)
		}
		if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: namespace}}; !slices.Equal(b.Subjects, want) {
			t.Errorf("RoleBinding %s/%s subjects %+v, want %+v", b.Namespace, b.Name, b.Subjects, want)
		}
		bound[ref] = true
	}
	for r := range roles {
		if !bound[r] {
			t.Errorf("Role %s: no RoleBinding of the rendering binds it", r)
		}
	}
}

// checkProbeRoles asserts that a rendering with a configuration file has
// exactly the Roles its admission probes need: per namespace, the rules
// `kube-convergence-exporter rbac --config.file` prints (in process here;
// TestHelmProbeRoles asks the binary), and no Role without probes.
func checkProbeRoles(t *testing.T, objs []object, cfg *config.Config) {
	t.Helper()
	got := rolesByNamespace(t, objs)
	out, err := manifests.ProbeRoles(cfg.AdmissionProbes)
	if err != nil {
		t.Fatal(err)
	}
	printed, err := parseObjects(out)
	if err != nil {
		t.Fatalf("ProbeRoles output: %v\n%s", err, out)
	}
	want := rolesByNamespace(t, printed)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the rendering's Roles by namespace\n%+v\nwant what rbac --config.file prints for its %d admission probes\n%+v", got, len(cfg.AdmissionProbes), want)
	}
}

// TestHelmProbeRoles renders the chart with the admission probes of
// ci/admission-probes-values.yaml, feeds the rendered config.yaml to the
// real binary's `rbac --config.file` and requires the chart's Roles to be
// the ones it prints, namespace by namespace and rule by rule, and both
// to be the verbs each operation needs. The rendering must pass a
// server-side dry run, and once applied the sandbox's API server must
// authorize the ServiceAccount for each probe's verbs and for nothing next
// to them (the 403 the probes got before the chart had these Roles).
func TestHelmProbeRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	const release, namespace = "kce", "monitoring"
	objs := helmTemplate(t, release, namespace, "-f", chartProbeValues)
	checkRendered(t, objs, namespace)
	rc := configFile(t, objs)
	if rc == nil {
		t.Fatal("config.admissionProbes set, but no --config.file")
	}
	file := filepath.Join(t.TempDir(), filepath.Base(rc.path))
	if err := os.WriteFile(file, rc.content, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := command(t.Context(), "", buildExporter(t), "rbac", "--config.file", file)
	if err != nil {
		t.Fatalf("the exporter refuses the rendered %s: %v", rc.path, err)
	}
	printed, err := parseObjects(out)
	if err != nil {
		t.Fatalf("rbac output: %v\n%s", err, out)
	}
	fromBinary := rolesByNamespace(t, printed)
	fromChart := rolesByNamespace(t, objs)

	// The truth, from the probes of the values file and the verbs table:
	// per namespace, group and resource, the union of the operations' verbs.
	cfg, err := config.Parse(rc.content)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ ns, group, resource string }
	verbs := map[key][]string{}
	for _, p := range cfg.AdmissionProbes {
		resource, group, _ := strings.Cut(p.Resource, ".") // configmaps, deployments.apps
		k := key{p.Namespace, group, resource}
		for _, v := range probeVerbs[p.Operation] {
			if !slices.Contains(verbs[k], v) {
				verbs[k] = append(verbs[k], v)
			}
		}
	}
	if len(verbs) != 3 {
		t.Fatalf("%s: %d (namespace, resource) pairs, want the 3 the example is made of: %v", chartProbeValues, len(verbs), verbs)
	}
	for name, roles := range map[string]map[string][]rbacv1.PolicyRule{"the chart": fromChart, "rbac --config.file": fromBinary} {
		granted := map[key][]string{}
		for ns, rules := range roles {
			for _, r := range rules {
				if len(r.APIGroups) != 1 || len(r.Resources) != 1 {
					t.Errorf("%s: Role in %s: rule %+v, want one group and resource per rule", name, ns, r)
					continue
				}
				k := key{ns, r.APIGroups[0], r.Resources[0]}
				granted[k] = append(granted[k], r.Verbs...)
			}
		}
		for k := range granted {
			slices.Sort(granted[k])
		}
		want := map[key][]string{}
		for k, v := range verbs {
			want[k] = slices.Sorted(slices.Values(v))
		}
		if !reflect.DeepEqual(granted, want) {
			t.Errorf("%s grants %v, the probes need %v", name, granted, want)
		}
	}
	if !reflect.DeepEqual(fromChart, fromBinary) {
		t.Errorf("the chart's Roles by namespace\n%+v\ndiffer from what rbac --config.file prints\n%+v", fromChart, fromBinary)
	}
	// One Role per probed namespace, named after the release.
	for _, o := range byKind(objs, "Role") {
		if want := release + "-kube-convergence-exporter-admission-probes"; o.name() != want {
			t.Errorf("Role %s/%s, want the name %s", o.namespace(), o.name(), want)
		}
	}
	t.Logf("Roles: chart %d, rbac --config.file %d; %d probes in %d namespaces", len(fromChart), len(fromBinary), len(cfg.AdmissionProbes), len(probeNamespaces(t, objs)))

	dryRun(t, objs, namespace)

	// Applied for real (the ServiceAccount, Roles and RoleBindings), the
	// API server's own authorizer answers for the ServiceAccount.
	kubectl := tool(t, "kubectl")
	admin := "--kubeconfig=" + sb.Kubeconfig("")
	var docs []string
	for _, o := range objs {
		if k := o.kind(); k == "ServiceAccount" || k == "Role" || k == "RoleBinding" {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
	}
	rbacFile := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(rbacFile, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := command(t.Context(), "", kubectl, admin, "apply", "-f", rbacFile); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = command(context.Background(), "", kubectl, admin, "delete", "--ignore-not-found", "-f", rbacFile)
	})
	user := "system:serviceaccount:" + namespace + ":" + release + "-kube-convergence-exporter"
	for _, c := range []struct {
		verb, resource, ns string
		want               bool
	}{
		{"create", "configmaps", "monitoring", true},
		{"create", "configmaps", "shop", false},
		{"update", "configmaps", "monitoring", false},
		{"get", "configmaps", "shop", true},
		{"update", "configmaps", "shop", true},
		{"delete", "configmaps", "shop", true},
		{"get", "deployments.apps", "shop", true},
		{"update", "deployments.apps", "shop", true},
		{"create", "deployments.apps", "shop", false},
		{"delete", "deployments.apps", "shop", false},
		{"update", "deployments.apps", "monitoring", false},
	} {
		out, err := command(t.Context(), "", kubectl, admin, "auth", "can-i", c.verb, c.resource, "-n", c.ns, "--as", user)
		answer := strings.TrimSpace(string(out))
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || answer != "no") {
			t.Fatalf("kubectl auth can-i %s %s -n %s: %v", c.verb, c.resource, c.ns, err)
		}
		if (answer == "yes") != c.want {
			t.Errorf("%s may %s %s in %s: %q, want %v", user, c.verb, c.resource, c.ns, answer, c.want)
		}
	}
}
