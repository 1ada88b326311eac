package leastprivilege

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func urls(verbs []string, u ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: u}
}

var (
	get   = []string{"get"}
	list  = []string{"list"}
	core  = []string{""}
	every = []string{"*"}
)

// The decision of one role for one request, as the RBAC authorizer makes
// it.
func TestRoleAllows(t *testing.T) {
	for _, tc := range []struct {
		name string
		role Role
		req  Request
		want bool
	}{
		{"exact", Role{Rules: []rbacv1.PolicyRule{rule(list, core, []string{"pods"})}}, Request{Verb: "list", Resource: "pods"}, true},
		{"other verb", Role{Rules: []rbacv1.PolicyRule{rule(list, core, []string{"pods"})}}, Request{Verb: "watch", Resource: "pods"}, false},
		{"other group", Role{Rules: []rbacv1.PolicyRule{rule(list, core, []string{"deployments"})}}, Request{Verb: "list", Group: "apps", Resource: "deployments"}, false},
		{"verb wildcard", Role{Rules: []rbacv1.PolicyRule{rule(every, core, []string{"pods"})}}, Request{Verb: "delete", Resource: "pods"}, true},
		{"group wildcard", Role{Rules: []rbacv1.PolicyRule{rule(list, every, []string{"deployments"})}}, Request{Verb: "list", Group: "apps", Resource: "deployments"}, true},
		{"resource wildcard", Role{Rules: []rbacv1.PolicyRule{rule(list, core, every)}}, Request{Verb: "list", Resource: "secrets"}, true},
		{"resource does not grant its subresource", Role{Rules: []rbacv1.PolicyRule{rule(get, core, []string{"pods"})}}, Request{Verb: "get", Resource: "pods", Subresource: "log"}, false},
		{"subresource", Role{Rules: []rbacv1.PolicyRule{rule(get, core, []string{"pods/log"})}}, Request{Verb: "get", Resource: "pods", Subresource: "log"}, true},
		{"subresource does not grant its resource", Role{Rules: []rbacv1.PolicyRule{rule(get, core, []string{"pods/log"})}}, Request{Verb: "get", Resource: "pods"}, false},
		{"any resource's subresource", Role{Rules: []rbacv1.PolicyRule{rule(get, core, []string{"*/status"})}}, Request{Verb: "get", Resource: "pods", Subresource: "status"}, true},
		{"URL", Role{Rules: []rbacv1.PolicyRule{urls(get, "/metrics")}}, Request{Verb: "get", Path: "/metrics"}, true},
		{"URL prefix", Role{Rules: []rbacv1.PolicyRule{urls(get, "/api/*")}}, Request{Verb: "get", Path: "/api/v1"}, true},
		{"URL prefix is not the parent", Role{Rules: []rbacv1.PolicyRule{urls(get, "/api/*")}}, Request{Verb: "get", Path: "/api"}, false},
		{"URL is not a resource rule", Role{Rules: []rbacv1.PolicyRule{rule(every, every, every)}}, Request{Verb: "get", Path: "/metrics"}, false},
		{"resource is not a URL rule", Role{Rules: []rbacv1.PolicyRule{urls(every, "*")}}, Request{Verb: "get", Resource: "pods"}, false},
		{"Role in its namespace", Role{Namespace: "a", Rules: []rbacv1.PolicyRule{rule([]string{"create"}, core, []string{"configmaps"})}}, Request{Verb: "create", Resource: "configmaps", Namespace: "a"}, true},
		{"Role in another namespace", Role{Namespace: "a", Rules: []rbacv1.PolicyRule{rule([]string{"create"}, core, []string{"configmaps"})}}, Request{Verb: "create", Resource: "configmaps", Namespace: "b"}, false},
		{"Role and a list across namespaces", Role{Namespace: "a", Rules: []rbacv1.PolicyRule{rule(list, core, []string{"configmaps"})}}, Request{Verb: "list", Resource: "configmaps"}, false},
		{"ClusterRole in a namespace", Role{Rules: []rbacv1.PolicyRule{rule([]string{"create"}, core, []string{"configmaps"})}}, Request{Verb: "create", Resource: "configmaps", Namespace: "b"}, true},
	} {
		if got := roleAllows(tc.role, tc.req); got != tc.want {
			t.Errorf("%s: roleAllows(%v, %s) = %v, want %v", tc.name, tc.role.Rules, tc.req, got, tc.want)
		}
	}
}

