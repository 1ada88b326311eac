package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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

	// The namespace is the installer's to create (nothing renders one):
	// create it for real, idempotently.
	ns := filepath.Join(dir, "namespace.json")
	if err := os.WriteFile(ns, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+namespace+`"}}`), 0o600); err != nil {
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
