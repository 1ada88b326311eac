package webhooks

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
)

// The corpus in testdata/webhooks holds the Validating- and
// MutatingWebhookConfigurations that six projects install by default, as
// their charts render them with default values (Kyverno's as its
// controllers register them), with the Services they call; each file's
// header says where it comes from and how to regenerate it, and
// docs/webhooks.md "Stock installs" tabulates the result. This test audits
// every webhook as it runs in a live install and pins the findings: a
// finding here that the project's documentation would call a false alarm
// is a bug in the audit (or in the spec it follows), not in the project.

// corpusNow is after the renderings of 2026-12-03: the certificates Helm
// generated then (AWS Load Balancer Controller, Linkerd) are valid at it.
var corpusNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// corpusPolicy is the audit's default configuration (internal/config), the
// exporter running in monitoring.
var corpusPolicy = Policy{MaxTimeout: 10 * time.Second, CAExpiryWarning: 720 * time.Hour, OwnNamespace: "monitoring"}

// A corpusProject is one file and the install it models.
type corpusProject struct {
	file string
	// namespace is where the project's documentation installs it; labels
	// are the ones its chart or install steps give that Namespace, besides
	// kubernetes.io/metadata.name (the API server's).
	namespace string
	labels    map[string]string
	// live turns a rendered configuration into what the project's own
	// controllers keep on a running install (nil: as rendered). Empty
	// caBundles are filled for every project, see fillCABundles.
	live func(*admissionv1.ValidatingWebhookConfiguration)
	// want holds the findings of every webhook of the file, keyed
	// "type configuration/webhook": nil for none.
	want map[string][]string
}

