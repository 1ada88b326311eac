package webhooks

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"iter"
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
	TimeoutTooLong            = "timeout_too_long"
	Unscoped                  = "unscoped"
	FailClosedUnscoped        = "fail_closed_unscoped"
	MatchesKubeSystem         = "matches_kube_system"
	MatchesOwnNamespace       = "matches_own_namespace"
	SelfBlocking              = "self_blocking"
	WildcardResources         = "wildcard_resources"
	WildcardOperations        = "wildcard_operations"
	NodeHeartbeatLockout      = "node_heartbeat_lockout"
	DryRunUnsafe              = "dry_run_unsafe"
	NoReadyEndpoints          = "no_ready_endpoints"
	EndpointsUnknown          = "endpoints_unknown"
	ServiceMissing            = "service_missing"
	ServicePortMissing        = "service_port_missing"
	ServiceHeadless           = "service_headless"
	CABundleInvalid           = "ca_bundle_invalid"
	CABundleExpiring          = "ca_bundle_expiring"
	MatchConditionsUnanalysed = "match_conditions_unanalysed"
)

// AllFindings lists every finding, in the order of docs/webhooks.md.
var AllFindings = []string{TimeoutTooLong, Unscoped, FailClosedUnscoped, MatchesKubeSystem, MatchesOwnNamespace,
	SelfBlocking, WildcardResources, WildcardOperations, NodeHeartbeatLockout, DryRunUnsafe, NoReadyEndpoints,
	EndpointsUnknown, ServiceMissing, ServicePortMissing, ServiceHeadless, CABundleInvalid, CABundleExpiring,
	MatchConditionsUnanalysed}

// SliceState is what the audit knows of the EndpointSlices.
type SliceState int

const (
	// SlicesSyncing: the informer has not listed yet; no finding is judged
	// on endpoints (an empty cache is not "no endpoint").
	SlicesSyncing SliceState = iota
	// SlicesSynced: the informer has listed; ReadyEndpoints is the truth.
	SlicesSynced
	// SlicesForbidden: RBAC denies listing EndpointSlices; the audit
	// cannot tell (endpoints_unknown).
	SlicesForbidden
)

