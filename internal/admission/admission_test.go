package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

func TestRulesMatch(t *testing.T) {
	cm := Request{Operation: admissionv1.Create, Version: "v1", Resource: "configmaps", Namespaced: true}
	status := Request{Operation: admissionv1.Update, Version: "v1", Resource: "pods", Subresource: "status", Namespaced: true}
	pod := Request{Operation: admissionv1.Create, Version: "v1", Resource: "pods", Namespaced: true}
	node := Request{Operation: admissionv1.Create, Version: "v1", Resource: "nodes"}
	rule := func(ops string, groups, res []string) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.OperationType(ops)},
			Rule: admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: res}}}
	}
	scoped := func(scope admissionv1.ScopeType) []admissionv1.RuleWithOperations {
		r := rule("*", []string{"*"}, []string{"*"})
		r[0].Scope = &scope
		return r
	}
	for _, tc := range []struct {
		rules []admissionv1.RuleWithOperations
		req   Request
		want  bool
	}{
		{rule("CREATE", []string{""}, []string{"configmaps"}), cm, true},
		{rule("UPDATE", []string{""}, []string{"configmaps"}), cm, false},
		{rule("*", []string{"apps"}, []string{"configmaps"}), cm, false},
		{rule("*", []string{"*"}, []string{"*"}), cm, true},
		{rule("*", []string{"*"}, []string{"*"}), status, false},
		{rule("*", []string{"*"}, []string{"*/*"}), status, true},
		{rule("*", []string{""}, []string{"pods/*"}), status, true},
		{rule("*", []string{""}, []string{"*/status"}), status, true},
		{rule("*", []string{""}, []string{"pods"}), status, false},
		// "pods/*" is pods and all its subresources: the API server's "*"
		// subresource matches the empty one too.
		{rule("*", []string{""}, []string{"pods/*"}), pod, true},
		{rule("*", []string{""}, []string{"pods/*"}), cm, false},
		{rule("*", []string{"*"}, []string{"*/*"}), cm, true},
		{rule("*", []string{""}, []string{"*/status"}), pod, false},
		{scoped(admissionv1.NamespacedScope), pod, true},
		{scoped(admissionv1.NamespacedScope), node, false},
		{scoped(admissionv1.ClusterScope), node, true},
		{scoped(admissionv1.ClusterScope), pod, false},
		{scoped(admissionv1.AllScopes), node, true},
		{scoped(admissionv1.AllScopes), pod, true},
	} {
		if got := RulesMatch(tc.rules, tc.req); got != tc.want {
			t.Errorf("RulesMatch(%v, %+v) = %v, want %v", tc.rules[0], tc.req, got, tc.want)
		}
	}
}

// Under matchPolicy Equivalent the API server also calls a webhook whose
// rules name the same resource in another group or version: a possible
// match. Exact is exact.
func TestMatchesEquivalent(t *testing.T) {
	req := Request{Operation: admissionv1.Create, Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}
	w := Webhook{Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{"extensions"}, APIVersions: []string{"v1beta1"}, Resources: []string{"deployments"}}}}}
	for _, tc := range []struct {
		policy   admissionv1.MatchPolicyType
		resource string
		want     bool
	}{
		{admissionv1.Equivalent, "deployments", true},
		{admissionv1.Exact, "deployments", false},
		{admissionv1.Equivalent, "replicasets", false},
	} {
		w.Rules[0].Resources = []string{"deployments"}
		w.MatchPolicy = string(tc.policy)
		r := req
		r.Resource = tc.resource
		if got := w.Matches(r, nil, nil); got != tc.want {
			t.Errorf("%s webhook on extensions/v1beta1 deployments, request apps/v1 %s: Matches = %v, want %v", tc.policy, tc.resource, got, tc.want)
		}
	}
	// A wildcard in another group has no equivalent of apps/v1 deployments.
	w.MatchPolicy, w.Rules[0].Resources = string(admissionv1.Equivalent), []string{"*", "*/*"}
	if w.Matches(req, nil, nil) {
		t.Errorf("Equivalent webhook on extensions/v1beta1 *, */*: matches apps/v1 deployments")
	}
}
