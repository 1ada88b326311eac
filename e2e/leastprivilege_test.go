package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/leastprivilege"
)

var update = flag.Bool("update", false, "rewrite internal/leastprivilege/testdata from TestLeastPrivilege's requests")

// lpNamespace is where TestLeastPrivilege's admission probe writes (dry
// run) and its custom resource lives.
const lpNamespace = "kce-least-privilege"

// Least privilege, proven by the API server's audit log, which records
// every request of the exporters' ServiceAccounts (AuditEveryRequestOf in
// TestMain). The shared exporter runs as deploy/base's ServiceAccount bound
// to deploy/base's ClusterRole, with the default collectors. Exporters as
// other ServiceAccounts run with what `rbac --config.file` prints for a
// configuration with an admission probe (CREATE configmaps in
// lpNamespace), a custom resource and webhooks.apiServerMetrics. Each role
// set is exercised twice: with WatchList streams (client-go's default) and
// with LIST then WATCH (KUBE_FEATURE_WatchListClient=false: what an API
// server without streaming lists gets, and the reflector's fallback). The
// (verb, group, resource, subresource, namespace) tuples and non-resource
// paths used with LIST are exactly what the roles grant: nothing used that
// is not granted (beyond the bootstrap roles every authenticated user has:
// system:basic-user, system:discovery), nothing granted that is never used;
// with WatchList, only list is left unused. The check is shown to fail on
// each role with any one rule removed, and with an unused rule added. The
// LIST-mode tuples are those recorded in internal/leastprivilege/testdata
// (rewrite with -update), which docs/reliability.md lists.
func TestLeastPrivilege(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	begin := time.Now()
	baseline := authenticatedBaseline(ctx, t)
	args, err := manifestArgs()
	if err != nil {
		t.Fatal(err)
	}
	ns := sharedSA.Namespace
	listing := []string{"KUBE_FEATURE_WatchListClient=false"}

	t.Run("shipped ClusterRole, default collectors", func(t *testing.T) {
		var role rbacv1.ClusterRole
		if err := readManifest("clusterrole.yaml", &role); err != nil {
			t.Fatal(err)
		}
		// The LIST twin: another account bound to the same, installed
		// ClusterRole.
		listSA := leastPrivilegeSA + "-shipped-list"
		kubeconfig := newServiceAccount(ctx, t, ns, listSA)
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: listSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: listSA, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), listSA, metav1.DeleteOptions{})
		})
		e := startExporterEnv(t, listing, append(slices.Clone(args), "--web.probe-address="+freeAddr(t), "--kubeconfig="+kubeconfig)...)
		cfg := config.Default()
		for _, x := range []*exporterProc{shared.forTest(t), e} {
			// Every collector of the default configuration ran: up, and
			// the exporter ready (every informer synced).
			x.waitReady(30 * time.Second)
			collectorsUp(t, x, cfg)
		}
		checkRecording(t, "shipped", leastprivilege.Recording{
			Roles:     []leastprivilege.Role{leastprivilege.FromClusterRole(&role)},
			Baseline:  baseline,
			WatchList: auditedRequests(t, serviceAccountUser(ns, sharedSA.Name)),
			List:      auditedRequests(t, serviceAccountUser(ns, listSA)),
		})
	})

	t.Run("rbac --config.file, probes and custom resources", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lpNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().Namespaces().Delete(context.Background(), lpNamespace, metav1.DeleteOptions{})
		})
		if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Permit", "permits", "Namespaced", true, "v1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), "permits."+resGroup, metav1.DeleteOptions{})
		})
		permits := schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "permits"}
		eventually(t, 10*time.Second, "permits served", func() (bool, string) {
			_, err := dyn.Resource(permits).Namespace(lpNamespace).List(ctx, metav1.ListOptions{})
			return err == nil, fmt.Sprint(err)
		})
		cfgPath := writeConfig(t, lpConfig)
		out, err := exec.CommandContext(ctx, exporter, "rbac", "--config.file="+cfgPath).Output()
		if err != nil {
			t.Fatalf("rbac: %v", err)
		}
		streamSA, listSA := leastPrivilegeSA, leastPrivilegeSA+"-list"
		roles := bindPrinted(ctx, t, out, ns, streamSA, listSA)
		var exps []*exporterProc
		for _, run := range []struct {
			sa  string
			env []string
		}{{streamSA, nil}, {listSA, listing}} {
			kubeconfig := newServiceAccount(ctx, t, ns, run.sa)
			exps = append(exps, startExporterEnv(t, run.env, append(slices.Clone(args), "--web.probe-address="+freeAddr(t), "--kubeconfig="+kubeconfig, "--config.file="+cfgPath)...))
		}
		for i, e := range exps {
			user := serviceAccountUser(ns, []string{streamSA, listSA}[i])
			e.waitReady(30 * time.Second)
			// Every collector ran: the probe's first answer, and the first
			// read of the API server's /metrics (it starts with the
			// webhooks collector, before readiness).
			eventually(t, 20*time.Second, "the probe's first answer", func() (bool, string) {
				v, _ := value(e.scrape(), "kube_convergence_admission_probe_results_total", map[string]string{"probe": "least-privilege", "result": "allowed"})
				return v >= 1, fmt.Sprint(v)
			})
			eventually(t, 20*time.Second, "a read of the API server's /metrics in the audit log", func() (bool, string) {
				return slices.ContainsFunc(auditedRequests(t, user), func(r leastprivilege.Request) bool { return r.Path == "/metrics" }), ""
			})
			collectorsUp(t, e, nil)
		}
		checkRecording(t, "probes", leastprivilege.Recording{
			Roles:     roles,
			Baseline:  baseline,
			WatchList: auditedRequests(t, serviceAccountUser(ns, streamSA)),
			List:      auditedRequests(t, serviceAccountUser(ns, listSA)),
		})
	})
	t.Logf("TestLeastPrivilege took %v", time.Since(begin).Round(time.Millisecond))
}

