package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/admissionprobes"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/internal/slowwebhook"
)

// startWebhookServer runs the always-allow HTTPS webhook for one test. Its
// Cleanup is registered first, so it runs after the configurations that
// point at it are deleted: a Fail webhook never outlives its server.
func startWebhookServer(t *testing.T) *slowwebhook.Server {
	t.Helper()
	srv, err := slowwebhook.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// validating creates a configuration and deletes it at the end of the test.
func validating(t *testing.T, name string, hooks ...admissionv1.ValidatingWebhook) {
	t.Helper()
	ctx := context.Background()
	cfg := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete webhook configuration %s: %v", name, err)
		}
	})
}

// hook is a validating webhook with a narrow default: CREATE of
// podtemplates (which nothing in the sandbox writes) in namespace ns only,
// Ignore, sideEffects None, 5 s, called at urlOrPath on srv.
func hook(name, ns string, srv *slowwebhook.Server, path string) admissionv1.ValidatingWebhook {
	return admissionv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(srv.URL() + path), CABundle: srv.CA.PEM},
		Rules:                   []admissionv1.RuleWithOperations{rule(admissionv1.Create, "", "podtemplates")},
		NamespaceSelector:       inNamespace(ns),
		FailurePolicy:           ptr.To(admissionv1.Ignore),
		SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](5),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func rule(op admissionv1.OperationType, group, resource string) admissionv1.RuleWithOperations {
	return admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{op},
		Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}}}
}