var corpus = []corpusProject{{
	file:      "cert-manager.yaml",
	namespace: "cert-manager",
	want: map[string][]string{
		// none: its only rule is CREATE of cert-manager.io
		// certificaterequests, so neither its 30 s timeout nor its missing
		// selectors reach a builtin resource (no builtin reach).
		"mutating cert-manager-webhook/webhook.cert-manager.io": nil,
		// none: "*/*" only on cert-manager.io and acme.cert-manager.io, its
		// own groups; an outage blocks cert-manager's resources alone.
		"validating cert-manager-webhook/webhook.cert-manager.io": nil,
	},
}, {
	file:      "istio.yaml",
	namespace: "istio-system",
	// istiod's validation controller sets Fail once its endpoint answers
	// (pkg/webhooks/validation/controller/controller.go
	// updateValidatingWebhookConfiguration); the chart renders Ignore for
	// the first install only.
	live: func(c *admissionv1.ValidatingWebhookConfiguration) {
		if c.Name == "istio-validator-istio-system" {
			for i := range c.Webhooks {
				c.Webhooks[i].FailurePolicy = ptr.To(admissionv1.Fail)
			}
		}
	},
	want: map[string][]string{
		// none: opt-in, only namespaces labelled istio.io/rev=default.
		"mutating istio-sidecar-injector/rev.namespace.sidecar-injector.istio.io": nil,
		// none: any unlabelled namespace, but only pods labelled
		// istio.io/rev=default (not istiod's own: app=istiod, istio=pilot).
		"mutating istio-sidecar-injector/rev.object.sidecar-injector.istio.io": nil,
		// none: opt-in, only namespaces labelled istio-injection=enabled.
		"mutating istio-sidecar-injector/namespace.sidecar-injector.istio.io": nil,
		// none: any unlabelled namespace, but only pods labelled
		// sidecar.istio.io/inject=true.
		"mutating istio-sidecar-injector/object.sidecar-injector.istio.io": nil,
		// none: Fail once istiod runs, but only Istio's own groups, and
		// only objects labelled istio.io/rev=default.
		"validating istio-validator-istio-system/rev.validation.istio.io": nil,
	},
}, {
	file:      "gatekeeper.yaml",
	namespace: "gatekeeper-system",
	// The chart's post-install Job gatekeeper-update-namespace-label
	// (templates/namespace-post-install.yaml, on by default).
	labels: map[string]string{
		"admission.gatekeeper.sh/ignore":             "no-self-managing",
		"pod-security.kubernetes.io/audit":           "restricted",
		"pod-security.kubernetes.io/audit-version":   "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		"pod-security.kubernetes.io/warn-version":    "latest",
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "v1.24",
	},
	want: map[string][]string{
		// none: every resource of every namespace but its own, yet Ignore
		// (an outage lets writes through unchecked, which
		// KubeConvergenceWebhookFailOpen reports) with a 3 s timeout, and
		// its namespaceSelector is not empty.
		"validating gatekeeper-validating-webhook-configuration/validation.gatekeeper.sh": nil,
		// none: Fail, but it gates only Namespace objects (cluster-scoped:
		// no write of an object in kube-system or monitoring reaches it),
		// CREATE and UPDATE, within 3 s.
		"validating gatekeeper-validating-webhook-configuration/check-ignore-label.gatekeeper.sh": nil,
		// none: Ignore with a 1 s timeout, namespaceSelector set.
		"mutating gatekeeper-mutating-webhook-configuration/mutation.gatekeeper.sh": nil,
	},
}, {
	file:      "kyverno.yaml",
	namespace: "kyverno",
	want: map[string][]string{
		// none: Fail and no selector, but only Kyverno's own groups
		// (kyverno.io, policies.kyverno.io): an outage blocks policy writes.
		"validating kyverno-policy-validating-webhook-cfg/validate-policy.kyverno.svc": nil,
		// none: the same, kyverno.io policies only.
		"mutating kyverno-policy-mutating-webhook-cfg/mutate-policy.kyverno.svc": nil,
		// none: UPDATE of leases, but Ignore and only objects labelled
		// app.kubernetes.io/name=kyverno (its own health Lease): node
		// heartbeats never reach it.
		"mutating kyverno-verify-mutating-webhook-cfg/monitor-webhooks.kyverno.svc": nil,
		// none: kyverno.io policyexceptions only.
		"validating kyverno-exception-validating-webhook-cfg/kyverno-svc.kyverno.svc": nil,
		// none: policies.kyverno.io policyexceptions only.
		"validating kyverno-cel-exception-validating-webhook-cfg/kyverno-svc.kyverno.svc": nil,
		// none: kyverno.io globalcontextentries only.
		"validating kyverno-global-context-validating-webhook-cfg/kyverno-svc.kyverno.svc": nil,
		// none: kyverno.io cleanup policies only.
		"validating kyverno-cleanup-validating-webhook-cfg/kyverno-cleanup-controller.kyverno.svc": nil,
		// none: every resource, but Ignore and only objects that carry the
		// cleanup.kyverno.io/ttl label.
		"validating kyverno-ttl-validating-webhook-cfg/kyverno-cleanup-controller.kyverno.svc": nil,
		// kyverno-resource-validating/mutating-webhook-cfg have no webhook
		// until a policy exists.
	},
}, {
	file:      "aws-load-balancer-controller.yaml",
	namespace: "kube-system",
	want: map[string][]string{
		// none: Ignore, and opt-in namespaces
		// (elbv2.k8s.aws/pod-readiness-gate-inject=enabled).
		"mutating aws-load-balancer-webhook/mpod.elbv2.k8s.aws": nil,
		// none: Fail, but opt-in namespaces
		// (elbv2.k8s.aws/quic-server-id-inject=enabled).
		"mutating aws-load-balancer-webhook/quicid.elbv2.k8s.aws": nil,
		"mutating aws-load-balancer-webhook/mservice.elbv2.k8s.aws": {
			// every Service CREATE of the cluster: no namespaceSelector,
			// and its objectSelector (app.kubernetes.io/name NotIn
			// [aws-load-balancer-controller]) selects unlabelled Services.
			Unscoped,
			// with Fail, no Service can be created anywhere while the
			// controller is down.
			FailClosedUnscoped,
			// kube-system's Services (kube-dns; the controller runs there
			// too) are among them.
			MatchesKubeSystem,
			// and so are the monitoring namespace's.
			MatchesOwnNamespace,
		},
		// none: Fail, but opt-in namespaces
		// (elbv2.k8s.aws/alb-target-control-agent-injection=enabled).
		"mutating aws-load-balancer-webhook/alb-target-control.namespace.elbv2.k8s.aws": nil,
		// none: any namespace without that label, but only pods labelled
		// elbv2.k8s.aws/alb-target-control-agent-inject=true.
		"mutating aws-load-balancer-webhook/alb-target-control.object.elbv2.k8s.aws": nil,
		// none: elbv2.k8s.aws targetgroupbindings only.
		"mutating aws-load-balancer-webhook/mtargetgroupbinding.elbv2.k8s.aws": nil,
		// none: elbv2.k8s.aws ingressclassparams only.
		"validating aws-load-balancer-webhook/vingressclassparams.elbv2.k8s.aws": nil,
		// none: elbv2.k8s.aws targetgroupbindings only.
		"validating aws-load-balancer-webhook/vtargetgroupbinding.elbv2.k8s.aws": nil,
		"validating aws-load-balancer-webhook/vingress.elbv2.k8s.aws": {
			// every Ingress CREATE and UPDATE of the cluster, whatever its
			// class: no selector at all.
			Unscoped,
			// with Fail, no Ingress can be created or changed anywhere
			// while the controller is down.
			FailClosedUnscoped,
			// kube-system's Ingresses are among them.
			MatchesKubeSystem,
			// and so are the monitoring namespace's (Grafana's, Prometheus').
			MatchesOwnNamespace,
		},
	},
}, {
	file:      "linkerd.yaml",
	namespace: "linkerd",
	want: map[string][]string{
		// none: Ignore (webhookFailurePolicy), 10 s, kube-system excluded
		// by name.
		"mutating linkerd-proxy-injector-webhook-config/linkerd-proxy-injector.linkerd.io": nil,
		// none: Ignore, linkerd.io serviceprofiles only.
		"validating linkerd-sp-validator-webhook-config/linkerd-sp-validator.linkerd.io": nil,
		// none: Ignore, policy.linkerd.io and gateway.networking.k8s.io
		// (CRDs, not builtin groups) only.
		"validating linkerd-policy-validator-webhook-config/linkerd-policy-validator.linkerd.io": nil,
	},
}}

