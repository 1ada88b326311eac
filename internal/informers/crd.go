package informers

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/version"
)

// CRD is what a CustomResourceDefinition says about its resource, as
// compactCRD keeps it.
type CRD struct {
	Group, Plural, Kind string
	Established         bool
	Versions            map[string]CRDVersion
}

// CRDVersion is one version of a CRD.
type CRDVersion struct{ Served, Status bool }

// ReadCRD reads a CustomResourceDefinition.
func ReadCRD(u *unstructured.Unstructured) CRD {
	var c CRD
	c.Group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.Plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	c.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "names", "kind")
	c.Versions = map[string]CRDVersion{}
	vs, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range vs {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		status, _ := m["statusSubresource"].(bool)
		c.Versions[name] = CRDVersion{served, status}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cd := range conds {
		if m, _ := cd.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			c.Established = true
		}
	}
	return c
}

// Preferred is the served version discovery prefers: the highest by
// Kubernetes version ordering (v1 > v1beta2 > v1beta1 > v1alpha1), as the
// apiextensions apiserver sorts a CRD's versions for discovery; "" when
// none is served.
func (c CRD) Preferred() string {
	var served []string
	for v, cv := range c.Versions {
		if cv.Served {
			served = append(served, v)
		}
	}
	sort.Slice(served, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0 })
	if len(served) == 0 {
		return ""
	}
	return served[0]
}
