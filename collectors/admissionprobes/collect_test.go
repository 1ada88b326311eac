package admissionprobes

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// The matched-webhooks family reads the version the probe sends (its
// object's apiVersion, apps/v1beta9 here, not the preferred apps/v1), and
// lists matchPolicy Equivalent webhooks on the same resource in another
// version, "*" rules included, as possible matches (the API server calls
// both when apps/v1 is served: internal/admission's TestEquivalentMatchAsTheAPIServer).
func TestCollectMatchesTheVersionSent(t *testing.T) {
	rule := func(version string, resources ...string) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{version}, Resources: resources}}}
	}
	hook := func(name string, policy admissionv1.MatchPolicyType, rules []admissionv1.RuleWithOperations) admissionv1.ValidatingWebhook {
		return admissionv1.ValidatingWebhook{Name: name, Rules: rules, MatchPolicy: ptr.To(policy),
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://hook.example.com")}}
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Webhooks: []admissionv1.ValidatingWebhook{
		hook("beta-exact.kce.test", admissionv1.Exact, rule("v1beta9", "deployments")),
		hook("v1-exact.kce.test", admissionv1.Exact, rule("v1", "deployments")),
		hook("v1-equivalent.kce.test", admissionv1.Equivalent, rule("v1", "deployments")),
		hook("v1-wildcard-equivalent.kce.test", admissionv1.Equivalent, rule("v1", "*")),
	}}
	client := fake.NewClientset(vwc)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	probe := config.AdmissionProbe{Name: "d", Resource: "deployments.apps", Namespace: "probes", Operation: config.OperationCreate,
		Object:   map[string]any{"apiVersion": "apps/v1beta9", "kind": "Deployment", "metadata": map[string]any{"name": "probe"}},
		Interval: config.Duration(time.Hour), Timeout: config.Duration(time.Second)}
	c := New(&config.Config{AdmissionProbes: []config.AdmissionProbe{probe}}, logger)
	f := informers.New(client, nil, logger)
	for _, r := range c.Resources() {
		if _, err := f.Informer(r); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range c.Resources() {
		for !f.Synced(r) {
			if time.Now().After(deadline) {
				t.Fatalf("%v did not sync", r)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Start's informers, without its probe loops (they would write).
	c.validating, _ = f.Informer(informers.ValidatingWebhookConfigurations)
	c.mutating, _ = f.Informer(informers.MutatingWebhookConfigurations)
	c.namespace, _ = f.Informer(informers.Namespaces)
	want := `
# HELP kube_convergence_admission_probe_webhooks 1 for each admission webhook that an admission probe's request matches, or possibly matches.
# TYPE kube_convergence_admission_probe_webhooks gauge
kube_convergence_admission_probe_webhooks{configuration="cfg",probe="d",type="validating",webhook="beta-exact.kce.test"} 1
kube_convergence_admission_probe_webhooks{configuration="cfg",probe="d",type="validating",webhook="v1-equivalent.kce.test"} 1
kube_convergence_admission_probe_webhooks{configuration="cfg",probe="d",type="validating",webhook="v1-wildcard-equivalent.kce.test"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "kube_convergence_admission_probe_webhooks"); err != nil {
		t.Error(err)
	}
}

// The probes' clients do not share the configured rate limiter: with it
// exhausted (one token per 1000 s, taken), discovery and a dry-run create
// still reach the API server at once.
func TestProbeClientsHaveTheirOwnRateLimiter(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "v1",
				APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"create"}}}})
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/probes/configmaps" && r.URL.Query().Get("dryRun") == "All":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.Copy(w, r.Body)
		default:
			http.Error(w, r.Method+" "+r.URL.String(), http.StatusNotFound)
		}
	}))
	defer srv.Close()
	limiter := flowcontrol.NewTokenBucketRateLimiter(0.001, 1)
	limiter.Accept() // the only token: the next wait is 1000 s
	p := config.AdmissionProbe{Name: "cm", Resource: "configmaps", Namespace: "probes", Operation: config.OperationCreate,
		Object:   map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "probe"}},
		Interval: config.Duration(time.Hour), Timeout: config.Duration(5 * time.Second)}
	c := New(&config.Config{AdmissionProbes: []config.AdmissionProbe{p}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.RESTConfig = &rest.Config{Host: srv.URL, RateLimiter: limiter}
	disco, dyn, err := c.clients(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{c: c, p: p, dyn: dyn, disco: disco}
	start := time.Now()
	r.once(t.Context())
	if got := testutil.ToFloat64(c.results.WithLabelValues("cm", Allowed)); got != 1 || requests.Load() != 2 || time.Since(start) > 2*time.Second {
		t.Errorf("allowed %v after %d requests in %v, want 1 after 2 (discovery, create) at once", got, requests.Load(), time.Since(start))
	}
}
