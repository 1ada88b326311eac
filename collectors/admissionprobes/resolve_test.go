package admissionprobes

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// resolve sends at the inline object's version, not the group's preferred
// one, and only when the API server serves the resource there, namespaced.
func TestResolveAtTheObjectsVersion(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true}, {Name: "nodes"}}},
		// apps/v1 is the preferred version; the probe's object says v1beta9.
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true}}},
		{GroupVersion: "apps/v1beta9", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true}}},
	}}}
	probe := func(resource, apiVersion string) config.AdmissionProbe {
		return config.AdmissionProbe{Name: "p", Resource: resource, Namespace: "probes", Operation: config.OperationCreate,
			Object: map[string]any{"apiVersion": apiVersion, "kind": "X", "metadata": map[string]any{"name": "p"}}}
	}
	for _, tc := range []struct {
		resource, apiVersion string
		want                 schema.GroupVersionResource
		err                  string
	}{
		{"deployments.apps", "apps/v1beta9", schema.GroupVersionResource{Group: "apps", Version: "v1beta9", Resource: "deployments"}, ""},
		{"deployments.apps", "apps/v1", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ""},
		{"configmaps", "v1", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ""},
		{"deployments.apps", "apps/v2", schema.GroupVersionResource{}, "discovery of apps/v2"},
		{"statefulsets.apps", "apps/v1", schema.GroupVersionResource{}, "resource statefulsets.apps is not served at apps/v1"},
		{"nodes", "v1", schema.GroupVersionResource{}, "nodes is cluster-scoped"},
	} {
		got, err := resolve(d, probe(tc.resource, tc.apiVersion))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("resolve(%s at %s) = %v, %v; want %v, %q", tc.resource, tc.apiVersion, got, err, tc.want, tc.err)
		}
	}
}