// lpConfig has one of everything that needs more than the default
// ClusterRole: an admission probe, a custom resource, and the read of the
// API server's /metrics.
const lpConfig = `
webhooks:
  apiServerMetrics: {enabled: true}
admissionProbes:
  - name: least-privilege
    resource: configmaps
    namespace: ` + lpNamespace + `
    operation: CREATE
    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: least-privilege-probe}}
resources:
  - group: ` + resGroup + `
    resource: permits
`

// collectorsUp fails unless every collector cfg enables (nil: every
// collector) is up.
func collectorsUp(t *testing.T, e *exporterProc, cfg *config.Config) {
	t.Helper()
	mfs := e.scrape()
	for _, c := range all.Collectors(all.Options{Config: cfg}) {
		if cfg != nil && !cfg.Enabled(c.Name()) {
			continue
		}
		if v, ok := value(mfs, "kube_convergence_collector_up", map[string]string{"collector": c.Name()}); !ok || v != 1 {
			t.Fatalf("collector %s: up = %v (found %v), want 1", c.Name(), v, ok)
		}
	}
}

// newServiceAccount creates ServiceAccount namespace/name and returns the
// path of a kubeconfig with a token of it.
func newServiceAccount(ctx context.Context, t *testing.T, namespace, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().ServiceAccounts(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := writeServiceAccountKubeconfig(ctx, namespace, name, path, time.Hour); err != nil {
		t.Fatal(err)
	}
	return path
}

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// auditedRequests returns the distinct requests user sent so far.
func auditedRequests(t *testing.T, user string) []leastprivilege.Request {
	t.Helper()
	f, err := os.Open(sb.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used, err := leastprivilege.FromAuditLog(f, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatalf("no request of %s in the audit log", user)
	}
	return used
}

// checkRecording passes when rec.Check does, shows that the check would
// notice a role with one rule fewer or one unused rule more, and keeps
// internal/leastprivilege/testdata/<name>.json: its LIST-mode requests
// must be those recorded there (-update rewrites it).
func checkRecording(t *testing.T, name string, rec leastprivilege.Recording) {
	t.Helper()
	for mode, used := range map[string][]leastprivilege.Request{"WatchList": rec.WatchList, "LIST and WATCH": rec.List} {
		var b strings.Builder
		for _, r := range used {
			fmt.Fprintf(&b, "  %s\n", r)
		}
		t.Logf("%s: %d requests used with %s:\n%s", name, len(used), mode, b.String())
	}
	if err := rec.Check(); err != nil {
		t.Errorf("the roles are not what the exporter used:\n%v", err)
	}
	for i, r := range rec.Roles {
		for j := range r.Rules {
			fewer := rec
			fewer.Roles = slices.Clone(rec.Roles)
			fewer.Roles[i].Rules = slices.Delete(slices.Clone(r.Rules), j, j+1)
			if fewer.Check() == nil {
				t.Errorf("%s without rule %d (%v): the check missed it", r.Name, j, r.Rules[j])
			}
		}
		more := rec
		more.Roles = slices.Clone(rec.Roles)
		more.Roles[i].Rules = append(slices.Clone(r.Rules), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		if more.Check() == nil {
			t.Errorf("%s with get secrets: the check missed it", r.Name)
		}
	}
	path := filepath.Join("..", "internal", "leastprivilege", "testdata", name+".json")
	if *update {
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with -update)", err)
	}
	var recorded leastprivilege.Recording
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recorded.List, rec.List) {
		t.Errorf("the LIST-mode requests differ from %s (rerun with -update, and update docs/reliability.md):\nrecorded %v\nnow      %v", path, recorded.List, rec.List)
	}
}

// authenticatedBaseline returns the bootstrap ClusterRoles the API server
// binds to every authenticated user (system:basic-user: access reviews;
// system:discovery and system:public-info-viewer: /version, /api, /apis,
// /healthz ...), read from the sandbox itself.
func authenticatedBaseline(ctx context.Context, t *testing.T) []leastprivilege.Role {
	t.Helper()
	bindings, err := client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/bootstrapping=rbac-defaults"})
	if err != nil {
		t.Fatal(err)
	}
	var out []leastprivilege.Role
	for _, b := range bindings.Items {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.GroupKind && (s.Name == "system:authenticated" || s.Name == "system:serviceaccounts")
		}) {
			continue
		}
		role, err := client.RbacV1().ClusterRoles().Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, leastprivilege.FromClusterRole(role))
	}
	names := make([]string, 0, len(out))
	for _, r := range out {
		names = append(names, r.Name)
	}
	t.Logf("baseline of every authenticated ServiceAccount: %s", strings.Join(names, ", "))
	return out
}