func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// findings returns the findings per webhook of configuration cfg.
func findings(mfs map[string]*dto.MetricFamily, cfg string) map[string][]string {
	out := map[string][]string{}
	if mf := mfs["kube_convergence_webhook_findings"]; mf != nil {
		for _, m := range mf.Metric {
			l := labelMap(m)
			if l["configuration"] == cfg {
				out[l["webhook"]] = append(out[l["webhook"]], l["finding"])
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.Label {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// Every finding on real configurations, each with a near twin, read from
// the real exporter: the webhooks are URL-backed by the test's
// always-allow server or Service-backed by Services of a test namespace,
// and their rules are narrowed (podtemplates, which nothing writes, or the
// test namespace), so no other test's writes meet them.
func TestWebhookAuditFindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startWebhookServer(t)
	ns := namespace(t, "wh-audit")
	own := namespace(t, "wh-audit-own")
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""),
		"--config.file="+writeConfig(t, "webhooks:\n  ownNamespace: "+own+"\n"))
	e.waitReady(60 * time.Second)

	// Services: hook selects app=hook pods and has none ready; ready has a
	// hand-written EndpointSlice with one ready endpoint.
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hook"}, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ready"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "ready-1", Labels: map[string]string{discoveryv1.LabelServiceName: "ready", discoveryv1.LabelManagedBy: "e2e"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiringCA, err := slowwebhook.NewCA(time.Now().Add(10 * 24 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	svcHook := func(name, svc string, fail bool) admissionv1.ValidatingWebhook {
		h := hook(name, ns, srv, "")
		h.ClientConfig = admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: svc, Port: ptr.To[int32](443)}, CABundle: srv.CA.PEM}
		if fail {
			h.FailurePolicy = ptr.To(admissionv1.Fail)
		}
		return h
	}

	long := hook("long.kce.test", ns, srv, "")
	long.TimeoutSeconds = ptr.To[int32](11)
	ten := hook("ten.kce.test", ns, srv, "")
	ten.TimeoutSeconds = ptr.To[int32](10)
	unscopedFail := hook("unscoped-fail.kce.test", ns, srv, "")
	unscopedFail.NamespaceSelector, unscopedFail.FailurePolicy = nil, ptr.To(admissionv1.Fail)
	unscopedIgnore := hook("unscoped-ignore.kce.test", ns, srv, "")
	unscopedIgnore.NamespaceSelector = nil
	conditions := hook("conditions.kce.test", ns, srv, "")
	conditions.NamespaceSelector = nil
	conditions.MatchConditions = []admissionv1.MatchCondition{{Name: "labelled", Expression: `has(object.metadata.labels) && "audit" in object.metadata.labels`}}
	// Every resource of this namespace: under Ignore its outage delays
	// writes, under Fail it refuses them. Namespaced, so no cluster-scoped
	// write of the sandbox (nodes) meets it.
	wild := hook("wild.kce.test", ns, srv, "")
	wild.Rules = []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.OperationAll},
		Rule: admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.NamespacedScope)}}}
	wildFail := wild
	wildFail.Name, wildFail.FailurePolicy = "wild-fail.kce.test", ptr.To(admissionv1.Fail)
	expiring := hook("expiring.kce.test", ns, srv, "")
	expiring.ClientConfig.CABundle = expiringCA.PEM
	notPEM := hook("not-pem.kce.test", ns, srv, "")
	notPEM.ClientConfig.CABundle = []byte("not a certificate")
	notPEM.TimeoutSeconds = ptr.To[int32](15)
	selfBlocking := svcHook("self-blocking.kce.test", "hook", true)
	selfBlocking.Rules = []admissionv1.RuleWithOperations{rule(admissionv1.Create, "", "pods")}
	selfTwin := selfBlocking
	selfTwin.Name = "self-twin.kce.test"
	selfTwin.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"hook"}}}}
	cfg := ns + "-audit"
	validating(t, cfg, long, ten, unscopedFail, unscopedIgnore, conditions, wild, wildFail, expiring, notPEM,
		selfBlocking, selfTwin, svcHook("ready.kce.test", "ready", true), svcHook("empty-ignore.kce.test", "hook", false))

	want := map[string][]string{
		"long.kce.test":            {"timeout_too_long"},
		"unscoped-fail.kce.test":   {"fail_closed_unscoped", "matches_kube_system", "matches_own_namespace", "unscoped"},
		"unscoped-ignore.kce.test": {"unscoped"}, // Ignore: kube-system's writes wait, none is refused
		"conditions.kce.test":      {"match_conditions_unanalysed"},
		"wild-fail.kce.test":       {"wildcard_operations", "wildcard_resources"},
		"expiring.kce.test":        {"ca_bundle_expiring"},
		"not-pem.kce.test":         {"ca_bundle_invalid", "timeout_too_long"}, // no expiry
		"self-blocking.kce.test":   {"no_ready_endpoints", "self_blocking"},
		"self-twin.kce.test":       {"no_ready_endpoints"},
		// ten, wild (Ignore), ready and empty-ignore: no finding.
	}
	var mfs map[string]*dto.MetricFamily
	eventually(t, 30*time.Second, "webhook findings", func() (bool, string) {
		mfs = e.scrape()
		got := findings(mfs, cfg)
		return maps.EqualFunc(got, want, slices.Equal), fmt.Sprintf("findings %v", got)
	})
	if v, ok := value(mfs, "kube_convergence_webhook_timeout_seconds", map[string]string{"configuration": cfg, "webhook": "long.kce.test", "type": "validating"}); !ok || v != 11 {
		t.Errorf("timeout of long = %v (%v), want 11", v, ok)
	}
	if _, ok := value(mfs, "kube_convergence_webhook_info", map[string]string{"configuration": cfg, "webhook": "unscoped-fail.kce.test", "type": "validating",
		"failure_policy": "Fail", "side_effects": "None", "match_policy": "Equivalent", "reinvocation_policy": "", "client": "url"}); !ok {
		t.Errorf("no info series for unscoped-fail with failure_policy Fail, client url")
	}
	if _, ok := value(mfs, "kube_convergence_webhook_info", map[string]string{"configuration": cfg, "webhook": "ready.kce.test", "client": "service"}); !ok {
		t.Errorf("no info series for ready with client service")
	}
	for name, ca := range map[string]*slowwebhook.CA{"expiring.kce.test": expiringCA, "ten.kce.test": srv.CA} {
		v, ok := value(mfs, "kube_convergence_webhook_ca_bundle_expiry_timestamp_seconds", map[string]string{"configuration": cfg, "webhook": name})
		if !ok || int64(v) != ca.Cert.NotAfter.Unix() {
			t.Errorf("CA expiry of %s = %v (%v), want %d", name, v, ok, ca.Cert.NotAfter.Unix())
		}
	}

	if _, ok := value(mfs, "kube_convergence_webhook_ca_bundle_expiry_timestamp_seconds", map[string]string{"configuration": cfg, "webhook": "not-pem.kce.test"}); ok {
		t.Errorf("an expiry series for a caBundle that is not PEM")
	}
	e.scrape() // one more scrape: still one log line
	if n := strings.Count(e.logs.String(), "not-pem.kce.test"); n != 1 {
		t.Errorf("%d log lines name not-pem.kce.test, want 1:\n%s", n, tail(e.logs.String(), 10))
	}

	// Deleting the configuration removes its series at the next scrape.
	if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, cfg, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "series of the deleted configuration gone", func() (bool, string) {
		_, ok := value(e.scrape(), "kube_convergence_webhook_info", map[string]string{"configuration": cfg})
		return !ok, "info series still there"
	})
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx,
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfg}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err) // an empty one, so the deferred delete has something to delete
	}
}

