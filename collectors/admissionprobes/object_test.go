package admissionprobes

import (
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// A Deployment manifest from the YAML file, integers included, becomes an
// API object in the probe's namespace (YAML gives int, unstructured
// objects hold int64).
func TestObjectFromConfig(t *testing.T) {
	c, err := config.Parse([]byte(`admissionProbes:
  - name: d
    resource: deployments.apps
    namespace: probes
    operation: CREATE
    object:
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, labels: {app: web}}
      spec:
        replicas: 2
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec: {containers: [{name: c, image: nginx, ports: [{containerPort: 8080}]}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Object(c.AdmissionProbes[0])
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetNamespace() != "probes" || obj.GetName() != "web" || obj.GetKind() != "Deployment" {
		t.Errorf("object %s/%s kind %s", obj.GetNamespace(), obj.GetName(), obj.GetKind())
	}
	if r, ok := obj.Object["spec"].(map[string]any)["replicas"].(int64); !ok || r != 2 {
		t.Errorf("replicas %#v, want int64 2", obj.Object["spec"].(map[string]any)["replicas"])
	}
	// A deep copy (what the client does before sending) must not panic.
	_ = obj.DeepCopy()
}