// bindPrinted creates the ClusterRoles and Roles of `rbac` output (renamed
// after names[0]: the printed names are the shipped ones), binds them to
// the ServiceAccounts names in namespace, and returns them.
func bindPrinted(ctx context.Context, t *testing.T, out []byte, namespace string, names ...string) []leastprivilege.Role {
	t.Helper()
	bg := context.Background()
	var subjects []rbacv1.Subject
	for _, n := range names {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: n, Namespace: namespace})
	}
	name := names[0]
	var roles []leastprivilege.Role
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
			Rules             []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode the printed roles: %v\n%s", err, out)
		}
		if doc.Kind == "" {
			continue // a document of comments only
		}
		roleName := doc.Name + "-" + name
		meta := metav1.ObjectMeta{Name: roleName, Namespace: doc.Namespace}
		switch doc.Kind {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{ObjectMeta: meta, Rules: doc.Rules}
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}}
			if _, err := client.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = client.RbacV1().ClusterRoleBindings().Delete(bg, roleName, metav1.DeleteOptions{})
				_ = client.RbacV1().ClusterRoles().Delete(bg, roleName, metav1.DeleteOptions{})
			})
			roles = append(roles, leastprivilege.FromClusterRole(r))
		case "Role":
			r := &rbacv1.Role{ObjectMeta: meta, Rules: doc.Rules}
			b := &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName}}
			if _, err := client.RbacV1().Roles(doc.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.RbacV1().RoleBindings(doc.Namespace).Create(ctx, b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			roles = append(roles, leastprivilege.FromRole(r)) // goes with its namespace
		default:
			t.Fatalf("rbac printed a %s", doc.Kind)
		}
	}
	return roles
}
