// Package admission is the model of an admission webhook as the API server
// sees it: the webhooks of Validating- and MutatingWebhookConfigurations with
// the v1 defaults applied, and the matcher that decides whether a request
// may be sent to one. The webhooks collector audits these webhooks; the
// admission probes collector reports which webhooks each probe's request
// matches.
package admission

import (
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
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

// Webhook is one webhook of a Validating- or MutatingWebhookConfiguration,
// with the API server's v1 defaults applied where a field is unset.
type Webhook struct {
	Configuration, Name, Type string
	// Version is the configuration's resourceVersion ("" when decoded from
	// a file): what a result computed from the webhook may be kept by.
	Version            string
	FailurePolicy      string // Fail, Ignore
	SideEffects        string // None, NoneOnDryRun, Unknown, Some
	MatchPolicy        string // Exact, Equivalent
	ReinvocationPolicy string // Never, IfNeeded; "" for validating webhooks
	// Service is the backing Service (namespace, name); nil for a URL client.
	Service           *admissionv1.ServiceReference
	CABundle          []byte
	Timeout           time.Duration
	Rules             []admissionv1.RuleWithOperations
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	// MatchConditions are the CEL conditions, read by Conditions.
	MatchConditions []admissionv1.MatchCondition
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
			Configuration: c.Name, Name: h.Name, Type: Validating, Version: c.ResourceVersion,
			FailurePolicy: orDefault(h.FailurePolicy, string(admissionv1.Fail)),
			SideEffects:   orDefault(h.SideEffects, ""),
			MatchPolicy:   orDefault(h.MatchPolicy, string(admissionv1.Equivalent)),
			Service:       h.ClientConfig.Service, CABundle: h.ClientConfig.CABundle,
			Timeout: timeoutOf(h.TimeoutSeconds), Rules: h.Rules,
			NamespaceSelector: h.NamespaceSelector, ObjectSelector: h.ObjectSelector,
			MatchConditions: h.MatchConditions,
		})
	}
	return out
}

// FromMutating returns the webhooks of a mutating configuration.
func FromMutating(c *admissionv1.MutatingWebhookConfiguration) []Webhook {
	out := make([]Webhook, 0, len(c.Webhooks))
	for _, h := range c.Webhooks {
		out = append(out, Webhook{
			Configuration: c.Name, Name: h.Name, Type: Mutating, Version: c.ResourceVersion,
			FailurePolicy:      orDefault(h.FailurePolicy, string(admissionv1.Fail)),
			SideEffects:        orDefault(h.SideEffects, ""),
			MatchPolicy:        orDefault(h.MatchPolicy, string(admissionv1.Equivalent)),
			ReinvocationPolicy: orDefault(h.ReinvocationPolicy, string(admissionv1.NeverReinvocationPolicy)),
			Service:            h.ClientConfig.Service, CABundle: h.ClientConfig.CABundle,
			Timeout: timeoutOf(h.TimeoutSeconds), Rules: h.Rules,
			NamespaceSelector: h.NamespaceSelector, ObjectSelector: h.ObjectSelector,
			MatchConditions: h.MatchConditions,
		})
	}
	return out
}

// SelectsNamespace reports whether the namespaceSelector matches a
// Namespace's labels.
func (w Webhook) SelectsNamespace(nsLabels map[string]string) bool {
	return selects(w.NamespaceSelector, nsLabels)
}

// SelectsObject reports whether the objectSelector matches an object's
// labels.
func (w Webhook) SelectsObject(objLabels map[string]string) bool {
	return selects(w.ObjectSelector, objLabels)
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

// Matches reports whether w may be called for req on an object with
// objLabels in a namespace with nsLabels. Two things are not evaluated, so
// they give possible matches: matchConditions (CEL), and which versions the
// API server serves. Under matchPolicy Equivalent the API server also calls
// the webhook when a rule matches an equivalent resource, checking the
// rules in order against each one (k8s.io/apiserver v0.37.2
// pkg/admission/plugin/webhook/generic/webhook.go:324-353, ShouldCallHook):
// the equivalents are the resource in every version the API server serves
// it in (a CRD's served versions), plus resources sharing its storage,
// which on a v1.37 API server is only core events and events.k8s.io events
// (k8s.io/kubernetes pkg/kubeapiserver/default_storage_factory_builder.go:
// 141-148; the extensions cohabitants there are no longer served). Here a
// rule counts when it matches req in any version of req's group or of that
// cohabitant, "*" resources included.
func (w Webhook) Matches(req Request, nsLabels, objLabels map[string]string) bool {
	rules := RulesMatch(w.Rules, req)
	if !rules && w.MatchPolicy == string(admissionv1.Equivalent) {
		for _, eq := range Equivalents(req) {
			if RulesMatch(anyVersion(w.Rules), eq) {
				rules = true
				break
			}
		}
	}
	// The namespaceSelector applies to namespaced resources, and to a
	// Namespace itself (nsLabels are then its own labels); other
	// cluster-scoped resources are never skipped by it.
	nsOK := (!req.Namespaced && req.Resource != "namespaces") || selects(w.NamespaceSelector, nsLabels)
	return rules && nsOK && selects(w.ObjectSelector, objLabels)
}

// cohabitants are the served resources that share storage with a resource
// of another group on a v1.37 API server.
var cohabitants = map[[2]string][2]string{
	{"", "events"}:              {"events.k8s.io", "events"},
	{"events.k8s.io", "events"}: {"", "events"},
}

// Equivalents returns req and the requests for its cohabitant, if any; the
// version is whatever req says (anyVersion on the rules ignores it).
func Equivalents(req Request) []Request {
	out := []Request{req}
	if c, ok := cohabitants[[2]string{req.Group, req.Resource}]; ok {
		eq := req
		eq.Group, eq.Resource = c[0], c[1]
		out = append(out, eq)
	}
	return out
}

// anyVersion is rules with every version allowed.
func anyVersion(rules []admissionv1.RuleWithOperations) []admissionv1.RuleWithOperations {
	out := make([]admissionv1.RuleWithOperations, 0, len(rules))
	for _, r := range rules {
		r.APIVersions = []string{"*"}
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