// Cluster is what the audit reads from live objects besides the webhook.
type Cluster struct {
	// NamespaceLabels returns a live Namespace's labels; false if absent.
	NamespaceLabels func(ns string) (map[string]string, bool)
	// Service returns a live Service; false if absent.
	Service func(ns, name string) (*corev1.Service, bool)
	// ServicesSynced: the Service informer has listed (a Service absent
	// before is not missing).
	ServicesSynced bool
	// ReadyEndpoints counts the ready endpoints in a Service's EndpointSlices
	// (records.ReadyEndpoint: terminating endpoints are not ready).
	ReadyEndpoints func(ns, name string) int
	Slices         SliceState
	// CA returns the earliest expiry of w's caBundle (EarliestExpiry); nil
	// computes it. The collector keeps it per configuration version: a
	// bundle of a megabyte is not parsed at every scrape.
	CA func(w admission.Webhook) (time.Time, error)
	// Sees reports whether this process reads namespace ns's Services and
	// EndpointSlices (nil: every namespace). A shard sees only its own
	// namespaces (docs/sharding.md): the findings judged on a webhook's
	// Service are left out for a Service it does not see, rather than
	// reported from a cache that lacks it.
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

// BuiltinGroups are the API groups a v1.37 kube-apiserver serves itself. A
// webhook whose rules reach none of them (only its project's own groups)
// can only hold up its own resources: the scope findings are about the
// cluster's.
var BuiltinGroups = []string{"", "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
	"apps", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io",
	"coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "flowcontrol.apiserver.k8s.io",
	"internal.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "policy", "rbac.authorization.k8s.io",
	"resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io"}

// clusterScoped are the cluster-scoped resources of the builtin groups
// (kube-apiserver v1.37 discovery): a rule naming one, whatever its scope
// says, gates no write in a namespace (for a Namespace the API server
// evaluates the namespaceSelector on the Namespace itself).
var clusterScoped = map[[2]string]bool{
	{"", "namespaces"}: true, {"", "nodes"}: true, {"", "persistentvolumes"}: true, {"", "componentstatuses"}: true,
	{"admissionregistration.k8s.io", "validatingwebhookconfigurations"}:   true,
	{"admissionregistration.k8s.io", "mutatingwebhookconfigurations"}:     true,
	{"admissionregistration.k8s.io", "validatingadmissionpolicies"}:       true,
	{"admissionregistration.k8s.io", "validatingadmissionpolicybindings"}: true,
	{"admissionregistration.k8s.io", "mutatingadmissionpolicies"}:         true,
	{"admissionregistration.k8s.io", "mutatingadmissionpolicybindings"}:   true,
	{"apiextensions.k8s.io", "customresourcedefinitions"}:                 true, {"apiregistration.k8s.io", "apiservices"}: true,
	{"authentication.k8s.io", "tokenreviews"}: true, {"authentication.k8s.io", "selfsubjectreviews"}: true,
	{"authorization.k8s.io", "subjectaccessreviews"}: true, {"authorization.k8s.io", "selfsubjectaccessreviews"}: true,
	{"authorization.k8s.io", "selfsubjectrulesreviews"}:   true,
	{"certificates.k8s.io", "certificatesigningrequests"}: true, {"certificates.k8s.io", "clustertrustbundles"}: true,
	{"flowcontrol.apiserver.k8s.io", "flowschemas"}: true, {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"}: true,
	{"internal.apiserver.k8s.io", "storageversions"}: true,
	{"networking.k8s.io", "ingressclasses"}:          true, {"networking.k8s.io", "ipaddresses"}: true, {"networking.k8s.io", "servicecidrs"}: true,
	{"node.k8s.io", "runtimeclasses"}:             true,
	{"rbac.authorization.k8s.io", "clusterroles"}: true, {"rbac.authorization.k8s.io", "clusterrolebindings"}: true,
	{"resource.k8s.io", "deviceclasses"}: true, {"resource.k8s.io", "resourceslices"}: true,
	{"scheduling.k8s.io", "priorityclasses"}: true,
	{"storage.k8s.io", "csidrivers"}:         true, {"storage.k8s.io", "csinodes"}: true, {"storage.k8s.io", "storageclasses"}: true,
	{"storage.k8s.io", "volumeattachments"}: true, {"storage.k8s.io", "volumeattributesclasses"}: true,
	{"storagemigration.k8s.io", "storageversionmigrations"}: true,
}

// The kubelet's identity: what it sends node heartbeats as.
var kubelet = admission.Call{Username: "system:node:*", UserGroups: []string{"system:nodes", "system:authenticated"}}

// Evaluate audits w against the live cluster at now. docs/webhooks.md,
// Findings, says each finding's rule; the scope findings follow the rules'
// groups, resources, operations and scope, the objectSelector (on an
// unlabelled object), the namespaceSelector (on the live Namespace) and the
// matchConditions the analyser reads (admission.Conditions).
func Evaluate(w admission.Webhook, c Cluster, p Policy, now time.Time) Audit {
	var a Audit
	has := map[string]bool{}
	fail := w.FailurePolicy == string(admissionv1.Fail)
	conds := w.Conditions()
	if conds.Analysed() {
		s := scope{w: w, c: c, conds: conds}
		builtin := s.reachesBuiltin()
		has[TimeoutTooLong] = builtin && w.Timeout > p.MaxTimeout
		has[Unscoped] = s.unscoped()
		has[FailClosedUnscoped] = fail && has[Unscoped]
		has[MatchesKubeSystem] = fail && s.namespace(metav1.NamespaceSystem)
		if p.OwnNamespace != "" {
			has[MatchesOwnNamespace] = fail && s.namespace(p.OwnNamespace)
		}
		has[WildcardResources] = fail && s.wildcardResources()
		has[WildcardOperations] = fail && builtin && slices.ContainsFunc(w.Rules, func(r admissionv1.RuleWithOperations) bool {
			return slices.Contains(r.Operations, admissionv1.OperationAll) && s.ruleReachesBuiltin(r)
		})
		has[NodeHeartbeatLockout] = fail && s.heartbeats()
		if w.Service != nil && fail && (c.Sees == nil || c.Sees(w.Service.Namespace)) {
			has[SelfBlocking] = s.selfBlocking()
		}
	} else {
		has[MatchConditionsUnanalysed] = true
	}
	has[DryRunUnsafe] = w.SideEffects == string(admissionv1.SideEffectClassUnknown) || w.SideEffects == string(admissionv1.SideEffectClassSome)
	if w.Service != nil && (c.Sees == nil || c.Sees(w.Service.Namespace)) {
		svc, found := c.Service(w.Service.Namespace, w.Service.Name)
		switch {
		case found:
			has[ServicePortMissing] = !servesPort(svc, w.Service.Port)
			has[ServiceHeadless] = svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == corev1.ClusterIPNone
		case c.ServicesSynced:
			has[ServiceMissing] = true
		}
		external := found && svc.Spec.Type == corev1.ServiceTypeExternalName
		if fail && !external && (found || c.ServicesSynced) {
			switch c.Slices {
			case SlicesSynced:
				has[NoReadyEndpoints] = c.ReadyEndpoints(w.Service.Namespace, w.Service.Name) == 0
			case SlicesForbidden:
				has[EndpointsUnknown] = true
			}
		}
	}
	if c.CA != nil {
		a.CAExpiry, a.CAErr = c.CA(w)
	} else {
		a.CAExpiry, a.CAErr = EarliestExpiry(w.CABundle)
	}
	switch {
	case a.CAErr == nil:
		has[CABundleExpiring] = a.CAExpiry.Sub(now) < p.CAExpiryWarning
	case errors.Is(a.CAErr, ErrNoCABundle):
		// A URL webhook without a bundle is verified with the system roots.
		has[CABundleInvalid] = w.Service != nil
	default:
		has[CABundleInvalid] = true
	}
	for _, f := range AllFindings {
		if has[f] {
			a.Findings = append(a.Findings, f)
		}
	}
	return a
}

// servesPort: the Service exposes port (clientConfig.service.port, 443 when
// unset: the v1 default).
func servesPort(svc *corev1.Service, port *int32) bool {
	want := int32(443)
	if port != nil {
		want = *port
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return true // called at its DNS name, on the port asked
	}
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == want })
}