// Every stage of a request counts once (a watch is logged when its
// response starts and again when it ends), other users and half-written
// lines are skipped, a path loses its query, and requests are sorted.
func TestFromAuditLog(t *testing.T) {
	const me = "system:serviceaccount:kube-convergence:kube-convergence-exporter"
	log := strings.Join([]string{
		`{"kind":"Event","stage":"ResponseStarted","verb":"watch","user":{"username":"` + me + `"},"objectRef":{"resource":"pods","apiVersion":"v1"},"requestURI":"/api/v1/pods?sendInitialEvents=true\u0026watch=true"}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"watch","user":{"username":"` + me + `"},"objectRef":{"resource":"pods","apiVersion":"v1"},"requestURI":"/api/v1/pods?sendInitialEvents=true\u0026watch=true"}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + me + `"},"requestURI":"/version?timeout=32s"}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + me + `"},"objectRef":{"resource":"configmaps","namespace":"probe","apiVersion":"v1"},"requestURI":"/api/v1/namespaces/probe/configmaps?dryRun=All"}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"update","user":{"username":"` + me + `"},"objectRef":{"resource":"deployments","subresource":"scale","namespace":"a","apiGroup":"apps"},"requestURI":"/apis/apps/v1/namespaces/a/deployments/web/scale"}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"objectRef":{"resource":"secrets","namespace":"a"}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"` + me,
	}, "\n")
	got, err := FromAuditLog(strings.NewReader(log), me)
	if err != nil {
		t.Fatal(err)
	}
	// Resource requests by group and resource, then non-resource paths.
	want := []Request{
		{Verb: "create", Resource: "configmaps", Namespace: "probe"},
		{Verb: "watch", Resource: "pods"},
		{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "a"},
		{Verb: "get", Path: "/version"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromAuditLog:\n got %v\nwant %v", got, want)
	}
}

// Check in both directions, and what it refuses to judge.
func TestCheck(t *testing.T) {
	role := Role{Name: "r", Rules: []rbacv1.PolicyRule{rule([]string{"list", "watch"}, core, []string{"pods", "nodes"})}}
	baseline := []Role{{Name: "system:discovery", Rules: []rbacv1.PolicyRule{urls(get, "/version", "/api/*")}}}
	used := []Request{{Verb: "list", Resource: "pods"}, {Verb: "watch", Resource: "pods"}, {Verb: "watch", Resource: "nodes"}, {Verb: "get", Path: "/version"}, {Verb: "get", Resource: "secrets", Namespace: "a"}}
	rep, err := Check(used, []Role{role}, baseline)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Request{{Verb: "get", Resource: "secrets", Namespace: "a"}}; !reflect.DeepEqual(rep.Ungranted, want) {
		t.Errorf("ungranted %v, want %v", rep.Ungranted, want)
	}
	// The baseline's /api/* is not required; the role's list nodes is.
	if want := []Permission{{Role: "r", Verb: "list", Resource: "nodes"}}; !reflect.DeepEqual(rep.Unused, want) {
		t.Errorf("unused %v, want %v", rep.Unused, want)
	}
	if rep.OK() || !strings.Contains(rep.String(), "used but not granted: get secrets in a") || !strings.Contains(rep.String(), "granted but never used: list nodes (ClusterRole r)") {
		t.Errorf("report:\n%s", rep)
	}
	named := Role{Name: "n", Rules: []rbacv1.PolicyRule{{Verbs: get, APIGroups: core, Resources: []string{"configmaps"}, ResourceNames: []string{"x"}}}}
	if _, err := Check(used, []Role{named}, nil); err == nil {
		t.Error("a rule with resourceNames was judged")
	}
	nsURL := Role{Name: "u", Namespace: "a", Rules: []rbacv1.PolicyRule{urls(get, "/metrics")}}
	if _, err := Check(used, []Role{nsURL}, nil); err == nil {
		t.Error("a namespaced Role with a non-resource URL was judged")
	}
}

