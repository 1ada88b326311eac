package webhooks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// startCollector runs the collector on real informers over client-go's
// fake clientset holding objs, and waits for them to sync.
func startCollector(t *testing.T, now time.Time, logs *bytes.Buffer, objs ...any) (*Collector, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *admissionv1.ValidatingWebhookConfiguration:
			_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), o, metav1.CreateOptions{})
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(t.Context(), o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = client.CoreV1().Services(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = client.DiscoveryV1().EndpointSlices(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	f := informers.New(client, nil, logger)
	c := New(config.Default(), logger, func() time.Time { return now })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Start(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range append(c.Resources(), c.OptionalResources()...) {
		for !f.Synced(r) {
			if time.Now().After(deadline) {
				t.Fatalf("%v did not sync in 10 s", r)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return c, client
}

// Collect's exposition for one Fail webhook backed by a Service with no
// ready endpoint (its only endpoint is terminating), scoped to one
// namespace, with a caBundle that is not PEM: info and timeout series, the
// findings that hold, no expiry series, and one log line across scrapes.
func TestCollectExposition(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "a.kce.test",
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "hooks", Name: "hook"}, CABundle: []byte("not pem")},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](15),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Labels: map[string]string{"kubernetes.io/metadata.name": "hooks"}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "hooks", Name: "hook"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hook"},
		ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "hooks", Name: "hook-1", Labels: map[string]string{discoveryv1.LabelServiceName: "hook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Terminating: ptr.To(true)}}},
	}
	var logs bytes.Buffer
	c, client := startCollector(t, now, &logs, vwc, ns, svc, slice)
	want := `
# HELP kube_convergence_webhook_findings 1 while an admission webhook has a risky configuration, by finding, absent otherwise.
# TYPE kube_convergence_webhook_findings gauge
kube_convergence_webhook_findings{configuration="cfg",finding="ca_bundle_invalid",type="validating",webhook="a.kce.test"} 1
kube_convergence_webhook_findings{configuration="cfg",finding="no_ready_endpoints",type="validating",webhook="a.kce.test"} 1
kube_convergence_webhook_findings{configuration="cfg",finding="timeout_too_long",type="validating",webhook="a.kce.test"} 1
# HELP kube_convergence_webhook_info Admission webhooks of the cluster's Validating- and MutatingWebhookConfigurations, 1 each, with their settings (v1 defaults applied).
# TYPE kube_convergence_webhook_info gauge
kube_convergence_webhook_info{client="service",configuration="cfg",failure_policy="Fail",match_policy="Equivalent",reinvocation_policy="",side_effects="None",type="validating",webhook="a.kce.test"} 1
# HELP kube_convergence_webhook_timeout_seconds timeoutSeconds of an admission webhook (10 when unset): the longest the API server waits for it on each matching write.
# TYPE kube_convergence_webhook_timeout_seconds gauge
kube_convergence_webhook_timeout_seconds{configuration="cfg",type="validating",webhook="a.kce.test"} 15
`
	names := []string{"kube_convergence_webhook_findings", "kube_convergence_webhook_info", "kube_convergence_webhook_timeout_seconds", "kube_convergence_webhook_ca_bundle_expiry_timestamp_seconds", "kube_convergence_webhook_slow_ratio"}
	for range 2 {
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "caBundle of admission webhook is not usable PEM"); n != 1 {
		t.Errorf("%d caBundle log lines after 2 scrapes, want 1:\n%s", n, logs.String())
	}

	// The configuration goes away: its logged key is forgotten, and a new
	// configuration with the same bad bundle is logged again.
	if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(c.validating.GetStore().List()) == 0 })
	if n := testutil.CollectAndCount(c, names...); n != 0 {
		t.Errorf("%d series after the configuration was deleted, want 0", n)
	}
	c.mu.Lock()
	logged := len(c.logged)
	c.mu.Unlock()
	if logged != 0 {
		t.Errorf("logged holds %d keys after the configuration was deleted, want 0", logged)
	}
	vwc.ResourceVersion = ""
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(c.validating.GetStore().List()) == 1 })
	testutil.CollectAndCount(c, names...)
	if n := strings.Count(logs.String(), "caBundle of admission webhook is not usable PEM"); n != 2 {
		t.Errorf("%d caBundle log lines after the configuration came back, want 2", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
