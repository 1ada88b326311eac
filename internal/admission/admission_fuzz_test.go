package admission

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// fuzzRequests are the requests FuzzWebhookConfiguration matches every
// webhook against: a pod and a lease create, a Namespace update, a core
// Event (which shares storage with events.k8s.io Events), a pod's status.
var fuzzRequests = []struct {
	req              Request
	nsLabels, labels map[string]string
}{
	{Request{Operation: admissionv1.Create, Version: "v1", Resource: "pods", Namespaced: true},
		map[string]string{"kubernetes.io/metadata.name": "shop"}, map[string]string{"app": "web"}},
	{Request{Operation: admissionv1.Create, Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespaced: true},
		map[string]string{"kubernetes.io/metadata.name": "kube-node-lease"}, nil},
	{Request{Operation: admissionv1.Update, Version: "v1", Resource: "namespaces"},
		map[string]string{"kubernetes.io/metadata.name": "istio-system", "istio-injection": "enabled"}, nil},
	{Request{Operation: admissionv1.Create, Version: "v1", Resource: "events", Namespaced: true},
		map[string]string{"kubernetes.io/metadata.name": "shop"}, nil},
	{Request{Operation: admissionv1.Update, Version: "v1", Resource: "pods", Subresource: "status", Namespaced: true},
		map[string]string{"kubernetes.io/metadata.name": "kube-system"}, map[string]string{"control-plane": "true"}},
}

// FuzzWebhookConfiguration decodes any YAML document as a Validating- and
// as a MutatingWebhookConfiguration (sigs.k8s.io/yaml, as a manifest is
// read) and takes the model of its webhooks (FromValidating,
// FromMutating). Seeds (testdata/fuzz/FuzzWebhookConfiguration): one
// configuration of each of testdata/webhooks (cert-manager, Gatekeeper,
// Istio, Kyverno, Linkerd, the AWS load balancer controller), CA bundles
// cut. It checks:
//
//   - one Webhook per webhook, of the configuration and type, with the v1
//     defaults where a field is unset (failurePolicy Fail, matchPolicy
//     Equivalent, timeoutSeconds 10, reinvocationPolicy Never for a
//     mutating one and none for a validating one), its client service
//     or url;
//   - the matcher, on fuzzRequests: under matchPolicy Exact a match is a
//     rule match; under Equivalent the rules matching the request itself
//     suffice (Equivalent only adds); a request is always among its
//     Equivalents;
//   - the matchConditions analyser: checkConditions.
func FuzzWebhookConfiguration(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 64<<10 {
			return
		}
		var v admissionv1.ValidatingWebhookConfiguration
		if err := yaml.Unmarshal(doc, &v); err == nil {
			hooks := FromValidating(&v)
			if len(hooks) != len(v.Webhooks) {
				t.Fatalf("%d webhooks from %d", len(hooks), len(v.Webhooks))
			}
			for i, w := range hooks {
				h := v.Webhooks[i]
				checkWebhook(t, w, v.Name, Validating, h.Name, h.FailurePolicy, h.MatchPolicy, nil, h.TimeoutSeconds, h.ClientConfig)
			}
		}
		var m admissionv1.MutatingWebhookConfiguration
		if err := yaml.Unmarshal(doc, &m); err == nil {
			hooks := FromMutating(&m)
			if len(hooks) != len(m.Webhooks) {
				t.Fatalf("%d webhooks from %d", len(hooks), len(m.Webhooks))
			}
			for i, w := range hooks {
				h := m.Webhooks[i]
				checkWebhook(t, w, m.Name, Mutating, h.Name, h.FailurePolicy, h.MatchPolicy, h.ReinvocationPolicy, h.TimeoutSeconds, h.ClientConfig)
			}
		}
	})
}

func checkWebhook(t *testing.T, w Webhook, config, typ, name string, failure *admissionv1.FailurePolicyType, match *admissionv1.MatchPolicyType,
	reinvocation *admissionv1.ReinvocationPolicyType, timeout *int32, client admissionv1.WebhookClientConfig) {
	t.Helper()
	or := func(p *string, def string) string {
		if p == nil || *p == "" {
			return def
		}
		return *p
	}
	wantTimeout := 10 * time.Second
	if timeout != nil {
		wantTimeout = time.Duration(*timeout) * time.Second
	}
	wantReinvocation := ""
	if typ == Mutating {
		wantReinvocation = or((*string)(reinvocation), "Never")
	}
	wantClient := "url"
	if client.Service != nil {
		wantClient = "service"
	}
	if w.Configuration != config || w.Type != typ || w.Name != name ||
		w.FailurePolicy != or((*string)(failure), "Fail") || w.MatchPolicy != or((*string)(match), "Equivalent") ||
		w.ReinvocationPolicy != wantReinvocation || w.Timeout != wantTimeout || w.Client() != wantClient {
		t.Errorf("webhook %q of %s %q: %+v", name, typ, config, w)
	}
	for _, r := range fuzzRequests {
		got := w.Matches(r.req, r.nsLabels, r.labels)
		selected := (!r.req.Namespaced && r.req.Resource != "namespaces" || w.SelectsNamespace(r.nsLabels)) && w.SelectsObject(r.labels)
		switch {
		case w.MatchPolicy == string(admissionv1.Exact) && got != (RulesMatch(w.Rules, r.req) && selected):
			t.Errorf("webhook %q, matchPolicy Exact: Matches(%+v) = %v, rules %v, selectors %v", name, r.req, got, RulesMatch(w.Rules, r.req), selected)
		case w.MatchPolicy == string(admissionv1.Equivalent) && RulesMatch(w.Rules, r.req) && selected && !got:
			t.Errorf("webhook %q, matchPolicy Equivalent: a rule matches %+v, yet it does not", name, r.req)
		}
		if eq := Equivalents(r.req); len(eq) == 0 || eq[0] != r.req {
			t.Errorf("Equivalents(%+v) = %+v", r.req, eq)
		}
	}
	checkConditions(t, w, Call{Namespace: "shop", Group: "coordination.k8s.io", Resource: "leases", Kind: "Lease",
		Username: "system:node:n1", UserGroups: []string{"system:nodes"}})
}