func TestCorpus(t *testing.T) {
	// What cert-manager's cainjector, istiod, Gatekeeper's rotator and
	// Kyverno put into the caBundles their charts leave empty: a CA valid
	// for a year from corpusNow.
	ca := caPEM(t, corpusNow.Add(365*24*time.Hour))
	for i, p := range corpus {
		t.Run(strings.TrimSuffix(p.file, ".yaml"), func(t *testing.T) {
			header, vwcs, mwcs, svcs := corpusFile(t, p.file)
			// The header documents the rendering: the command and who fills
			// the caBundle.
			for _, s := range []string{"# Project: ", "helm template ", "# caBundle: "} {
				if !strings.Contains(header, s) {
					t.Errorf("header lacks %q", s)
				}
			}
			var hooks []admission.Webhook
			for _, c := range vwcs {
				if p.live != nil {
					p.live(c)
				}
				for j := range c.Webhooks {
					fillCABundle(&c.Webhooks[j].ClientConfig, ca)
				}
				hooks = append(hooks, admission.FromValidating(c)...)
			}
			for _, c := range mwcs {
				for j := range c.Webhooks {
					fillCABundle(&c.Webhooks[j].ClientConfig, ca)
				}
				hooks = append(hooks, admission.FromMutating(c)...)
			}
			cluster := corpusCluster(i, p, svcs)
			seen := map[string]bool{}
			for _, w := range hooks {
				key := w.Type + " " + w.Configuration + "/" + w.Name
				seen[key] = true
				t.Run(w.Type+"/"+w.Configuration+"/"+w.Name, func(t *testing.T) {
					want, ok := p.want[key]
					if !ok {
						t.Fatalf("%s: no expectation in the table", key)
					}
					a := Evaluate(w, cluster, corpusPolicy, corpusNow)
					// Every bundle, rendered or filled, holds a CA valid
					// beyond the warning window.
					if a.CAErr != nil || a.CAExpiry.Before(corpusNow.Add(corpusPolicy.CAExpiryWarning)) {
						t.Errorf("%s: caBundle expiry %v, %v", key, a.CAExpiry, a.CAErr)
					}
					got := slices.Sorted(slices.Values(a.Findings))
					want = slices.Sorted(slices.Values(want))
					if !slices.Equal(got, want) {
						t.Errorf("%s: findings %q, want %q", key, got, want)
					}
				})
			}
			for key := range p.want {
				if !seen[key] {
					t.Errorf("%s: expected, but not in %s", key, p.file)
				}
			}
		})
	}
}

