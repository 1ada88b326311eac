package webhooks

import (
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
	"github.com/kube-convergence/kube-convergence-exporter/internal/slowwebhook"
)

// webhook keeps the table's edits below one line each.
type webhook = admission.Webhook

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func caPEM(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	ca, err := slowwebhook.NewCA(notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return ca.PEM
}

// The cluster the table runs against: the webhook's Service hooks/hook
// selects app=hook pods, serves port 443 at a ClusterIP and has one ready
// endpoint (empty has none; headless has clusterIP None); the
// exporter runs in monitoring (team=obs); workloads run in apps (team=a).
func cluster() Cluster {
	ns := map[string]map[string]string{
		"kube-system": {"kubernetes.io/metadata.name": "kube-system"},
		"hooks":       {"kubernetes.io/metadata.name": "hooks"},
		"monitoring":  {"kubernetes.io/metadata.name": "monitoring", "team": "obs"},
		"apps":        {"kubernetes.io/metadata.name": "apps", "team": "a"},
	}
	return Cluster{
		NamespaceLabels: func(n string) (map[string]string, bool) { l, ok := ns[n]; return l, ok },
		Service: func(n, name string) (*corev1.Service, bool) {
			switch {
			case n == "hooks" && name == "external":
				return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hook.example.com"}}, true
			case n == "hooks":
				ip := "10.96.0.10"
				if name == "headless" {
					ip = corev1.ClusterIPNone
				}
				return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip,
					Selector: map[string]string{"app": "hook"}, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}, true
			}
			return nil, false
		},
		ServicesSynced: true,
		Slices:         SlicesSynced,
		ReadyEndpoints: func(n, name string) int {
			if n == "hooks" && name == "hook" {
				return 1
			}
			return 0
		},
	}
}

var policy = Policy{MaxTimeout: 10 * time.Second, CAExpiryWarning: 720 * time.Hour, OwnNamespace: "monitoring"}

func namespaced(ops []admissionv1.OperationType, groups, resources []string) admissionv1.RuleWithOperations {
	scope := admissionv1.NamespacedScope
	return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
		APIGroups: groups, APIVersions: []string{"v1"}, Resources: resources, Scope: &scope}}
}

// clean has no finding: narrow rule, team=a namespaces only, short timeout,
// Fail with a ready endpoint, a CA valid for a year.
func clean(t *testing.T) webhook {
	return webhook{
		Configuration: "c", Name: "clean.example.com", Type: admission.Validating,
		FailurePolicy: "Fail", SideEffects: "None", MatchPolicy: "Equivalent",
		Service:           &admissionv1.ServiceReference{Namespace: "hooks", Name: "hook"},
		CABundle:          caPEM(t, now.Add(365*24*time.Hour)),
		Timeout:           5 * time.Second,
		Rules:             []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.Create}, []string{""}, []string{"configmaps"})},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
	}
}

func TestCleanWebhookHasNoFinding(t *testing.T) {
	a := Evaluate(clean(t), cluster(), policy, now)
	if len(a.Findings) != 0 || a.CAErr != nil || !a.CAExpiry.Equal(now.Add(365*24*time.Hour).Truncate(time.Second)) {
		t.Fatalf("clean webhook: findings %v, CA %v %v", a.Findings, a.CAExpiry, a.CAErr)
	}
}

