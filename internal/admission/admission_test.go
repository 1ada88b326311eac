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
// rules name the request's resource in another version of its group, "*"
// included, or a resource sharing its storage (core and events.k8s.io
// events); extensions/v1beta1 is not served on v1.37, so a rule there is
// no equivalent of apps/v1. Exact is exact.
func TestMatchesEquivalent(t *testing.T) {
	deploy := Request{Operation: admissionv1.Create, Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}
	event := Request{Operation: admissionv1.Create, Group: "", Version: "v1", Resource: "events", Namespaced: true}
	rule := func(group, version string, res ...string) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: res}}}
	}
	for _, tc := range []struct {
		policy admissionv1.MatchPolicyType
		rules  []admissionv1.RuleWithOperations
		req    Request
		want   bool
	}{
		{admissionv1.Equivalent, rule("apps", "v1beta1", "deployments"), deploy, true},
		{admissionv1.Exact, rule("apps", "v1beta1", "deployments"), deploy, false},
		{admissionv1.Equivalent, rule("apps", "v1beta1", "*"), deploy, true},
		{admissionv1.Equivalent, rule("apps", "v1beta1", "replicasets"), deploy, false},
		{admissionv1.Equivalent, rule("extensions", "v1beta1", "deployments"), deploy, false},
		{admissionv1.Equivalent, rule("extensions", "v1beta1", "*", "*/*"), deploy, false},
		{admissionv1.Equivalent, rule("events.k8s.io", "v1", "events"), event, true},
		{admissionv1.Exact, rule("events.k8s.io", "v1", "events"), event, false},
	} {
		w := Webhook{MatchPolicy: string(tc.policy), Rules: tc.rules}
		if got := w.Matches(tc.req, nil, nil); got != tc.want {
			t.Errorf("%s webhook on %v, request %+v: Matches = %v, want %v", tc.policy, tc.rules[0].Rule, tc.req, got, tc.want)
		}
	}
}
