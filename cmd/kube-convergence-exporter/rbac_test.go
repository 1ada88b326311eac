package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rbac --config.file prints list/watch on the configured custom resources
// and the CRDs, and leaves out the resources of disabled collectors that no
// enabled collector reads; the default configuration needs no CRD rule.
func TestRBACCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kce.yaml")
	if err := os.WriteFile(path, []byte("collectors:\n  endpoints: {enabled: false}\nresources:\n  - {group: cert-manager.io, resource: certificates}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runMain([]string{"rbac", "--config.file", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"- cert-manager.io\n    resources:\n      - certificates\n", "- apiextensions.k8s.io\n    resources:\n      - customresourcedefinitions\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := runMain([]string{"rbac"}, &out, &errOut); code != 0 || strings.Contains(out.String(), "apiextensions") {
		t.Errorf("default configuration: exit %d, CRD rule present: %v", code, strings.Contains(out.String(), "apiextensions"))
	}
	if err := os.WriteFile(path, []byte("resources:\n  - {group: a.io, resource: bs, observedGeneration: '{.x'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := runMain([]string{"rbac", "--config.file", path}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), path+": line 2:") {
		t.Errorf("bad config: exit %d, stderr %q", code, errOut.String())
	}
}

// Admission probes add one Role per probed namespace with the verbs their
// operations need, and list/watch on webhook configurations (matching);
// webhooks.apiServerMetrics adds get on /metrics.
func TestRBACCommandAdmissionProbes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kce.yaml")
	doc := `webhooks: {apiServerMetrics: {enabled: true}}
admissionProbes:
  - {name: a, resource: configmaps, namespace: probes, operation: CREATE, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}}
  - {name: b, resource: deployments.apps, namespace: probes, operation: UPDATE, object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}}}
  - {name: c, resource: configmaps, namespace: other, operation: DELETE, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}}
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runMain([]string{"rbac", "--config.file", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"kind: Role\nmetadata:\n  name: kube-convergence-exporter-admission-probes\n  namespace: other\nrules:\n  - apiGroups:\n      - \"\"\n    resources:\n      - configmaps\n    verbs:\n      - delete\n",
		"  namespace: probes\nrules:\n  - apiGroups:\n      - \"\"\n    resources:\n      - configmaps\n    verbs:\n      - create\n  - apiGroups:\n      - apps\n    resources:\n      - deployments\n    verbs:\n      - get\n      - update\n",
		"      - mutatingwebhookconfigurations\n      - validatingwebhookconfigurations\n",
		"  name: kube-convergence-exporter-apiserver-metrics\nrules:\n  - nonResourceURLs:\n      - /metrics\n    verbs:\n      - get\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