// corpusFile decodes testdata/webhooks/<name>: the header comment, then
// webhook configurations and Services only, strictly (a misspelt field in
// a hand-written document fails here).
func corpusFile(t *testing.T, name string) (string, []*admissionv1.ValidatingWebhookConfiguration, []*admissionv1.MutatingWebhookConfiguration, []*corev1.Service) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		header string
		vwcs   []*admissionv1.ValidatingWebhookConfiguration
		mwcs   []*admissionv1.MutatingWebhookConfiguration
		svcs   []*corev1.Service
	)
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for n := 0; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", name, n, err)
		}
		var obj any
		switch meta.Kind {
		case "":
			if n == 0 {
				header = string(doc)
				continue
			}
			t.Fatalf("%s document %d has no kind", name, n)
		case "ValidatingWebhookConfiguration":
			c := &admissionv1.ValidatingWebhookConfiguration{}
			vwcs, obj = append(vwcs, c), c
		case "MutatingWebhookConfiguration":
			c := &admissionv1.MutatingWebhookConfiguration{}
			mwcs, obj = append(mwcs, c), c
		case "Service":
			s := &corev1.Service{}
			svcs, obj = append(svcs, s), s
		default:
			t.Fatalf("%s document %d: kind %s; the corpus holds webhook configurations and Services only", name, n, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", name, n, meta.Kind, err)
		}
	}
	return header, vwcs, mwcs, svcs
}

// corpusCluster is the running install: Namespaces kube-system,
// kube-node-lease, default and the project's, with the labels the API
// server and the install give them; the file's Services with a ClusterIP
// as the API server allocates one (10.96.0.0/12, kube-apiserver's default
// service range), each with 2 ready endpoints.
func corpusCluster(project int, p corpusProject, svcs []*corev1.Service) Cluster {
	namespaces := map[string]map[string]string{}
	for _, ns := range []string{"kube-system", "kube-node-lease", "default", p.namespace} {
		namespaces[ns] = map[string]string{"kubernetes.io/metadata.name": ns}
	}
	for k, v := range p.labels {
		namespaces[p.namespace][k] = v
	}
	services := map[string]*corev1.Service{}
	for i, s := range svcs {
		if s.Namespace == "" {
			s.Namespace = p.namespace // helm template writes it; the API server would take the release's
		}
		if s.Spec.Type == "" {
			s.Spec.Type = corev1.ServiceTypeClusterIP
		}
		if s.Spec.ClusterIP != corev1.ClusterIPNone {
			s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", project+1, i+10)
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
		services[s.Namespace+"/"+s.Name] = s
	}
	return Cluster{
		NamespaceLabels: func(ns string) (map[string]string, bool) { l, ok := namespaces[ns]; return l, ok },
		Service: func(ns, name string) (*corev1.Service, bool) {
			s, ok := services[ns+"/"+name]
			return s, ok
		},
		ReadyEndpoints: func(ns, name string) int {
			if _, ok := services[ns+"/"+name]; ok {
				return 2
			}
			return 0
		},
	}
}

// fillCABundle puts ca into a caBundle the chart left empty; a bundle the
// chart filled (Helm-generated, AWS Load Balancer Controller and Linkerd)
// stays as rendered.
func fillCABundle(c *admissionv1.WebhookClientConfig, ca []byte) {
	if len(c.CABundle) == 0 {
		c.CABundle = ca
	}
}