// Probes through real webhooks that sleep: the probe's duration is the
// sleep (± 100 ms); a sleep above the webhook's timeout is a timeout with
// Fail and allowed with Ignore, where the API server counts a fail-open.
// A resource the API server does not serve is an error, logged once.
// UPDATE and DELETE probes act on an existing object, which stays.
func TestAdmissionProbes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startWebhookServer(t)
	ns := namespace(t, "wh-probes")
	slow := func(name, path string, timeout int32, fail bool) admissionv1.ValidatingWebhook {
		h := hook(name+".kce.test", ns, srv, path)
		h.Rules = []admissionv1.RuleWithOperations{rule(admissionv1.Create, "", "configmaps")}
		h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"probe": name}}
		h.TimeoutSeconds = ptr.To(timeout)
		if fail {
			h.FailurePolicy = ptr.To(admissionv1.Fail)
		}
		return h
	}
	cfg := ns + "-slow"
	validating(t, cfg,
		slow("s200ms", "/sleep/200ms", 10, true),
		slow("s2s", "/sleep/2s", 10, true),
		slow("fail", "/sleep/3s", 1, true),
		slow("ignore", "/sleep/3s", 1, false))
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{Targets: []sandbox.ScrapeTarget{sb.APIServerTarget()}})

	var doc strings.Builder
	doc.WriteString("admissionProbes:\n")
	for _, p := range []string{"s200ms", "s2s", "fail", "ignore"} {
		fmt.Fprintf(&doc, "  - name: %s\n    resource: configmaps\n    namespace: %s\n    operation: CREATE\n    interval: 2s\n    timeout: 10s\n"+
			"    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe-%s, labels: {probe: %s}}}\n", p, ns, p, p)
	}
	// UPDATE and DELETE on an existing ConfigMap (dry runs: it stays), and
	// an UPDATE of one that does not exist (error).
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, op, object string }{{"update", "UPDATE", "existing"}, {"delete", "DELETE", "existing"}, {"missing", "UPDATE", "missing"}} {
		fmt.Fprintf(&doc, "  - name: %s\n    resource: configmaps\n    namespace: %s\n    operation: %s\n    interval: 1s\n"+
			"    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: %s}}\n", p.name, ns, p.op, p.object)
	}
	fmt.Fprintf(&doc, "  - name: unserved\n    resource: widgets.kce.test\n    namespace: %s\n    operation: CREATE\n    interval: 1s\n"+
		"    object: {apiVersion: kce.test/v1, kind: Widget, metadata: {name: w}}\n", ns)
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, doc.String()))
	e.waitReady(60 * time.Second)

	result := func(mfs map[string]*dto.MetricFamily, probe, res string) float64 {
		v, _ := value(mfs, "kube_convergence_admission_probe_results_total", map[string]string{"probe": probe, "result": res})
		return v
	}
	var mfs map[string]*dto.MetricFamily
	eventually(t, 90*time.Second, "3 answers of every probe", func() (bool, string) {
		mfs = e.scrape()
		var info []string
		ok := true
		for _, p := range []string{"s200ms", "s2s", "fail", "ignore", "unserved", "update", "delete", "missing"} {
			n := 0.0
			for _, r := range []string{"allowed", "denied", "timeout", "error"} {
				n += result(mfs, p, r)
			}
			ok = ok && n >= 3
			info = append(info, fmt.Sprintf("%s=%v", p, n))
		}
		return ok, strings.Join(info, " ")
	})
	for _, tc := range []struct {
		probe, result string
		sleep         float64
	}{{"s200ms", "allowed", 0.2}, {"s2s", "allowed", 2}, {"fail", "timeout", 1}, {"ignore", "allowed", 1}} {
		for _, r := range []string{"allowed", "denied", "timeout", "error"} {
			n := result(mfs, tc.probe, r)
			if (r == tc.result) != (n > 0) {
				t.Errorf("probe %s: %s = %v, want every answer %s", tc.probe, r, n, tc.result)
			}
		}
		sum, count := histogram(mfs, "kube_convergence_admission_probe_duration_seconds", map[string]string{"probe": tc.probe})
		if tc.result == "timeout" {
			// No answer, no latency: counted by reason instead.
			reason, _ := value(mfs, "kube_convergence_admission_probe_errors_total", map[string]string{"probe": tc.probe, "reason": "webhook_timeout"})
			if n := result(mfs, tc.probe, "timeout"); count != 0 || reason != n {
				t.Errorf("probe %s: %d durations observed, errors{reason=webhook_timeout} %v; want none and %v (its timeouts)", tc.probe, count, reason, n)
			}
			continue
		}
		// Every observation near the sleep (the timeout for Ignore), as
		// far as the buckets tell: none at or below the largest bucket
		// under sleep-0.1 s, all at or below the smallest bucket above
		// sleep+0.1 s.
		mean := sum / float64(count)
		t.Logf("probe %s: %d answers, mean %.3f s (sleep or timeout %.1f s)", tc.probe, count, mean, tc.sleep)
		if !within(mean, tc.sleep, 0.1) {
			t.Errorf("probe %s: mean duration %.3f s over %d, want %.1f ± 0.1 s", tc.probe, mean, count, tc.sleep)
		}
		below, above := 0.0, 0.0
		for _, b := range admissionprobes.Buckets {
			if b <= tc.sleep-0.1 {
				below = b
			}
			if above == 0 && b >= tc.sleep+0.1 {
				above = b
			}
		}
		if n := bucketCount(mfs, tc.probe, below); below > 0 && n != 0 {
			t.Errorf("probe %s: %d observations at or below %v s", tc.probe, n, below)
		}
		if n := bucketCount(mfs, tc.probe, above); n != count {
			t.Errorf("probe %s: %d of %d observations at or below %v s", tc.probe, n, count, above)
		}
		if _, ok := value(mfs, "kube_convergence_admission_probe_webhooks", map[string]string{"probe": tc.probe, "configuration": cfg, "webhook": tc.probe + ".kce.test", "type": "validating"}); !ok {
			t.Errorf("probe %s: its webhook is not listed as matched", tc.probe)
		}
	}
	for probe, want := range map[string]string{"update": "allowed", "delete": "allowed", "missing": "error"} {
		for _, r := range []string{"allowed", "denied", "timeout", "error"} {
			if n := result(mfs, probe, r); (r == want) != (n > 0) {
				t.Errorf("probe %s: %s = %v, want every answer %s", probe, r, n, want)
			}
		}
	}
	if _, count := histogram(mfs, "kube_convergence_admission_probe_duration_seconds", map[string]string{"probe": "missing"}); count != 0 {
		t.Errorf("probe missing observed %d durations, want none (its UPDATE was never sent)", count)
	}
	for _, probe := range []string{"missing", "unserved"} {
		v, _ := value(mfs, "kube_convergence_admission_probe_errors_total", map[string]string{"probe": probe, "reason": "not_found"})
		if n := result(mfs, probe, "error"); v != n || n == 0 {
			t.Errorf("probe %s: errors{reason=not_found} = %v, want its %v errors", probe, v, n)
		}
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "existing", metav1.GetOptions{}); err != nil {
		t.Errorf("the DELETE probe's dry run deleted its object: %v", err)
	}
	documented(t, mfs)
	if got := result(mfs, "unserved", "error"); got < 3 {
		t.Errorf("unserved probe: %v errors", got)
	}
	if n := strings.Count(e.logs.String(), `"admission probe resource not served"`); n != 1 {
		t.Errorf("unserved probe logged %d times, want once", n)
	}
	if n := mfs["kube_convergence_admission_probe_webhooks"]; n != nil && len(n.Metric) != 4 {
		t.Errorf("%d matched webhooks listed, want 4 (one per CREATE probe; the webhooks gate CREATE only; none for unserved)", len(n.Metric))
	}
	// The API server's own count of the Ignore webhook failing open.
	if _, err := prom.WaitFor(ctx, `apiserver_admission_webhook_fail_open_count{name="ignore.kce.test"}`, func(v model.Vector) bool {
		return len(v) == 1 && v[0].Value >= 2
	}, 30*time.Second); err != nil {
		t.Errorf("API server fail-open count: %v", err)
	}
}