// celEnv declares what the analyser reads of a matchCondition's
// environment (the API server's has request, object, oldObject,
// authorizer and params): request as a map, object and oldObject left
// without a value.
var celEnv = sync.OnceValue(func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		panic(err)
	}
	return env
})

// celHolds evaluates expr with CEL for call: true or false, ok false when
// it does not compile, is not a bool or fails (the API server then applies
// the failure policy; the analyser is not asked about it).
func celHolds(expr string, call Call) (holds, ok bool) {
	ast, iss := celEnv().Compile(expr)
	if iss.Err() != nil {
		return false, false
	}
	prg, err := celEnv().Program(ast)
	if err != nil {
		return false, false
	}
	groups := make([]any, len(call.UserGroups))
	for i, g := range call.UserGroups {
		groups[i] = g
	}
	out, _, err := prg.Eval(map[string]any{"request": map[string]any{
		"namespace": call.Namespace,
		"resource":  map[string]any{"group": call.Group, "resource": call.Resource},
		"kind":      map[string]any{"kind": call.Kind},
		"userInfo":  map[string]any{"username": call.Username, "groups": groups},
	}})
	if err != nil || out.Type() != types.BoolType {
		return false, false
	}
	return out.Value().(bool), true
}

// FuzzMatchConditions analyses two matchConditions of any text
// (Webhook{MatchConditions}.Conditions) and asks Admits about calls made
// of the strings the expressions quote. Seeds
// (testdata/fuzz/FuzzMatchConditions): the Kubernetes documentation's
// conditions and the forms of conditions.go. Besides checkConditions'
// properties, with CEL (cel-go, as the API server evaluates them) for a
// call with every field set:
//
//   - sound: when CEL says every condition holds, the webhook is called,
//     and Admits must say so;
//   - exact for one analysed condition that does not test the user's
//     groups (whose several inclusions are kept as any one of them): when
//     CEL says it does not hold, Admits says no.
func FuzzMatchConditions(f *testing.F) {
	f.Fuzz(func(t *testing.T, expr1, expr2 string, picks uint64) {
		if len(expr1)+len(expr2) > 16<<10 {
			return
		}
		w := Webhook{MatchConditions: []admissionv1.MatchCondition{{Name: "first", Expression: expr1}, {Name: "second", Expression: expr2}}}
		// The call's values: strings the expressions quote, else "x".
		lits := append(unquoteAll(expr1), unquoteAll(expr2)...)
		pick := func(i int) string {
			if len(lits) == 0 {
				return "x"
			}
			return lits[int(picks>>(8*i)&0xff)%len(lits)]
		}
		call := Call{Namespace: pick(0), Group: pick(1), Resource: pick(2), Kind: pick(3), Username: pick(4), UserGroups: []string{pick(5), pick(6)}}
		c := checkConditions(t, w, call)
		if slices.Contains([]string{call.Namespace, call.Group, call.Resource, call.Kind, call.Username}, "") || len(expr1) > maxConditionBytes {
			return // a field left open, or an expression the analyser does not read
		}
		h1, ok1 := celHolds(expr1, call)
		h2, ok2 := celHolds(expr2, call)
		if ok1 && ok2 && h1 && h2 && !c.Admits(call) {
			t.Errorf("CEL holds both %q and %q for %+v, yet Admits says the webhook is not called", expr1, expr2, call)
		}
		one := Webhook{MatchConditions: w.MatchConditions[:1]}.Conditions()
		if ok1 && !h1 && one.Analysed() && !strings.Contains(expr1, fieldGroups) && one.Admits(call) {
			t.Errorf("CEL says %q does not hold for %+v, yet Admits says it may", expr1, call)
		}
	})
}

// checkConditions analyses w's matchConditions and checks, whatever their
// text: no panic; the unanalysed ones named, in order, among w's, those
// over maxConditionBytes among them; Analysed when none is; Admits of
// call and of the call that leaves everything open (which no exclusion
// rules out: it is refused only by inclusions that exclude each other).
func checkConditions(t *testing.T, w Webhook, call Call) Conditions {
	t.Helper()
	c := w.Conditions()
	var names []string
	for _, mc := range w.MatchConditions {
		names = append(names, mc.Name)
		if len(mc.Expression) > maxConditionBytes && !slices.Contains(c.Unanalysed, mc.Name) {
			t.Errorf("condition %q of %d bytes analysed", mc.Name, len(mc.Expression))
		}
	}
	j := 0
	for _, u := range c.Unanalysed {
		for j < len(names) && names[j] != u {
			j++
		}
		if j == len(names) {
			t.Errorf("unanalysed %v, not in order among %v", c.Unanalysed, names)
			break
		}
		j++
	}
	if c.Analysed() != (len(c.Unanalysed) == 0) {
		t.Errorf("Analysed %v with unanalysed %v", c.Analysed(), c.Unanalysed)
	}
	_ = c.Admits(call)
	contradiction := false
	for _, vs := range c.include {
		contradiction = contradiction || len(vs) == 0
	}
	if got := c.Admits(Call{}); got == contradiction {
		t.Errorf("Admits(the call left open) = %v, with inclusions %v", got, c.include)
	}
	for _, f := range []string{FieldNamespace, FieldGroup, FieldResource, FieldKind, FieldUsername, fieldGroups} {
		_ = c.Narrows(f)
	}
	return c
}
