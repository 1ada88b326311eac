package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

const webhookRules = "../rules/kube-convergence-webhooks.rules.yml"

// alertsOn returns the alerts of the webhook rules whose expression reads
// finding f: the rule file decides which alert pages for a finding.
func alertsOn(t *testing.T, f string) []string {
	t.Helper()
	b, err := os.ReadFile(webhookRules)
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && strings.Contains(r.Expr, `finding="`+f+`"`) && !slices.Contains(out, r.Alert) {
				out = append(out, r.Alert)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no alert of %s reads finding %s", webhookRules, f)
	}
	return out
}

// The outages people have, each made real on the sandbox: the finding on
// the exporter and its alert's expression true (pending or firing) on a
// real Prometheus with the bundled webhook rules. The broken webhooks gate
// CREATE of podtemplates in the test namespace, which nothing writes, so
// the sandbox keeps working; the node-lease webhook is served by the
// always-allow server, so the kubelets' (kwok's) heartbeats keep passing
// through it while it is configured.
func TestWebhookOutageFindings(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := startWebhookServer(t)
	ns := namespace(t, "wh-outage")

	// hook has a ready endpoint and port 443; headless has clusterIP None;
	// cold selects pods that do not exist.
	for _, s := range []struct {
		name     string
		headless bool
		ready    bool
	}{{"hook", false, true}, {"headless", true, true}, {"cold", false, false}} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": s.name}, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
		if s.headless {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !s.ready {
			continue
		}
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: s.name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: s.name, discoveryv1.LabelManagedBy: "e2e"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svcHook := func(name, svc string, port int32, ca []byte) admissionv1.ValidatingWebhook {
		h := hook(name, ns, srv, "")
		h.ClientConfig = admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: svc, Port: ptr.To(port)}, CABundle: ca}
		h.FailurePolicy = ptr.To(admissionv1.Fail)
		return h
	}
	lease := hook("node-lease.kce.test", ns, srv, "")
	lease.Rules = []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Update},
		Rule: admissionv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}}}}
	lease.NamespaceSelector = inNamespace(corev1.NamespaceNodeLease)
	lease.FailurePolicy = ptr.To(admissionv1.Fail)
	cfg := ns + "-outages"
	validating(t, cfg,
		svcHook("healthy.kce.test", "hook", 443, srv.CA.PEM),
		svcHook("empty-ca.kce.test", "hook", 443, nil),
		svcHook("base64-ca.kce.test", "hook", 443, []byte(base64.StdEncoding.EncodeToString(srv.CA.PEM))),
		svcHook("wrong-port.kce.test", "hook", 8443, srv.CA.PEM),
		svcHook("headless.kce.test", "headless", 443, srv.CA.PEM),
		svcHook("cold.kce.test", "cold", 443, srv.CA.PEM),
		lease)
	want := map[string]string{
		"empty-ca.kce.test":   "ca_bundle_invalid",
		"base64-ca.kce.test":  "ca_bundle_invalid",
		"wrong-port.kce.test": "service_port_missing",
		"headless.kce.test":   "service_headless",
		"cold.kce.test":       "no_ready_endpoints",
		"node-lease.kce.test": "node_heartbeat_lockout",
		"healthy.kce.test":    "",
	}

	full := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""))
	noSlices := startExporter(t, "--kubeconfig="+sb.Kubeconfig(noEndpointsUser))
	full.waitReady(60 * time.Second)
	noSlices.waitReady(60 * time.Second)
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		Targets: []sandbox.ScrapeTarget{
			{Job: "kube-convergence-exporter", Addr: strings.TrimPrefix(full.url, "http://"), Extra: map[string]any{"honor_labels": true}},
			{Job: "kce-no-slices", Addr: strings.TrimPrefix(noSlices.url, "http://"), Extra: map[string]any{"honor_labels": true}},
		},
		RuleFiles: []string{webhookRules},
	})

	// The findings, exactly, on the exporter with every permission.
	eventually(t, 30*time.Second, "outage findings", func() (bool, string) {
		got := findings(full.scrape(), cfg)
		ok := true
		for w, f := range want {
			var exp []string
			if f != "" {
				exp = []string{f}
			}
			ok = ok && slices.Equal(got[w], exp)
		}
		return ok, fmt.Sprintf("findings %v", got)
	})
	// Each finding's alert expression holds for its webhook, and for no
	// other webhook of the configuration, within a minute.
	for w, f := range want {
		if f == "" {
			continue
		}
		alerts := alertsOn(t, f)
		q := fmt.Sprintf(`ALERTS{alertname=~%q, job="kube-convergence-exporter", configuration=%q, webhook=%q, alertstate=~"pending|firing"}`, strings.Join(alerts, "|"), cfg, w)
		if _, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) >= 1 }, 60*time.Second); err != nil {
			t.Errorf("%s (%s): no %v alert: %v", w, f, alerts, err)
		}
	}
	if n := count(ctx, t, prom, fmt.Sprintf(`count(ALERTS{configuration=%q, webhook="healthy.kce.test"})`, cfg)); n != 0 {
		t.Errorf("the healthy webhook has %d alerts", n)
	}

	// Without permission to list EndpointSlices: no no_ready_endpoints
	// (a page on every Service-backed Fail webhook, never clearing), but
	// endpoints_unknown, a ticket, on each of them.
	eventually(t, 30*time.Second, "endpoints_unknown without slices", func() (bool, string) {
		got := findings(noSlices.scrape(), cfg)
		ok := true
		for w := range want {
			if w == "node-lease.kce.test" { // URL-backed: no Service
				continue
			}
			ok = ok && slices.Contains(got[w], "endpoints_unknown") && !slices.Contains(got[w], "no_ready_endpoints")
		}
		return ok, fmt.Sprintf("findings %v", got)
	})
	// One ticket per exporter (a missing grant, not a webhook's fault).
	unknown := alertsOn(t, "endpoints_unknown")
	if _, err := prom.WaitFor(ctx, fmt.Sprintf(`ALERTS{alertname=~%q, job="kce-no-slices"}`, strings.Join(unknown, "|")),
		func(v model.Vector) bool { return len(v) >= 1 }, 60*time.Second); err != nil {
		t.Errorf("no %v alert from the exporter without slices: %v", unknown, err)
	}
	for _, a := range alertsOn(t, "no_ready_endpoints") {
		if n := count(ctx, t, prom, fmt.Sprintf(`count(ALERTS{alertname=%q, job="kce-no-slices"})`, a)); n != 0 {
			t.Errorf("%d %s alerts from the exporter without slices", n, a)
		}
	}
	if f, err := prom.RuleEvaluationFailures(ctx); err != nil || f != 0 {
		t.Errorf("rule evaluation failures = %v (%v), want 0", f, err)
	}
}