// Every finding: a webhook that triggers it and a near twin that does not.
func TestFindingsTriggerAndNearTwin(t *testing.T) {
	everything := &metav1.LabelSelector{}
	notKubeSystem := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}
	podsCreate := []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.Create}, []string{""}, []string{"pods"})}
	for _, tc := range []struct {
		finding       string
		trigger, twin func(w *webhook, p *Policy, c *Cluster)
	}{
		{TimeoutTooLong,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Timeout = 11 * time.Second },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Timeout = 10 * time.Second }},
		{TimeoutTooLong, // cert-manager's 30 s on its own resources only
			func(w *webhook, _ *Policy, _ *Cluster) { w.Timeout = 30 * time.Second },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Timeout, w.Rules[0].APIGroups, w.Rules[0].Resources = 30*time.Second, []string{"cert-manager.io", "acme.cert-manager.io"}, []string{"*/*"}
			}},
		{Unscoped,
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector, w.ObjectSelector = everything, everything
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector, w.ObjectSelector = everything, everything
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "not-kube-system", Expression: "request.namespace != 'kube-system'"}}
			}},
		{Unscoped, // only the project's own group: its outage holds up its own resources
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = nil },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector, w.Rules[0].APIGroups = nil, []string{"cert-manager.io"}
			}},
		{Unscoped, // nil selectors (a decoded file) are the API server's {}
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = nil },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = nil
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"validate": "true"}}
			}},
		{FailClosedUnscoped,
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = nil },
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector, w.FailurePolicy = nil, "Ignore" }},
		{MatchesKubeSystem,
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = notKubeSystem }},
		{MatchesKubeSystem, // Ignore: a kube-system write waits at most the timeout, then goes through
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector, w.FailurePolicy = everything, "Ignore" }},
		{MatchesKubeSystem, // a CEL condition excluding kube-system is a selector
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = everything
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "ns", Expression: `!(request.namespace in ["kube-system", "kube-public"])`}}
			}},
		{MatchesKubeSystem, // an opt-in objectSelector: kube-system's objects do not carry the label
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = everything
				w.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "inject", Operator: metav1.LabelSelectorOpExists}}}
			}},
		{MatchesKubeSystem, // only cluster-scoped resources: kube-system's objects are not gated
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = everything
				cluster := admissionv1.ClusterScope
				w.Rules[0].Scope = &cluster
			}},
		{MatchesOwnNamespace,
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector.MatchLabels = nil
				w.NamespaceSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "obs"}}}
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector.MatchLabels = nil
				w.NamespaceSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "ops"}}}
			}},
		{MatchesOwnNamespace, // no own namespace known: not evaluated
			func(w *webhook, _ *Policy, _ *Cluster) { w.NamespaceSelector = everything },
			func(w *webhook, p *Policy, _ *Cluster) { w.NamespaceSelector, p.OwnNamespace = everything, "" }},
		{SelfBlocking,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules, w.NamespaceSelector = podsCreate, notKubeSystem },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules, w.NamespaceSelector = podsCreate, notKubeSystem
				w.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"hook"}}}}
			}},
		{SelfBlocking,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules, w.NamespaceSelector = podsCreate, notKubeSystem },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules, w.NamespaceSelector, w.FailurePolicy = podsCreate, notKubeSystem, "Ignore"
			}},
		{SelfBlocking, // pods/status updates do not create pods
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules = []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.OperationAll}, []string{"*"}, []string{"*/*"})}
				w.NamespaceSelector = nil
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules = []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.OperationAll}, []string{"*"}, []string{"pods/status"})}
				w.NamespaceSelector = nil
			}},
		{WildcardResources,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"*"} },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"pods/*"} }},
		{WildcardResources, // every resource of the project's own group
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"*"} },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules[0].Resources, w.Rules[0].APIGroups = []string{"*"}, []string{"example.com"}
			}},
		{WildcardResources, // Ignore: an outage delays writes by the timeout, refuses none
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"*"} },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules[0].Resources, w.FailurePolicy = []string{"*"}, "Ignore"
			}},
		{WildcardResources,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"configmaps", "*/*"} },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Resources = []string{"configmaps", "secrets"} }},
		{WildcardOperations,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Rules[0].Operations = []admissionv1.OperationType{"*"} },
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules[0].Operations = []admissionv1.OperationType{"CREATE", "UPDATE", "DELETE", "CONNECT"}
			}},
		{NoReadyEndpoints,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "empty" },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name, w.FailurePolicy = "empty", "Ignore" }},
		{NoReadyEndpoints, // the slices informer has not listed: an empty cache is not "no endpoint"
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "empty" },
			func(w *webhook, _ *Policy, c *Cluster) { w.Service.Name, c.Slices = "empty", SlicesSyncing }},
		{NoReadyEndpoints, // listing slices is forbidden: endpoints_unknown instead
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "empty" },
			func(w *webhook, _ *Policy, c *Cluster) { w.Service.Name, c.Slices = "empty", SlicesForbidden }},
		{EndpointsUnknown,
			func(_ *webhook, _ *Policy, c *Cluster) { c.Slices = SlicesForbidden },
			func(w *webhook, _ *Policy, c *Cluster) { c.Slices, w.FailurePolicy = SlicesForbidden, "Ignore" }},
		{EndpointsUnknown, // an ExternalName Service has no slices to know
			func(_ *webhook, _ *Policy, c *Cluster) { c.Slices = SlicesForbidden },
			func(w *webhook, _ *Policy, c *Cluster) { c.Slices, w.Service.Name = SlicesForbidden, "external" }},
		{ServiceMissing,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Namespace = "gone" },
			func(w *webhook, _ *Policy, c *Cluster) { w.Service.Namespace, c.ServicesSynced = "gone", false }},
		{ServicePortMissing,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Port = ptr.To(int32(8443)) },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Port = ptr.To(int32(443)) }},
		{ServicePortMissing, // unset is 443
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Port = ptr.To(int32(9443)) },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Port = nil }},
		{ServiceHeadless,
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "headless" },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "hook" }},
		{CABundleInvalid, // empty on a Service-backed webhook
			func(w *webhook, _ *Policy, _ *Cluster) { w.CABundle = nil },
			func(w *webhook, _ *Policy, _ *Cluster) { w.CABundle, w.Service = nil, nil }},
		{CABundleInvalid, // base64 of the PEM (encoded twice in a manifest)
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.CABundle = []byte(base64.StdEncoding.EncodeToString(caPEM(t, now.Add(365*24*time.Hour))))
			},
			func(w *webhook, _ *Policy, _ *Cluster) { w.CABundle = caPEM(t, now.Add(365*24*time.Hour)) }},
		{NodeHeartbeatLockout, // kube-node-lease Leases
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector, w.Rules = nil, []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.Update}, []string{"coordination.k8s.io"}, []string{"leases"})}
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector, w.Rules = nil, []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.Update}, []string{"coordination.k8s.io"}, []string{"leases"})}
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "exclude-kubelet-requests", Expression: `!("system:nodes" in request.userInfo.groups)`}}
			}},
		{NodeHeartbeatLockout, // everything, through wildcards; an opt-out selector sparing kube-node-lease
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = notKubeSystem
				w.Rules = []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.OperationAll}, []string{"*"}, []string{"*"})}
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-node-lease"}}}}
				w.Rules = []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.OperationAll}, []string{"*"}, []string{"*"})}
			}},
		{NodeHeartbeatLockout, // nodes/status
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules = []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes/status"}}}}
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.Rules = []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes/status"}}}}
				w.FailurePolicy = "Ignore"
			}},
		{MatchConditionsUnanalysed,
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "labels", Expression: `object.metadata.labels["x"] == "y"`}}
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "ns", Expression: `request.namespace == "apps"`}}
			}},
		{NoReadyEndpoints, // an ExternalName Service has no EndpointSlices: the API server calls its DNS name
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "empty" },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "external" }},
		{NoReadyEndpoints, // a URL webhook has no Service to look at
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service.Name = "empty" },
			func(w *webhook, _ *Policy, _ *Cluster) { w.Service = nil }},
		{CABundleExpiring,
			func(w *webhook, _ *Policy, _ *Cluster) { w.CABundle = caPEM(t, now.Add(10*24*time.Hour)) },
			func(w *webhook, _ *Policy, _ *Cluster) { w.CABundle = caPEM(t, now.Add(31*24*time.Hour)) }},
		{CABundleExpiring, // the earliest certificate of a bundle counts
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.CABundle = append(caPEM(t, now.Add(365*24*time.Hour)), caPEM(t, now.Add(-time.Hour))...)
			},
			func(w *webhook, _ *Policy, _ *Cluster) {
				w.CABundle = append(caPEM(t, now.Add(365*24*time.Hour)), caPEM(t, now.Add(40*24*time.Hour))...)
			}},
	} {
		t.Run(tc.finding, func(t *testing.T) {
			for _, side := range []struct {
				name string
				edit func(w *webhook, p *Policy, c *Cluster)
				want bool
			}{{"trigger", tc.trigger, true}, {"twin", tc.twin, false}} {
				w, p, c := clean(t), policy, cluster()
				w.Service = &admissionv1.ServiceReference{Namespace: "hooks", Name: "hook"}
				w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
				w.Rules = slices.Clone(w.Rules)
				side.edit(&w, &p, &c)
				a := Evaluate(w, c, p, now)
				if got := slices.Contains(a.Findings, tc.finding); got != side.want {
					t.Errorf("%s: %s = %v, want %v (findings %v)", side.name, tc.finding, got, side.want, a.Findings)
				}
			}
		})
	}
}