// scope answers what a webhook can be called for.
type scope struct {
	w     admission.Webhook
	c     Cluster
	conds admission.Conditions
}

// groupsOf are the builtin groups a rule names ("*" is all of them).
func builtinGroupsOf(r admissionv1.RuleWithOperations) []string {
	if slices.Contains(r.APIGroups, "*") {
		return BuiltinGroups
	}
	return slices.DeleteFunc(slices.Clone(r.APIGroups), func(g string) bool { return !slices.Contains(BuiltinGroups, g) })
}

// builtinResources yields the (group, resource) pairs of a rule's builtin
// groups, its resources without a subresource and "*" as "" (any).
func builtinResources(r admissionv1.RuleWithOperations) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, g := range builtinGroupsOf(r) {
			for _, res := range r.Resources {
				name, _, _ := strings.Cut(res, "/")
				if name == "*" {
					name = ""
				}
				if !yield(g, name) {
					return
				}
			}
		}
	}
}

// ruleReachesBuiltin: the rule can match a builtin resource that the
// conditions and the objectSelector let through.
func (s scope) ruleReachesBuiltin(r admissionv1.RuleWithOperations) bool {
	if len(r.Resources) == 0 || !s.w.SelectsObject(nil) {
		return false
	}
	for g, name := range builtinResources(r) {
		if s.conds.Admits(admission.Call{Group: g, Resource: name}) {
			return true
		}
	}
	return false
}

func (s scope) reachesBuiltin() bool {
	return slices.ContainsFunc(s.w.Rules, s.ruleReachesBuiltin)
}

// namespacedRule: the rule's scope includes namespaced resources.
func namespacedRule(r admissionv1.RuleWithOperations) bool {
	return r.Scope == nil || *r.Scope != admissionv1.ClusterScope
}

