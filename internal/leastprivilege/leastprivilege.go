// Package leastprivilege compares what a client did, read from the API
// server's audit log, with what its RBAC roles grant, in both directions:
// a request no rule allows is missing from the roles, and a permission no
// request used is more than the client needs. The end-to-end suite runs
// the exporter under its shipped roles and checks them with Check
// (e2e/leastprivilege_test.go, docs/reliability.md "Least privilege").
//
// The matching follows the RBAC authorizer (k8s.io/kubernetes
// plugin/pkg/auth/authorizer/rbac, RuleAllows): verbs, API groups and
// resources with "*", "resource/subresource" and "*/subresource", and
// non-resource URLs with a trailing "*". Rules with resourceNames are
// refused: the requests are kept without object names, so a rule narrowed
// to names cannot be judged.
package leastprivilege

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Request is one kind of request a client sent, as RBAC authorizes it:
// the verb, API group, resource, subresource and namespace of a resource
// request, or the verb and path of a non-resource one (/version, /api,
// /metrics). Object names are not kept: RBAC rules without resourceNames
// do not look at them, and keeping them would make every pod a tuple.
type Request struct {
	Verb        string `json:"verb"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// Namespace of a namespaced request; "" for a cluster-scoped resource
	// or a list or watch across all namespaces (which only a ClusterRole
	// can allow).
	Namespace string `json:"namespace,omitempty"`
	// Path of a non-resource request, without its query.
	Path string `json:"path,omitempty"`
}

// String is the request as a person reads it: "watch deployments.apps",
// "create configmaps in kce-lp", "get /metrics".
func (r Request) String() string {
	if r.Resource == "" {
		return r.Verb + " " + r.Path
	}
	s := r.Verb + " " + resourceName(r.Group, r.Resource, r.Subresource)
	if r.Namespace != "" {
		s += " in " + r.Namespace
	}
	return s
}

// resourceName is resource.group/subresource, as kubectl names them.
func resourceName(group, resource, subresource string) string {
	s := resource
	if group != "" {
		s += "." + group
	}
	if subresource != "" {
		s += "/" + subresource
	}
	return s
}

func compare(a, b Request) int {
	return strings.Compare(a.key(), b.key())
}

func (r Request) key() string {
	return strings.Join([]string{r.Path, r.Group, r.Resource, r.Subresource, r.Namespace, r.Verb}, "\x00")
}

// auditEvent is what FromAuditLog reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
	} `json:"objectRef"`
}

// FromAuditLog returns the distinct requests that user sent, sorted, from
// an API server audit log in JSON lines (--audit-log-format=json), every
// stage counted: a watch is logged when its response starts. A line that
// is not a whole event (one being written) is skipped.
func FromAuditLog(r io.Reader, user string) ([]Request, error) {
	seen := map[Request]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != user || e.Verb == "" {
			continue
		}
		req := Request{Verb: e.Verb}
		if e.ObjectRef != nil && e.ObjectRef.Resource != "" {
			req.Group, req.Resource, req.Subresource, req.Namespace = e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Namespace
		} else {
			req.Path, _, _ = strings.Cut(e.RequestURI, "?")
		}
		seen[req] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	out := make([]Request, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, compare)
	return out, nil
}

// Role is a set of rules bound to the client: a ClusterRole bound by a
// ClusterRoleBinding (Namespace ""), which applies everywhere, or a Role
// (or a ClusterRole bound by a RoleBinding) in Namespace, which applies to
// namespaced requests in that namespace only.
type Role struct {
	Name      string              `json:"name"`
	Namespace string              `json:"namespace,omitempty"`
	Rules     []rbacv1.PolicyRule `json:"rules"`
}

// FromClusterRole is the Role of a ClusterRole bound cluster-wide.
func FromClusterRole(r *rbacv1.ClusterRole) Role {
	return Role{Name: r.Name, Rules: r.Rules}
}

// FromRole is the Role of a namespaced Role.
func FromRole(r *rbacv1.Role) Role {
	return Role{Name: r.Name, Namespace: r.Namespace, Rules: r.Rules}
}

// Permission is one verb on one resource (or non-resource URL) of one rule
// of a role: the unit in which a grant is used or not.
type Permission struct {
	Role      string
	Namespace string // the role's; "" for a ClusterRole
	Verb      string
	Group     string
	Resource  string // as the rule writes it: "pods", "pods/log", "*"
	URL       string // a non-resource URL as the rule writes it
}

func (p Permission) String() string {
	var s string
	if p.URL != "" {
		s = p.Verb + " " + p.URL
	} else {
		res, sub, _ := strings.Cut(p.Resource, "/")
		s = p.Verb + " " + resourceName(p.Group, res, sub)
	}
	if p.Namespace != "" {
		return s + " in " + p.Namespace + " (Role " + p.Role + ")"
	}
	return s + " (ClusterRole " + p.Role + ")"
}

// rule is the permission as a rule of its own, for matching.
func (p Permission) rule() rbacv1.PolicyRule {
	if p.URL != "" {
		return rbacv1.PolicyRule{Verbs: []string{p.Verb}, NonResourceURLs: []string{p.URL}}
	}
	return rbacv1.PolicyRule{Verbs: []string{p.Verb}, APIGroups: []string{p.Group}, Resources: []string{p.Resource}}
}

// Report is the outcome of Check.
type Report struct {
	// Ungranted are requests no rule of the granted or baseline roles
	// allows: the roles lack them (the API server answered 403, or the
	// client has a binding the check was not told about).
	Ungranted []Request
	// Unused are permissions of the granted roles that no request used:
	// the roles give more than the client needs.
	Unused []Permission
}

// OK is true when the roles are exactly what the requests needed.
func (r Report) OK() bool { return len(r.Ungranted) == 0 && len(r.Unused) == 0 }

func (r Report) String() string {
	var b strings.Builder
	for _, q := range r.Ungranted {
		fmt.Fprintf(&b, "used but not granted: %s\n", q)
	}
	for _, p := range r.Unused {
		fmt.Fprintf(&b, "granted but never used: %s\n", p)
	}
	return b.String()
}

// Check compares the requests used with the roles granted, both ways.
// baseline are roles every authenticated client has (system:basic-user
// for SelfSubjectAccessReviews, system:discovery for /version and /api):
// they may allow a request, but their permissions are not required to be
// used. It fails on a rule it cannot judge (resourceNames, non-resource
// URLs in a namespaced Role).
func Check(used []Request, granted, baseline []Role) (Report, error) {
	for _, r := range slices.Concat(granted, baseline) {
		if err := judgeable(r); err != nil {
			return Report{}, err
		}
	}
	var rep Report
	for _, q := range used {
		if !slices.ContainsFunc(granted, func(r Role) bool { return roleAllows(r, q) }) &&
			!slices.ContainsFunc(baseline, func(r Role) bool { return roleAllows(r, q) }) {
			rep.Ungranted = append(rep.Ungranted, q)
		}
	}
	for _, p := range permissions(granted) {
		one := Role{Name: p.Role, Namespace: p.Namespace, Rules: []rbacv1.PolicyRule{p.rule()}}
		if !slices.ContainsFunc(used, func(q Request) bool { return roleAllows(one, q) }) {
			rep.Unused = append(rep.Unused, p)
		}
	}
	slices.SortFunc(rep.Ungranted, compare)
	return rep, nil
}

func judgeable(r Role) error {
	for i, rule := range r.Rules {
		if len(rule.ResourceNames) > 0 {
			return fmt.Errorf("role %s rule %d: resourceNames cannot be judged: requests are kept without names", r.Name, i)
		}
		if r.Namespace != "" && len(rule.NonResourceURLs) > 0 {
			return fmt.Errorf("role %s/%s rule %d: a namespaced Role cannot grant non-resource URLs", r.Namespace, r.Name, i)
		}
		if len(rule.NonResourceURLs) > 0 && (len(rule.Resources) > 0 || len(rule.APIGroups) > 0) {
			return errors.New("role " + r.Name + ": a rule names both resources and non-resource URLs")
		}
	}
	return nil
}

// permissions expands the roles' rules into one permission per verb and
// resource (or URL), in the order written, without duplicates.
func permissions(roles []Role) []Permission {
	var out []Permission
	add := func(p Permission) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, r := range roles {
		for _, rule := range r.Rules {
			for _, v := range rule.Verbs {
				for _, u := range rule.NonResourceURLs {
					add(Permission{Role: r.Name, Namespace: r.Namespace, Verb: v, URL: u})
				}
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						add(Permission{Role: r.Name, Namespace: r.Namespace, Verb: v, Group: g, Resource: res})
					}
				}
			}
		}
	}
	return out
}

// roleAllows is the RBAC authorizer's decision for one role: a Role
// applies only to namespaced requests in its namespace, and never to
// non-resource URLs.
func roleAllows(r Role, q Request) bool {
	if r.Namespace != "" && (q.Resource == "" || q.Namespace != r.Namespace) {
		return false
	}
	return slices.ContainsFunc(r.Rules, func(rule rbacv1.PolicyRule) bool { return ruleAllows(rule, q) })
}

func ruleAllows(rule rbacv1.PolicyRule, q Request) bool {
	if !matches(rule.Verbs, q.Verb) {
		return false
	}
	if q.Resource == "" {
		return slices.ContainsFunc(rule.NonResourceURLs, func(u string) bool {
			return u == rbacv1.NonResourceAll || u == q.Path ||
				(strings.HasSuffix(u, "*") && strings.HasPrefix(q.Path, strings.TrimSuffix(u, "*")))
		})
	}
	if !matches(rule.APIGroups, q.Group) {
		return false
	}
	combined := q.Resource
	if q.Subresource != "" {
		combined += "/" + q.Subresource
	}
	return slices.ContainsFunc(rule.Resources, func(res string) bool {
		return res == rbacv1.ResourceAll || res == combined ||
			(q.Subresource != "" && res == "*/"+q.Subresource)
	})
}

func matches(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// Recording is what one run of a client observed: the roles it was bound
// to, the baseline every authenticated user has, and the requests it used
// in each of client-go's two ways of filling an informer.
type Recording struct {
	Roles    []Role `json:"roles"`
	Baseline []Role `json:"baseline"`
	// WatchList are the requests with WatchList streams (client-go's
	// default since v0.35 where the server serves them): a watch with
	// sendInitialEvents=true, which RBAC authorizes as watch alone.
	WatchList []Request `json:"watchList"`
	// List are the requests with LIST then WATCH
	// (KUBE_FEATURE_WatchListClient=false): what an API server without
	// streaming lists gets, and the reflector's fallback when a WatchList
	// stream fails with an error it does not retry.
	List []Request `json:"list"`
}

// Check passes when the LIST-mode requests are exactly what the roles
// grant, and the WatchList-mode requests are within it with list alone
// left unused: list is the fallback's verb, which clusters without
// streaming lists (README: v1.21 and later are supported) need every time.
func (r Recording) Check() error {
	list, err := Check(r.List, r.Roles, r.Baseline)
	if err != nil {
		return err
	}
	stream, err := Check(r.WatchList, r.Roles, r.Baseline)
	if err != nil {
		return err
	}
	var problems []string
	if !list.OK() {
		problems = append(problems, "with LIST and WATCH:\n"+list.String())
	}
	for _, q := range stream.Ungranted {
		problems = append(problems, "with WatchList: used but not granted: "+q.String())
	}
	for _, p := range stream.Unused {
		if p.Verb != "list" {
			problems = append(problems, "with WatchList: granted but never used: "+p.String())
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}