// The v1 API refuses sideEffects Unknown and Some, so dry_run_unsafe can
// only be seen on objects stored before v1: tested on a decoded object.
func TestDryRunUnsafeFromDecodedObject(t *testing.T) {
	for sideEffects, want := range map[string]bool{"Unknown": true, "Some": true, "NoneOnDryRun": false, "None": false} {
		doc := `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: legacy}
webhooks:
- name: legacy.example.com
  clientConfig: {url: "https://127.0.0.1:1/"}
  sideEffects: ` + sideEffects + `
  admissionReviewVersions: [v1]
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  objectSelector: {matchLabels: {legacy: "true"}}
`
		var cfg admissionv1.MutatingWebhookConfiguration
		if err := yaml.UnmarshalStrict([]byte(doc), &cfg); err != nil {
			t.Fatal(err)
		}
		hooks := admission.FromMutating(&cfg)
		if len(hooks) != 1 {
			t.Fatalf("decoded %d webhooks", len(hooks))
		}
		w := hooks[0]
		if w.FailurePolicy != "Fail" || w.MatchPolicy != "Equivalent" || w.ReinvocationPolicy != "Never" || w.Timeout != 10*time.Second || w.Client() != "url" {
			t.Errorf("v1 defaults not applied: %+v", w)
		}
		a := Evaluate(w, cluster(), policy, now)
		if got := slices.Contains(a.Findings, DryRunUnsafe); got != want {
			t.Errorf("sideEffects %s: dry_run_unsafe = %v, want %v (%v)", sideEffects, got, want, a.Findings)
		}
	}
}