// inNamespace: some rule can be called for a write of a builtin namespaced
// resource in namespace ns ("" any namespace) that the conditions admit.
func (s scope) inNamespace(ns string) bool {
	if !s.w.SelectsObject(nil) {
		return false
	}
	for _, r := range s.w.Rules {
		if !namespacedRule(r) {
			continue
		}
		for g, name := range builtinResources(r) {
			if clusterScoped[[2]string{g, name}] {
				continue
			}
			if s.conds.Admits(admission.Call{Namespace: ns, Group: g, Resource: name}) {
				return true
			}
		}
	}
	return false
}

// namespaceLabels are ns's live labels; a Namespace not seen has its name
// label (which the API server sets on every Namespace).
func (s scope) namespaceLabels(ns string) map[string]string {
	if l, ok := s.c.NamespaceLabels(ns); ok {
		return l
	}
	return map[string]string{corev1.LabelMetadataName: ns}
}

// unscoped: called for builtin namespaced resources in every namespace.
func (s scope) unscoped() bool {
	return selectorEmpty(s.w.NamespaceSelector) && !s.conds.Narrows(admission.FieldNamespace) && s.inNamespace("")
}

// namespace: called for a write of a builtin namespaced resource in ns
// (selected by its live labels; a Namespace not seen has its name label).
func (s scope) namespace(ns string) bool {
	l := s.namespaceLabels(ns)
	return s.w.SelectsNamespace(l) && s.inNamespace(ns)
}

// wildcardResources: a rule of every resource in a builtin group (or "*")
// that unlabelled objects pass.
func (s scope) wildcardResources() bool {
	if !s.w.SelectsObject(nil) {
		return false
	}
	return slices.ContainsFunc(s.w.Rules, func(r admissionv1.RuleWithOperations) bool {
		wild := slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*")
		return wild && len(builtinGroupsOf(r)) > 0 && s.ruleReachesBuiltin(r)
	})
}

// heartbeats: called for the kubelet's Lease updates in kube-node-lease or
// its nodes and nodes/status updates.
func (s scope) heartbeats() bool {
	if !s.w.SelectsObject(nil) {
		return false
	}
	lease := admission.Request{Operation: admissionv1.Update, Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespaced: true}
	nsLabels := s.namespaceLabels(corev1.NamespaceNodeLease)
	call := kubelet
	call.Namespace, call.Group, call.Resource, call.Kind = corev1.NamespaceNodeLease, lease.Group, lease.Resource, "Lease"
	if s.w.Matches(lease, nsLabels, nil) && s.conds.Admits(call) {
		return true
	}
	for _, sub := range []string{"", "status"} {
		node := admission.Request{Operation: admissionv1.Update, Version: "v1", Resource: "nodes", Subresource: sub}
		call := kubelet
		call.Resource, call.Kind = "nodes", "Node"
		// A namespaceSelector does not apply to cluster-scoped resources.
		if s.w.Matches(node, nil, nil) && s.conds.Admits(call) {
			return true
		}
	}
	return false
}

// selectorEmpty: nil or {} (the API server defaults both selectors to {},
// which matches everything).
func selectorEmpty(sel *metav1.LabelSelector) bool {
	return sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
}

// selfBlocking: the webhook gates pod creation in its own Service's
// namespace, for pods labelled like the Service's selector, so it can
// block the pods that would serve it.
func (s scope) selfBlocking() bool {
	ns := s.w.Service.Namespace
	nsLabels := s.namespaceLabels(ns)
	var podLabels map[string]string
	if svc, ok := s.c.Service(ns, s.w.Service.Name); ok {
		podLabels = svc.Spec.Selector
	}
	pod := admission.Request{Operation: admissionv1.Create, Group: "", Version: "v1", Resource: "pods", Namespaced: true}
	return s.w.Matches(pod, nsLabels, podLabels) && s.conds.Admits(admission.Call{Namespace: ns, Resource: "pods", Kind: "Pod"})
}

// EarliestExpiry returns the earliest NotAfter among the PEM certificates
// in bundle. An empty bundle gives ErrNoCABundle; a bundle with no
// parsable certificate gives an error naming why.
func EarliestExpiry(bundle []byte) (time.Time, error) {
	if len(bytes.TrimSpace(bundle)) == 0 {
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
