package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dryRun sends every built-in object of a rendering to the sandbox's API
// server with `kubectl apply --dry-run=server`: defaulting, validation and
// admission run, nothing is stored. The prometheus-operator kinds are left
// out (the sandbox has no such CRDs); they are decoded strictly into the
// operator's Go types instead (checkRendered).
func dryRun(t *testing.T, objs []object, namespace string) {
	t.Helper()
	if sb == nil {
		t.Skip("server-side dry run needs the sandbox; skipped with -short")
	}
	kubectl := tool(t, "kubectl")
	kubeconfig := "--kubeconfig=" + sb.Kubeconfig("")
	dir := t.TempDir()

	// The namespace is the installer's to create (nothing renders one),
	// and so are those the admission probes write to: create them for
	// real, idempotently.
	names := []string{namespace}
	for _, o := range objs {
		if n := o.namespace(); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var nsDocs []string
	for _, n := range names {
		nsDocs = append(nsDocs, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+n+`"}}`)
	}
	ns := filepath.Join(dir, "namespaces.yaml")
	if err := os.WriteFile(ns, []byte(strings.Join(nsDocs, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := command(t.Context(), "", kubectl, kubeconfig, "apply", "-f", ns); err != nil {
		t.Fatal(err)
	}

	var docs []string
	var ids []string
	for _, o := range objs {
		if !o.builtIn() {
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
		ids = append(ids, o.id())
	}
	file := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := command(t.Context(), "", kubectl, kubeconfig, "apply", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatalf("server-side dry run of %v: %v", ids, err)
	}
	if n := strings.Count(string(out), "(server dry run)"); n != len(ids) {
		t.Errorf("server-side dry run accepted %d of %d objects %v:\n%s", n, len(ids), ids, out)
	}
}

// TestApplyWithoutCRDs pins what the README says about a cluster without
// the prometheus-operator CRDs: `kubectl apply -k` of an overlay with the
// prometheus-operator component applies the other objects, then fails
// naming the missing kinds.
func TestApplyWithoutCRDs(t *testing.T) {
	if sb == nil {
		t.Skip("needs the sandbox; skipped with -short")
	}
	const namespace = "no-crds"
	k := kustomization{namespace: namespace, components: []string{"prometheus-operator", "grafana-dashboards"}}
	objs := kustomize(t, k)
	dir := t.TempDir()
	docs := []string{`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + namespace + `"}}`}
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	file := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := tool(t, "kubectl")
	kubeconfig := "--kubeconfig=" + sb.Kubeconfig("")
	out, err := command(t.Context(), "", kubectl, kubeconfig, "apply", "-f", file)
	if err == nil {
		t.Fatalf("apply without the CRDs succeeded:\n%s", out)
	}
	t.Logf("kubectl apply without the CRDs: %v", err)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if want := `no matches for kind "` + kind + `" in version "monitoring.coreos.com/v1"`; !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %s: %v", want, err)
		}
	}
	// The built-in objects were applied nevertheless.
	got, err := command(t.Context(), "", kubectl, kubeconfig, "-n", namespace, "get", "deployment,service,serviceaccount,configmap", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deployment.apps/kube-convergence-exporter", "service/kube-convergence-exporter", "configmap/kube-convergence-exporter-dashboards"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("%s not applied; the namespace holds:\n%s", want, got)
		}
	}
}
