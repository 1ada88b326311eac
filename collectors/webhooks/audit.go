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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Webhook types, the `type` label: the API server's own metrics say "admit"
// for mutating webhooks; the rules map it to "mutating".
const (
	Validating = "validating"
	Mutating   = "mutating"
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

// Webhook is one webhook of a Validating- or MutatingWebhookConfiguration,
// with the API server's v1 defaults applied where a field is unset.
type Webhook struct {
	Configuration, Name, Type string
	FailurePolicy             string // Fail, Ignore
	SideEffects               string // None, NoneOnDryRun, Unknown, Some
	MatchPolicy               string // Exact, Equivalent
	ReinvocationPolicy        string // Never, IfNeeded; "" for validating webhooks
	// Service is the backing Service (namespace, name); nil for a URL client.
	Service           *admissionv1.ServiceReference
	CABundle          []byte
	Timeout           time.Duration
	Rules             []admissionv1.RuleWithOperations
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	MatchConditions   int
}

// Client is the `client` label: service or url.
func (w Webhook) Client() string {
	if w.Service != nil {
		return "service"
	}
	return "url"
}

// v1 defaults (k8s.io/api admissionregistration/v1 types.go): failurePolicy
// Fail, matchPolicy Equivalent, timeoutSeconds 10, reinvocationPolicy Never.
// The API server writes them on create; objects decoded from files may lack
// them.
func orDefault[T ~string](p *T, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return string(*p)
}

func timeoutOf(s *int32) time.Duration {
	if s == nil {
		return 10 * time.Second
	}
	return time.Duration(*s) * time.Second
}

// FromValidating returns the webhooks of a validating configuration.
func FromValidating(c *admissionv1.ValidatingWebhookConfiguration) []Webhook {
	out := make([]Webhook, 0, len(c.Webhooks))
	for _, h := range c.Webhooks {
		out = append(out, Webhook{
			Configuration: c.Name, Name: h.Name, Type: Validating,
			FailurePolicy: orDefault(h.FailurePolicy, string(admissionv1.Fail)),
			SideEffects:   orDefault(h.SideEffects, ""),
			MatchPolicy:   orDefault(h.MatchPolicy, string(admissionv1.Equivalent)),
			Service:       h.ClientConfig.Service, CABundle: h.ClientConfig.CABundle,
			Timeout: timeoutOf(h.TimeoutSeconds), Rules: h.Rules,
			NamespaceSelector: h.NamespaceSelector, ObjectSelector: h.ObjectSelector,
			MatchConditions: len(h.MatchConditions),
		})
	}
	return out
}

// FromMutating returns the webhooks of a mutating configuration.
func FromMutating(c *admissionv1.MutatingWebhookConfiguration) []Webhook {
	out := make([]Webhook, 0, len(c.Webhooks))
	for _, h := range c.Webhooks {
		out = append(out, Webhook{
			Configuration: c.Name, Name: h.Name, Type: Mutating,
			FailurePolicy:      orDefault(h.FailurePolicy, string(admissionv1.Fail)),
			SideEffects:        orDefault(h.SideEffects, ""),
			MatchPolicy:        orDefault(h.MatchPolicy, string(admissionv1.Equivalent)),
			ReinvocationPolicy: orDefault(h.ReinvocationPolicy, string(admissionv1.NeverReinvocationPolicy)),
			Service:            h.ClientConfig.Service, CABundle: h.ClientConfig.CABundle,
			Timeout: timeoutOf(h.TimeoutSeconds), Rules: h.Rules,
			NamespaceSelector: h.NamespaceSelector, ObjectSelector: h.ObjectSelector,
			MatchConditions: len(h.MatchConditions),
		})
	}
	return out
}

// Cluster is what the audit reads from live objects besides the webhook.
type Cluster struct {
	// NamespaceLabels returns a live Namespace's labels; false if absent.
	NamespaceLabels func(ns string) (map[string]string, bool)
	// Service returns a live Service; false if absent.
	Service func(ns, name string) (*corev1.Service, bool)
	// ReadyEndpoints counts the ready endpoints in a Service's EndpointSlices
	// (records.ReadyEndpoint: terminating endpoints are not ready).
	ReadyEndpoints func(ns, name string) int
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
func Evaluate(w Webhook, c Cluster, p Policy, now time.Time) Audit {
	var a Audit
	has := map[string]bool{}
	fail := w.FailurePolicy == string(admissionv1.Fail)
	has[TimeoutTooLong] = w.Timeout > p.MaxTimeout
	unscoped := selectorEmpty(w.NamespaceSelector) && selectorEmpty(w.ObjectSelector) && w.MatchConditions == 0
	has[Unscoped] = unscoped
	has[FailClosedUnscoped] = fail && unscoped
	has[MatchesKubeSystem] = w.matchesNamespace(c, metav1.NamespaceSystem)
	if p.OwnNamespace != "" {
		has[MatchesOwnNamespace] = w.matchesNamespace(c, p.OwnNamespace)
	}
	if w.Service != nil && fail {
		has[SelfBlocking] = w.selfBlocking(c)
		has[NoReadyEndpoints] = w.noReadyEndpoints(c)
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

// selects reports whether s matches set; nil is {} (everything). An invalid
// selector matches nothing: the API server refuses to store one.
func selects(s *metav1.LabelSelector, set map[string]string) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(set))
}

// matchesNamespace: some rule covers namespaced resources and the
// namespaceSelector matches the live Namespace ns (not evaluated when ns
// does not exist).
func (w Webhook) matchesNamespace(c Cluster, ns string) bool {
	l, ok := c.NamespaceLabels(ns)
	if !ok || !selects(w.NamespaceSelector, l) {
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
func (w Webhook) noReadyEndpoints(c Cluster) bool {
	if svc, ok := c.Service(w.Service.Namespace, w.Service.Name); ok && svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return c.ReadyEndpoints(w.Service.Namespace, w.Service.Name) == 0
}

func (w Webhook) selfBlocking(c Cluster) bool {
	nsLabels, ok := c.NamespaceLabels(w.Service.Namespace)
	if !ok {
		// The API server evaluates a namespaceSelector on the Namespace's
		// labels; a Namespace not yet seen has at least its name label.
		nsLabels = map[string]string{"kubernetes.io/metadata.name": w.Service.Namespace}
	}
	if !selects(w.NamespaceSelector, nsLabels) {
		return false
	}
	var podLabels map[string]string
	if svc, ok := c.Service(w.Service.Namespace, w.Service.Name); ok {
		podLabels = svc.Spec.Selector
	}
	if !selects(w.ObjectSelector, podLabels) {
		return false
	}
	return RulesMatch(w.Rules, Request{Operation: admissionv1.Create, Group: "", Version: "v1", Resource: "pods", Namespaced: true})
}

// Request is what a rule is matched against.
type Request struct {
	Operation                             admissionv1.OperationType
	Group, Version, Resource, Subresource string
	Namespaced                            bool
}

// RulesMatch reports whether any rule matches r, as the API server's
// admission rule matcher does (k8s.io/apiserver
// pkg/admission/plugin/webhook/predicates/rules, Matcher.resource and
// Matcher.scope): operations, groups and versions by "*" or equality; a
// resource entry "name/sub" matches when name is "*" or the resource and
// sub is "*" or the subresource, an entry without "/" having sub "". So
// "*" is every resource without subresources, "pods/*" is pods and every
// pods subresource, "*/*" is everything, "*/status" every status
// subresource.
func RulesMatch(rules []admissionv1.RuleWithOperations, r Request) bool {
	for _, rule := range rules {
		if ruleMatches(rule, r) {
			return true
		}
	}
	return false
}

func ruleMatches(rule admissionv1.RuleWithOperations, r Request) bool {
	if !slices.ContainsFunc(rule.Operations, func(o admissionv1.OperationType) bool {
		return o == admissionv1.OperationAll || o == r.Operation
	}) {
		return false
	}
	if !matchesAny(rule.APIGroups, r.Group) || !matchesAny(rule.APIVersions, r.Version) {
		return false
	}
	if rule.Scope != nil {
		switch *rule.Scope {
		case admissionv1.NamespacedScope:
			if !r.Namespaced {
				return false
			}
		case admissionv1.ClusterScope:
			if r.Namespaced {
				return false
			}
		case admissionv1.AllScopes:
		default: // the API server's matcher: an unknown scope matches nothing
			return false
		}
	}
	for _, res := range rule.Resources {
		name, sub, _ := strings.Cut(res, "/")
		if (name == "*" || name == r.Resource) && (sub == "*" || sub == r.Subresource) {
			return true
		}
	}
	return false
}

func matchesAny(list []string, v string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return s == "*" || s == v })
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

// Matches reports whether w may be called for req on an object with
// objLabels in a namespace with nsLabels. Two things are not evaluated, so
// they give possible matches: matchConditions (CEL), and matchPolicy
// Equivalent, under which the API server also calls the webhook when its
// rules match the same resource in another group or version (deployments
// in extensions/v1beta1 for apps/v1), converting the object
// (k8s.io/apiserver pkg/admission/plugin/webhook/generic/webhook.go,
// ShouldCallHook with the equivalent resource registry). The registry is
// the API server's; here a rule that names req's resource (not "*": no
// other group's resources are equivalent to it) and matches req with its
// groups and versions ignored counts.
func (w Webhook) Matches(req Request, nsLabels, objLabels map[string]string) bool {
	rules := RulesMatch(w.Rules, req) ||
		(w.MatchPolicy == string(admissionv1.Equivalent) && RulesMatch(anyGroupVersion(w.Rules), req))
	return rules && selects(w.NamespaceSelector, nsLabels) && selects(w.ObjectSelector, objLabels)
}

// anyGroupVersion is rules with every group and version allowed, keeping
// only the resources named explicitly.
func anyGroupVersion(rules []admissionv1.RuleWithOperations) []admissionv1.RuleWithOperations {
	out := make([]admissionv1.RuleWithOperations, 0, len(rules))
	for _, r := range rules {
		r.APIGroups, r.APIVersions = []string{"*"}, []string{"*"}
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool {
			name, _, _ := strings.Cut(res, "/")
			return name == "*"
		})
		out = append(out, r)
	}
	return out
}

// List returns the webhooks of the configurations in two informers' stores
// (validating, mutating).
func List(validating, mutating cache.Store) []Webhook {
	var out []Webhook
	for _, o := range validating.List() {
		if v, ok := o.(*admissionv1.ValidatingWebhookConfiguration); ok {
			out = append(out, FromValidating(v)...)
		}
	}
	for _, o := range mutating.List() {
		if m, ok := o.(*admissionv1.MutatingWebhookConfiguration); ok {
			out = append(out, FromMutating(m)...)
		}
	}
	return out
}
