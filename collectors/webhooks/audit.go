package webhooks

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
)

// Findings, the `finding` label. docs/webhooks.md gives each one's meaning
// and remedy.
const (
	TimeoutTooLong      = "timeout_too_long"
	Unscoped            = "unscoped"
	FailClosedUnscoped  = "fail_closed_unscoped"
	MatchesKubeSystem   = "matches_kube_system"
	MatchesOwnNamespace = "matches_own_namespace"
	SelfBlocking        = "self_blocking"
	WildcardResources   = "wildcard_resources"
	WildcardOperations  = "wildcard_operations"
	DryRunUnsafe        = "dry_run_unsafe"
	NoReadyEndpoints    = "no_ready_endpoints"
	CABundleExpiring    = "ca_bundle_expiring"
)

// AllFindings lists every finding, in the order of docs/webhooks.md.
var AllFindings = []string{TimeoutTooLong, Unscoped, FailClosedUnscoped, MatchesKubeSystem, MatchesOwnNamespace,
	SelfBlocking, WildcardResources, WildcardOperations, DryRunUnsafe, NoReadyEndpoints, CABundleExpiring}

// Cluster is what the audit reads from live objects besides the webhook.
type Cluster struct {
	// NamespaceLabels returns a live Namespace's labels; false if absent.
	NamespaceLabels func(ns string) (map[string]string, bool)
	// Service returns a live Service; false if absent.
	Service func(ns, name string) (*corev1.Service, bool)
	// ReadyEndpoints counts the ready endpoints in a Service's EndpointSlices
	// (records.ReadyEndpoint: terminating endpoints are not ready).
	ReadyEndpoints func(ns, name string) int
	// Sees reports whether this process reads namespace ns's Services and
	// EndpointSlices (nil: every namespace). A shard sees only its own
	// namespaces (docs/sharding.md): the findings judged on a webhook's
	// Service, self_blocking and no_ready_endpoints, are left out for a
	// Service it does not see, rather than reported from a cache that
	// lacks it.
	Sees func(ns string) bool
}

// Policy holds the audit's thresholds (config.WebhookAudit with defaults).
type Policy struct {
	MaxTimeout      time.Duration
	CAExpiryWarning time.Duration
	// OwnNamespace is the exporter's namespace; "" skips matches_own_namespace.
	OwnNamespace string
}

// Audit is the result of evaluating one webhook.
type Audit struct {
	Findings []string // in AllFindings order
	// CAExpiry is the earliest NotAfter in caBundle; zero when the bundle is
	// empty or unparsable (CAErr says which).
	CAExpiry time.Time
	CAErr    error
}

// ErrNoCABundle: an empty caBundle (a URL webhook may rely on system roots).
var ErrNoCABundle = errors.New("no caBundle")

// Evaluate audits w against the live cluster at now.
func Evaluate(w admission.Webhook, c Cluster, p Policy, now time.Time) Audit {
	var a Audit
	has := map[string]bool{}
	fail := w.FailurePolicy == string(admissionv1.Fail)
	has[TimeoutTooLong] = w.Timeout > p.MaxTimeout
	unscoped := selectorEmpty(w.NamespaceSelector) && selectorEmpty(w.ObjectSelector) && w.MatchConditions == 0
	has[Unscoped] = unscoped
	has[FailClosedUnscoped] = fail && unscoped
	has[MatchesKubeSystem] = matchesNamespace(w, c, metav1.NamespaceSystem)
	if p.OwnNamespace != "" {
		has[MatchesOwnNamespace] = matchesNamespace(w, c, p.OwnNamespace)
	}
	if w.Service != nil && fail && (c.Sees == nil || c.Sees(w.Service.Namespace)) {
		has[SelfBlocking] = selfBlocking(w, c)
		has[NoReadyEndpoints] = noReadyEndpoints(w, c)
	}
	for _, r := range w.Rules {
		has[WildcardResources] = has[WildcardResources] || slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*")
		has[WildcardOperations] = has[WildcardOperations] || slices.Contains(r.Operations, admissionv1.OperationAll)
	}
	has[DryRunUnsafe] = w.SideEffects == string(admissionv1.SideEffectClassUnknown) || w.SideEffects == string(admissionv1.SideEffectClassSome)
	a.CAExpiry, a.CAErr = EarliestExpiry(w.CABundle)
	has[CABundleExpiring] = a.CAErr == nil && a.CAExpiry.Sub(now) < p.CAExpiryWarning
	for _, f := range AllFindings {
		if has[f] {
			a.Findings = append(a.Findings, f)
		}
	}
	return a
}

