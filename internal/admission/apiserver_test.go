package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
)

// served is the grid's API server: every group of the grid in three
// versions, core events and events.k8s.io events cohabiting as on a v1.37
// API server (one equivalence key).
func served() runtime.EquivalentResourceRegistry {
	reg := runtime.NewEquivalentResourceRegistryWithIdentity(func(gr schema.GroupResource) string {
		if gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io") {
			return "events"
		}
		return gr.String()
	})
	for _, g := range []string{"", "apps", "events.k8s.io", "example.com"} {
		for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
			for _, r := range []string{"pods", "deployments", "events", "widgets", "namespaces"} {
				reg.RegisterKindFor(schema.GroupVersionResource{Group: g, Version: v, Resource: r}, "", schema.GroupVersionKind{Group: g, Version: v, Kind: r})
				reg.RegisterKindFor(schema.GroupVersionResource{Group: g, Version: v, Resource: r}, "status", schema.GroupVersionKind{Group: g, Version: v, Kind: r})
			}
		}
	}
	return reg
}

// The grid's rules and requests, every combination.
func grid() ([]admissionv1.RuleWithOperations, []Request) {
	var rs []admissionv1.RuleWithOperations
	scopes := []*admissionv1.ScopeType{nil, ptr(admissionv1.NamespacedScope), ptr(admissionv1.ClusterScope), ptr(admissionv1.AllScopes)}
	for _, ops := range [][]admissionv1.OperationType{{admissionv1.OperationAll}, {admissionv1.Create}, {admissionv1.Update, admissionv1.Delete}} {
		for _, groups := range [][]string{{"*"}, {""}, {"apps"}, {"events.k8s.io"}, {"example.com", ""}} {
			for _, versions := range [][]string{{"*"}, {"v1"}, {"v1beta1"}} {
				for _, res := range [][]string{{"*"}, {"*/*"}, {"pods"}, {"pods/*"}, {"*/status"}, {"deployments"}, {"events"}, {"namespaces"}, {"widgets", "pods/status"}} {
					for _, sc := range scopes {
						rs = append(rs, admissionv1.RuleWithOperations{Operations: ops,
							Rule: admissionv1.Rule{APIGroups: groups, APIVersions: versions, Resources: res, Scope: sc}})
					}
				}
			}
		}
	}
	var reqs []Request
	for _, op := range []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		for _, g := range []string{"", "apps", "events.k8s.io", "example.com"} {
			for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
				for _, r := range []string{"pods", "deployments", "events", "widgets", "namespaces"} {
					for _, sub := range []string{"", "status"} {
						reqs = append(reqs, Request{Operation: op, Group: g, Version: v, Resource: r, Subresource: sub, Namespaced: r != "namespaces"})
					}
				}
			}
		}
	}
	return rs, reqs
}

func ptr[T any](v T) *T { return &v }

func attributes(r Request, gvr schema.GroupVersionResource) apiadmission.Attributes {
	ns := ""
	if r.Namespaced {
		ns = "team"
	}
	return apiadmission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, ns, "x", gvr, r.Subresource,
		apiadmission.Operation(r.Operation), nil, false, nil)
}

// RulesMatch decides as k8s.io/apiserver's own rule matcher (v0.37.2
// pkg/admission/plugin/webhook/predicates/rules) on every rule and request
// of the grid.
func TestRulesMatchAsTheAPIServer(t *testing.T) {
	rs, reqs := grid()
	n := 0
	for _, rule := range rs {
		for _, r := range reqs {
			m := rules.Matcher{Rule: rule, Attr: attributes(r, schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})}
			if got, want := RulesMatch([]admissionv1.RuleWithOperations{rule}, r), m.Matches(); got != want {
				t.Fatalf("rule %+v, request %+v: RulesMatch %v, the API server %v", rule, r, got, want)
			}
			n++
		}
	}
	t.Logf("%d rule × request pairs agree", n)
}

// Under matchPolicy Equivalent, Matches calls a webhook exactly when the
// API server would with the grid's served versions: ShouldCallHook's loop
// (k8s.io/apiserver v0.37.2 pkg/admission/plugin/webhook/generic/
// webhook.go:324-353) over the registry's equivalents, with the API
// server's own rule matcher. Every version a rule names is served, so
// "any version" loses nothing; "*" rules are called too.
func TestEquivalentMatchAsTheAPIServer(t *testing.T) {
	rs, reqs := grid()
	reg := served()
	calls := 0
	for i, rule := range rs {
		w := Webhook{MatchPolicy: string(admissionv1.Equivalent), Rules: []admissionv1.RuleWithOperations{rule}}
		for _, r := range reqs {
			gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
			want := (&rules.Matcher{Rule: rule, Attr: attributes(r, gvr)}).Matches()
			for _, eq := range reg.EquivalentResourcesFor(gvr, r.Subresource) {
				if want {
					break
				}
				want = eq != gvr && (&rules.Matcher{Rule: rule, Attr: attributes(r, eq)}).Matches()
			}
			if got := w.Matches(r, nil, nil); got != want {
				t.Fatalf("rule %d %+v, request %+v: Matches %v, the API server %v", i, rule, r, got, want)
			}
			if want {
				calls++
			}
		}
	}
	if calls == 0 {
		t.Fatal("no call in the grid")
	}
	t.Logf("%d calls agree", calls)
}