// The recordings of TestLeastPrivilege (e2e, -update), the roles the
// exporter ships and prints and the requests it sent with each: the check
// passes on them, and fails on every role with any one rule removed and
// with an unused rule added. With WatchList, list alone is left unused.
func TestRecordings(t *testing.T) {
	for _, name := range []string{"shipped", "probes"} {
		t.Run(name, func(t *testing.T) {
			rec := recording(t, name)
			if err := rec.Check(); err != nil {
				t.Fatalf("the recording fails its own check:\n%v", err)
			}
			stream, err := Check(rec.WatchList, rec.Roles, rec.Baseline)
			if err != nil {
				t.Fatal(err)
			}
			var lists []Permission
			for _, p := range permissions(rec.Roles) {
				if p.Verb == "list" {
					lists = append(lists, p)
				}
			}
			if len(stream.Ungranted) > 0 || !reflect.DeepEqual(stream.Unused, lists) {
				t.Errorf("with WatchList: want exactly the %d list permissions unused, got\n%s", len(lists), stream)
			}
			for i, r := range rec.Roles {
				for j, removed := range r.Rules {
					fewer := rec
					fewer.Roles = slices.Clone(rec.Roles)
					fewer.Roles[i].Rules = slices.Delete(slices.Clone(r.Rules), j, j+1)
					err := fewer.Check()
					if err == nil || !strings.Contains(err.Error(), "used but not granted: ") {
						t.Errorf("%s without %v: %v, want requests used but not granted", r.Name, removed, err)
					}
				}
				more := rec
				more.Roles = slices.Clone(rec.Roles)
				more.Roles[i].Rules = append(slices.Clone(r.Rules), rule([]string{"get"}, core, []string{"secrets"}))
				err := more.Check()
				if err == nil || !strings.Contains(err.Error(), "granted but never used: get secrets") {
					t.Errorf("%s with get secrets: %v, want it never used", r.Name, err)
				}
			}
			// A list the WatchList run used does not hide a role without it.
			if name == "shipped" {
				noList := rec
				noList.Roles = []Role{{Name: rec.Roles[0].Name, Rules: slices.Clone(rec.Roles[0].Rules)}}
				for k := range noList.Roles[0].Rules {
					noList.Roles[0].Rules[k].Verbs = []string{"watch"}
				}
				if err := noList.Check(); err == nil || !strings.Contains(err.Error(), "with LIST and WATCH:\nused but not granted: list namespaces") {
					t.Errorf("a role without list: %v", err)
				}
			}
		})
	}
}

// The shipped recording is of the ClusterRole deploy/base ships: a change
// of the role (make generate) needs a new recording, the e2e proof that the
// new role is still exact.
func TestShippedRecordingIsOfTheShippedRole(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &shipped); err != nil {
		t.Fatal(err)
	}
	rec := recording(t, "shipped")
	if len(rec.Roles) != 1 || !reflect.DeepEqual(rec.Roles[0].Rules, shipped.Rules) {
		t.Errorf("testdata/shipped.json records other roles than deploy/base/clusterrole.yaml: rerun go test ./e2e -run TestLeastPrivilege -update\nrecorded %v\nshipped  %v", rec.Roles, shipped.Rules)
	}
}

func recording(t *testing.T, name string) Recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Roles) == 0 || len(rec.List) == 0 || len(rec.WatchList) == 0 {
		t.Fatalf("testdata/%s.json: an empty recording", name)
	}
	return rec
}