// bucketCount is the cumulative count of the probe's histogram at bucket le.
func bucketCount(mfs map[string]*dto.MetricFamily, probe string, le float64) uint64 {
	mf := mfs["kube_convergence_admission_probe_duration_seconds"]
	if mf == nil {
		return 0
	}
	for _, m := range mf.Metric {
		if labelMap(m)["probe"] != probe || m.Histogram == nil {
			continue
		}
		for _, b := range m.Histogram.Bucket {
			if b.GetUpperBound() == le {
				return b.GetCumulativeCount()
			}
		}
	}
	return 0
}

// KubeConvergenceWebhookNearTimeout on a real Prometheus scraping the real
// API server and exporter: a webhook sleeping 6 s with a 10 s timeout is
// slower than half its timeout (bucket 2.5 s) on every call, one sleeping
// 0.2 s never is. A second configuration names the slow webhook alike;
// no rule fails to evaluate. The alert's `for: 5m` is pinned by promtool
// (rules/tests/webhooks.test.yml); here it is seen pending, so the test
// takes seconds, not minutes. The exporter's own kube_convergence_webhook_slow_ratio
// (webhooks.apiServerMetrics) reads 1 and 0 for the same webhooks.
func TestWebhookNearTimeoutAlert(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startWebhookServer(t)
	ns := namespace(t, "wh-near")
	slow := func(name, path string, match string) admissionv1.ValidatingWebhook {
		h := hook(name, ns, srv, path)
		h.Rules = []admissionv1.RuleWithOperations{rule(admissionv1.Create, "", "configmaps")}
		h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"probe": match}}
		h.TimeoutSeconds = ptr.To[int32](10)
		return h
	}
	validating(t, ns+"-a", slow("near.kce.test", "/sleep/6s", "near"), slow("quick.kce.test", "/sleep/200ms", "quick"))
	// Same webhook name in another configuration, matching nothing.
	validating(t, ns+"-b", slow("near.kce.test", "/sleep/6s", "nothing"))

	// The exporter also reads the API server's histogram itself
	// (apiServerMetrics) every 7 s: at least one 6 s call per interval.
	var doc strings.Builder
	doc.WriteString("webhooks:\n  apiServerMetrics: {enabled: true, interval: 7s}\nadmissionProbes:\n")
	for _, p := range []string{"near", "quick"} {
		fmt.Fprintf(&doc, "  - name: %s\n    resource: configmaps\n    namespace: %s\n    operation: CREATE\n    interval: 1s\n    timeout: 15s\n"+
			"    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe-%s, labels: {probe: %s}}}\n", p, ns, p, p)
	}
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, doc.String()))
	e.waitReady(60 * time.Second)
	addr := strings.TrimPrefix(e.url, "http://")
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		Targets:   []sandbox.ScrapeTarget{sb.APIServerTarget(), {Job: "kube-convergence-exporter", Addr: addr, Extra: map[string]any{"honor_labels": true}}},
		RuleFiles: []string{"../rules/kube-convergence-webhooks.rules.yml"},
	})
	// Pending, explicitly: its condition holds; firing is 5 minutes later
	// by `for`, which promtool pins.
	pending, err := prom.WaitFor(ctx, `ALERTS{alertname="KubeConvergenceWebhookNearTimeout", webhook="near.kce.test", type="validating", alertstate="pending"}`,
		func(v model.Vector) bool { return len(v) == 1 }, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st := pending[0].Metric["alertstate"]; st != "pending" {
		t.Errorf("near.kce.test NearTimeout alertstate = %q, want pending", st)
	}
	// quick has been called and judged (its ratio exists) and is not near.
	v, err := prom.WaitFor(ctx, `webhook_type:apiserver_admission_webhook_slow_calls:ratio_rate10m{webhook="quick.kce.test"}`,
		func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v[0].Value != 0 {
		t.Errorf("quick.kce.test slow ratio = %v, want 0", v[0].Value)
	}
	near, err := prom.Query(ctx, `webhook_type:apiserver_admission_webhook_slow_calls:ratio_rate10m{webhook="near.kce.test"}`)
	if err != nil || len(near) != 1 || near[0].Value != 1 {
		t.Errorf("near.kce.test slow ratio = %v (%v), want 1", near, err)
	}
	if n := count(ctx, t, prom, `count(ALERTS{alertname="KubeConvergenceWebhookNearTimeout", webhook="quick.kce.test"})`); n != 0 {
		t.Errorf("quick.kce.test has %d NearTimeout alerts", n)
	}
	if f, err := prom.RuleEvaluationFailures(ctx); err != nil || f != 0 {
		t.Errorf("rule evaluation failures = %v (%v), want 0", f, err)
	}
	// The exporter's own reading agrees: every near call slow, no quick one.
	eventually(t, 40*time.Second, "kube_convergence_webhook_slow_ratio of near and quick", func() (bool, string) {
		mfs := e.scrape()
		n, okN := value(mfs, "kube_convergence_webhook_slow_ratio", map[string]string{"webhook": "near.kce.test", "type": "validating"})
		q, okQ := value(mfs, "kube_convergence_webhook_slow_ratio", map[string]string{"webhook": "quick.kce.test", "type": "validating"})
		return okN && okQ && n == 1 && q == 0, fmt.Sprintf("near %v (%v), quick %v (%v)", n, okN, q, okQ)
	})
	// A Prometheus that does not scrape the API server pages from the
	// exporter's own reading: KubeConvergenceWebhookSlow holds for near
	// (pending; `for` is promtool's), never for quick; here, with the API
	// server's histogram, it stays silent (NearTimeout has it).
	own := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		Targets:   []sandbox.ScrapeTarget{{Job: "kube-convergence-exporter", Addr: addr, Extra: map[string]any{"honor_labels": true}}},
		RuleFiles: []string{"../rules/kube-convergence-webhooks.rules.yml"},
	})
	if _, err := own.WaitFor(ctx, `ALERTS{alertname="KubeConvergenceWebhookSlow", webhook="near.kce.test", type="validating", alertstate="pending"}`,
		func(v model.Vector) bool { return len(v) == 1 }, 60*time.Second); err != nil {
		t.Errorf("no KubeConvergenceWebhookSlow for near.kce.test without API server scraping: %v", err)
	}
	for p, name := range map[*sandbox.Prometheus]string{own: "without", prom: "with"} {
		if n := count(ctx, t, p, `count(ALERTS{alertname="KubeConvergenceWebhookSlow", webhook="quick.kce.test"})`); n != 0 {
			t.Errorf("%s API server scraping: quick.kce.test has %d Slow alerts", name, n)
		}
	}
	if n := count(ctx, t, prom, `count(ALERTS{alertname="KubeConvergenceWebhookSlow"})`); n != 0 {
		t.Errorf("with API server scraping: %d Slow alerts besides NearTimeout", n)
	}
	documented(t, e.scrape())
}
