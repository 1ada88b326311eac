package admission

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// The matchConditions of the Kubernetes documentation's example
// (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#matching-requests-matchconditions,
// v1.37) are read, and decide what they decide in CEL; anything else is
// unanalysed.
func TestConditions(t *testing.T) {
	docs := []admissionv1.MatchCondition{
		{Name: "exclude-leases", Expression: `!(request.resource.group == "coordination.k8s.io" && request.resource.resource == "leases")`},
		{Name: "exclude-kubelet-requests", Expression: `!("system:nodes" in request.userInfo.groups)`},
		{Name: "rbac", Expression: `request.resource.group != "rbac.authorization.k8s.io"`},
	}
	kubelet := []string{"system:nodes", "system:authenticated"}
	for _, tc := range []struct {
		name  string
		conds []admissionv1.MatchCondition
		call  Call
		want  bool
	}{
		{"docs: a lease", docs, Call{Group: "coordination.k8s.io", Resource: "leases"}, false},
		{"docs: a lease of another group", docs, Call{Group: "example.com", Resource: "leases"}, true},
		{"docs: a pod by the kubelet", docs, Call{Resource: "pods", UserGroups: kubelet}, false},
		{"docs: a pod by someone", docs, Call{Resource: "pods", UserGroups: []string{"system:authenticated"}}, true},
		{"docs: a role", docs, Call{Group: "rbac.authorization.k8s.io", Resource: "roles"}, false},
		{"docs: any resource of a wildcard", docs, Call{Group: "coordination.k8s.io"}, true},
		{"namespace excluded", mc(`request.namespace != 'kube-system'`), Call{Namespace: "kube-system"}, false},
		{"namespace excluded, other", mc(`request.namespace != 'kube-system'`), Call{Namespace: "team"}, true},
		{"namespace list", mc(`!(request.namespace in ['kube-system', "kube-node-lease"])`), Call{Namespace: "kube-node-lease"}, false},
		{"reversed", mc(`'kube-system' != request.namespace`), Call{Namespace: "kube-system"}, false},
		{"negated equality", mc(`!(request.namespace == 'kube-system')`), Call{Namespace: "kube-system"}, false},
		{"inclusion", mc(`request.namespace in ['a', 'b']`), Call{Namespace: "kube-system"}, false},
		{"inclusion, in", mc(`request.namespace == 'a'`), Call{Namespace: "a"}, true},
		{"conjunction", mc(`request.namespace != 'x' && request.kind.kind != 'Lease'`), Call{Namespace: "y", Kind: "Lease"}, false},
		{"inclusions intersect", mc(`request.namespace in ['a', 'b'] && request.namespace in ['b']`), Call{Namespace: "a"}, false},
		{"group required", mc(`'system:masters' in request.userInfo.groups`), Call{UserGroups: kubelet}, false},
	} {
		w := Webhook{MatchConditions: tc.conds}
		c := w.Conditions()
		if !c.Analysed() {
			t.Errorf("%s: unanalysed %v", tc.name, c.Unanalysed)
			continue
		}
		if got := c.Admits(tc.call); got != tc.want {
			t.Errorf("%s: Admits(%+v) = %v, want %v", tc.name, tc.call, got, tc.want)
		}
	}
	for _, expr := range []string{
		`request.namespace != 'a' || request.namespace != 'b'`,
		`object.metadata.labels['x'] == 'y'`,
		`!(request.namespace != 'a' && request.namespace == 'b')`,
		`request.namespace.startsWith('kube-')`,
		`request.namespace != 'a\'b'`,
		`(request.namespace != 'a'`,
		`has(object.spec)`,
		``,
		strings.Repeat(`request.namespace != 'a' && `, 400) + `true`,
	} {
		if c := (Webhook{MatchConditions: mc(expr)}).Conditions(); c.Analysed() {
			t.Errorf("%.60q: analysed", expr)
		}
	}
}

func mc(expr string) []admissionv1.MatchCondition {
	return []admissionv1.MatchCondition{{Name: "c", Expression: expr}}
}