// A caBundle that is not PEM gives no expiry (the collector logs it once)
// and the other findings still evaluate.
func TestCABundleNotPEM(t *testing.T) {
	w := clean(t)
	w.CABundle = []byte("not a certificate")
	w.Timeout = 30 * time.Second
	a := Evaluate(w, cluster(), policy, now)
	if a.CAErr == nil || !a.CAExpiry.IsZero() {
		t.Errorf("CA: %v %v, want an error and no expiry", a.CAExpiry, a.CAErr)
	}
	if !slices.Equal(a.Findings, []string{TimeoutTooLong, CABundleInvalid}) {
		t.Errorf("findings %v, want timeout_too_long and ca_bundle_invalid", a.Findings)
	}
	w.CABundle = nil
	if a := Evaluate(w, cluster(), policy, now); !errors.Is(a.CAErr, ErrNoCABundle) {
		t.Errorf("empty bundle: %v", a.CAErr)
	}
}

// TestReadyEndpoints: a terminating endpoint is not ready, even when the
// controller leaves it ready=true (publishNotReadyAddresses); nil ready is.
func TestReadyEndpoints(t *testing.T) {
	yes, no := true, false
	ep := func(ready, terminating *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	}
	eps := []*discoveryv1.EndpointSlice{
		{Endpoints: []discoveryv1.Endpoint{ep(&yes, nil), ep(nil, nil), ep(&no, nil)}},
		{Endpoints: []discoveryv1.Endpoint{ep(&yes, &yes), ep(&yes, &no)}},
	}
	if got := readyEndpoints(eps); got != 3 {
		t.Errorf("readyEndpoints = %d, want 3 (ready, nil ready, ready and not terminating)", got)
	}
	if got := readyEndpoints(eps[1:2]); got != 1 {
		t.Errorf("readyEndpoints(ready+terminating, ready) = %d, want 1", got)
	}
}

// A shard judges a webhook's Service only if it reads the Service's
// namespace: a Fail webhook whose Service has no ready endpoint and gates
// its own pods has both findings when its namespace is seen, neither when
// it is another shard's (the cache would lack the Service, not the
// cluster).
func TestServiceFindingsOnlyWhereSeen(t *testing.T) {
	w := clean(t)
	w.Service = &admissionv1.ServiceReference{Namespace: "hooks", Name: "empty"}
	w.Rules = []admissionv1.RuleWithOperations{namespaced([]admissionv1.OperationType{admissionv1.Create}, []string{""}, []string{"pods"})}
	w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "hooks"}}
	for _, tc := range []struct {
		name string
		sees func(string) bool
		want []string
	}{
		{"every namespace", nil, []string{SelfBlocking, NoReadyEndpoints}},
		{"its namespace seen", func(ns string) bool { return ns == "hooks" }, []string{SelfBlocking, NoReadyEndpoints}},
		{"another shard's", func(ns string) bool { return ns != "hooks" }, nil},
	} {
		c := cluster()
		c.Sees = tc.sees
		if got := Evaluate(w, c, policy, now).Findings; !slices.Equal(got, tc.want) {
			t.Errorf("%s: findings %v, want %v", tc.name, got, tc.want)
		}
	}
}