// selectorEmpty: nil or {} (the API server defaults both selectors to {},
// which matches everything).
func selectorEmpty(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// matchesNamespace: some rule covers namespaced resources and the
// namespaceSelector matches the live Namespace ns (not evaluated when ns
// does not exist).
func matchesNamespace(w admission.Webhook, c Cluster, ns string) bool {
	l, ok := c.NamespaceLabels(ns)
	if !ok || !w.SelectsNamespace(l) {
		return false
	}
	for _, r := range w.Rules {
		if r.Scope == nil || *r.Scope != admissionv1.ClusterScope {
			return true
		}
	}
	return false
}

// selfBlocking: the webhook gates pod creation in its own Service's
// namespace, for pods labelled like the Service's selector, so it can
// block the pods that would serve it. matchConditions (CEL) are not
// evaluated: they may exclude the webhook's pods, docs/webhooks.md says so.
// noReadyEndpoints: the webhook's Service has no ready endpoint. An
// ExternalName Service is the exception: the API server calls the webhook
// at its DNS name (k8s.io/apiserver pkg/util/proxy ResolveCluster), and the
// EndpointSlice controller publishes nothing for it
// (records.PublishesSelectedPods). A Service without a selector counts its
// hand-made EndpointSlices like any other; a missing Service has none.
func noReadyEndpoints(w admission.Webhook, c Cluster) bool {
	if svc, ok := c.Service(w.Service.Namespace, w.Service.Name); ok && svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return c.ReadyEndpoints(w.Service.Namespace, w.Service.Name) == 0
}

func selfBlocking(w admission.Webhook, c Cluster) bool {
	nsLabels, ok := c.NamespaceLabels(w.Service.Namespace)
	if !ok {
		// The API server evaluates a namespaceSelector on the Namespace's
		// labels; a Namespace not yet seen has at least its name label.
		nsLabels = map[string]string{"kubernetes.io/metadata.name": w.Service.Namespace}
	}
	if !w.SelectsNamespace(nsLabels) {
		return false
	}
	var podLabels map[string]string
	if svc, ok := c.Service(w.Service.Namespace, w.Service.Name); ok {
		podLabels = svc.Spec.Selector
	}
	if !w.SelectsObject(podLabels) {
		return false
	}
	return admission.RulesMatch(w.Rules, admission.Request{Operation: admissionv1.Create, Group: "", Version: "v1", Resource: "pods", Namespaced: true})
}

// EarliestExpiry returns the earliest NotAfter among the PEM certificates
// in bundle. An empty bundle gives ErrNoCABundle; a bundle with no
// parsable certificate gives an error naming why.
func EarliestExpiry(bundle []byte) (time.Time, error) {
	if len(strings.TrimSpace(string(bundle))) == 0 {
		return time.Time{}, ErrNoCABundle
	}
	var earliest time.Time
	rest := bundle
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("caBundle certificate %d: %w", n+1, err)
		}
		n++
		if earliest.IsZero() || cert.NotAfter.Before(earliest) {
			earliest = cert.NotAfter
		}
	}
	if n == 0 {
		return time.Time{}, errors.New("caBundle holds no PEM certificate")
	}
	return earliest, nil
}
