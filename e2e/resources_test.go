package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

const resGroup = "e2e.kce.io"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crd returns a CRD of kind in resGroup; status: whether the status
// subresource is on; versions: served versions, the last one stored.
func crd(kind, plural, scope string, status bool, versions ...string) *unstructured.Unstructured {
	var vs []any
	for i, v := range versions {
		ver := map[string]any{
			"name": v, "served": true, "storage": i == len(versions)-1,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"spec":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
				},
			}},
		}
		if status {
			ver["subresources"] = map[string]any{"status": map[string]any{}}
		}
		vs = append(vs, ver)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + resGroup},
		"spec": map[string]any{
			"group": resGroup, "scope": scope, "versions": vs,
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
		},
	}}
}

// testController is the controller of the test's custom resources: it
// writes their status the way an operator does, and records its own write
// times, the truth the exporter's durations are checked against.
type testController struct {
	t    *testing.T
	dyn  dynamic.ResourceInterface
	kind string
}

func (c testController) create(ctx context.Context, name string) time.Time {
	c.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": resGroup + "/v1", "kind": c.kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"size": int64(1)},
	}}
	if _, err := c.dyn.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
}

// condition returns a status condition set now.
func condition(typ, status string, observed int64) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": "Test", "message": "set by the e2e controller",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if observed > 0 {
		c["observedGeneration"] = observed
	}
	return c
}

// setStatus writes status and returns when the write returned.
func (c testController) setStatus(ctx context.Context, name string, status map[string]any) time.Time {
	c.t.Helper()
	u, err := c.dyn.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	u.Object["status"] = status
	if _, err := c.dyn.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
}

// statusOf is an observedGeneration and one condition.
func statusOf(observed int64, cond map[string]any) map[string]any {
	return map[string]any{"observedGeneration": observed, "conditions": []any{cond}}
}

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kce.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sumFamily(mfs map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var s float64
	if mf := mfs[name]; mf != nil {
		for _, m := range mf.Metric {
			if labelsMatch(m, match) && m.Counter != nil {
				s += m.Counter.GetValue()
			}
		}
	}
	return s
}

// A CRD installed after the exporter started is tracked within 10 s; a
// test controller observes a new object after d1 and sets Ready=True d2
// later: the exporter's observed and ready stages match the controller's
// own write times within 0.3 s. With the controller stopped, a new object
// and a spec change show not_observed past their 2 s stallThreshold. Then
// the CRD is deleted: the episodes in flight close as deleted, the state is
// crd_missing, and the informer stops (no further relists). A CRD without
// status subresource is refused; a configured observedGeneration path absent
// from an object counts one decode error.
func TestResourcesCustomResourceLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	cfg := writeConfig(t, `
resources:
  - group: e2e.kce.io
    resource: widgets
    stallThreshold: 2s
  - group: e2e.kce.io
    resource: nostatuses
  - group: e2e.kce.io
    resource: probes
    observedGeneration: '{.status.seen}'
`)
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg)
	body := e.waitReady(60 * time.Second)
	for _, want := range []string{"resource widgets.e2e.kce.io: crd_missing (not tracked, excluded from readiness)", "resource nostatuses.e2e.kce.io: crd_missing"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body lacks %q:\n%s", want, body)
		}
	}
	state := func(resource, s string) float64 {
		v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": resource, "state": s})
		return v
	}

	// Hot-plug: install the CRDs now.
	t.Cleanup(func() {
		for _, n := range []string{"widgets", "nostatuses", "probes"} {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), n+"."+resGroup, metav1.DeleteOptions{})
		}
	})
	installed := time.Now()
	for _, c := range []*unstructured.Unstructured{crd("Widget", "widgets", "Namespaced", true, "v1"), crd("NoStatus", "nostatuses", "Namespaced", false, "v1"),
		crd("Probe", "probes", "Namespaced", true, "v1")} {
		if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "widgets tracking within 10 s of the CRD", func() (bool, string) {
		return state("widgets.e2e.kce.io", "tracking") == 1, fmt.Sprint(state("widgets.e2e.kce.io", "crd_missing"))
	})
	t.Logf("widgets tracking %v after the CRD create", time.Since(installed).Round(time.Millisecond))
	eventually(t, 10*time.Second, "nostatuses refused", func() (bool, string) {
		return state("nostatuses.e2e.kce.io", "no_status_subresource") == 1, ""
	})
	if n := strings.Count(e.logs.String(), "no status subresource"); n != 1 {
		t.Errorf("%d log lines for no_status_subresource, want 1", n)
	}
	// The API server serves the resource a moment after Established.
	ctl := testController{t: t, kind: "Widget", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "widgets"}).Namespace("default")}
	eventually(t, 10*time.Second, "widgets served", func() (bool, string) {
		_, err := ctl.dyn.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Injected truth: observed after d1, Ready after d1 + d2.
	const d1, d2 = 700 * time.Millisecond, 1200 * time.Millisecond
	t0 := ctl.create(ctx, "w1")
	time.Sleep(d1)
	t1 := ctl.setStatus(ctx, "w1", statusOf(1, condition("Ready", "False", 0)))
	time.Sleep(d2)
	t2 := ctl.setStatus(ctx, "w1", statusOf(1, condition("Ready", "True", 0)))
	kind := map[string]string{"kind": "Widget.e2e.kce.io", "namespace": "default", "change": "create"}
	stage := func(s string) map[string]string {
		m := map[string]string{"stage": s}
		for k, v := range kind {
			m[k] = v
		}
		return m
	}
	eventually(t, 10*time.Second, "the episode converged", func() (bool, string) {
		mfs := e.scrape()
		v := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"kind": "Widget.e2e.kce.io", "outcome": "converged"})
		return v == 1, fmt.Sprint(v)
	})
	mfs := e.scrape()
	for _, tc := range []struct {
		stage string
		want  time.Duration
	}{{"observed", t1.Sub(t0)}, {"ready", t2.Sub(t0)}} {
		sum, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", stage(tc.stage))
		if n != 1 || !within(sum, tc.want.Seconds(), 0.3) {
			t.Errorf("stage %s: %d observations, %.3f s; want 1 of %.3f s (+-0.3 s)", tc.stage, n, sum, tc.want.Seconds())
		} else {
			t.Logf("stage %s: %.3f s measured, %.3f s by the controller's write times", tc.stage, sum, tc.want.Seconds())
		}
	}

	// A second object its controller never observes: stalled not_observed
	// past its 2 s stallThreshold.
	ctl.create(ctx, "w2")
	eventually(t, 10*time.Second, "w2 stalled not_observed", func() (bool, string) {
		v, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Widget.e2e.kce.io", "name": "w2", "stage": "observed", "reason": "not_observed"})
		return ok && v > 2, fmt.Sprint(v, ok)
	})
	// The controller stopped: a spec change of w1 (generation 2, change
	// other) is not observed and shows not_observed past 2 s, not before.
	u, err := ctl.dyn.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = map[string]any{"size": int64(2)}
	if _, err := ctl.dyn.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	w1Stalled := func() (float64, bool) {
		return value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Widget.e2e.kce.io", "name": "w1", "stage": "observed", "reason": "not_observed"})
	}
	if _, ok := w1Stalled(); ok && time.Since(changed) < 1500*time.Millisecond {
		t.Error("w1 reported stalled before its 2 s stallThreshold")
	}
	eventually(t, 10*time.Second, "w1 stalled not_observed after its spec change", func() (bool, string) {
		v, ok := w1Stalled()
		return ok && v > 2, fmt.Sprint(v, ok)
	})
	if v, _ := value(e.scrape(), "kube_convergence_rollouts_in_progress", map[string]string{"kind": "Widget.e2e.kce.io", "namespace": "default"}); v != 2 {
		t.Errorf("rollouts_in_progress = %v, want 2 (w1 generation 2, w2)", v)
	}

	// A configured observedGeneration path absent from an object: one
	// decode error and one log line per object, however often it changes.
	probes := testController{t: t, kind: "Probe", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "probes"}).Namespace("default")}
	eventually(t, 10*time.Second, "probes tracking", func() (bool, string) {
		_, err := probes.dyn.List(ctx, metav1.ListOptions{})
		return state("probes.e2e.kce.io", "tracking") == 1 && err == nil, fmt.Sprint(err)
	})
	probes.create(ctx, "p1")
	probes.setStatus(ctx, "p1", statusOf(1, condition("Ready", "False", 0)))
	probes.setStatus(ctx, "p1", statusOf(1, condition("Ready", "True", 0)))
	eventually(t, 10*time.Second, "one decode error", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_resource_decode_errors_total", map[string]string{"resource": "probes.e2e.kce.io"})
		return v == 1, fmt.Sprint(v)
	})
	if n := strings.Count(e.logs.String(), "cannot read observedGeneration"); n != 1 {
		t.Errorf("%d decode error log lines, want 1", n)
	}

	// Delete the CRD: w2's episode closes as deleted, the state is
	// crd_missing, and the informer stops relisting.
	if err := dyn.Resource(crdGVR).Delete(ctx, "widgets."+resGroup, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "crd_missing, w1 and w2 deleted", func() (bool, string) {
		mfs := e.scrape()
		del := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"kind": "Widget.e2e.kce.io", "outcome": "deleted"})
		return state("widgets.e2e.kce.io", "crd_missing") == 1 && del == 2, fmt.Sprint("deleted=", del)
	})
	eventually(t, 30*time.Second, "the CRD gone", func() (bool, string) {
		_, err := dyn.Resource(crdGVR).Get(ctx, "widgets."+resGroup, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	relists := func() float64 {
		return sumFamily(e.scrape(), "kube_convergence_watch_relists_total", map[string]string{"resource": "widgets.e2e.kce.io"})
	}
	before := relists()
	time.Sleep(5 * time.Second) // the reflector's backoff after a failed list starts at 0.8 s
	if after := relists(); after != before {
		t.Errorf("widgets relisted %v times after its CRD was deleted", after-before)
	}
	if _, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Widget.e2e.kce.io"}); ok {
		t.Error("a widget still stalled after its CRD was deleted")
	}
	if v, _ := value(e.scrape(), "kube_convergence_rollouts_in_progress", map[string]string{"kind": "Widget.e2e.kce.io", "namespace": "default"}); v != 0 {
		t.Errorf("rollouts_in_progress = %v after the CRD was deleted, want 0 (kept at 0)", v)
	}
}

// A bad JSONPath in the config file: the exporter exits at start, non-zero,
// naming the file and line.
func TestResourcesBadJSONPathExits(t *testing.T) {
	cfg := writeConfig(t, "resources:\n  - group: e2e.kce.io\n    resource: widgets\n    observedGeneration: '{.status.observedGeneration'\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exporter, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--web.listen-address="+freeAddr(t)).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("exit: %v, want non-zero; output:\n%s", err, out)
	}
	if want := cfg + ": line 4: resources[0].observedGeneration: JSONPath"; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// serviceAccountKubeconfig creates a ServiceAccount bound to role and
// returns a kubeconfig with its token: a user with exactly role's rights.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, name string, role *rbacv1.ClusterRole) string {
	t.Helper()
	role = role.DeepCopy()
	role.Name = name
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = client.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = client.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
		_ = client.CoreV1().ServiceAccounts("default").Delete(bg, name, metav1.DeleteOptions{})
	})
	tok, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(sb.AdminConfig())
	cfg.BearerToken, cfg.BearerTokenFile = tok.Status.Token, ""
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := sb.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// The ClusterRole `rbac --config.file` prints, bound to a fresh
// ServiceAccount, lets the exporter run without a forbidden error; under it:
// a cluster-scoped CRD with two served versions (namespace=""), and a
// cert-manager-style resource whose only observedGeneration is its
// condition's, both timed within 0.3 s of the test controller's writes; a
// Stalled=True condition shows reason stalled within 2 s. Without the rule
// for one resource, that one alone is forbidden and named in /readyz while
// the other tracks.
func TestResourcesRBACAndVariants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	cfgPath := writeConfig(t, `
resources:
  - group: e2e.kce.io
    resource: gadgets
  - group: e2e.kce.io
    resource: certs
    conditions: [Ready]
    stallThreshold: 10m
`)
	t.Cleanup(func() {
		for _, n := range []string{"gadgets", "certs"} {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), n+"."+resGroup, metav1.DeleteOptions{})
		}
	})
	for _, c := range []*unstructured.Unstructured{crd("Gadget", "gadgets", "Cluster", true, "v1beta1", "v1"), crd("Cert", "certs", "Namespaced", true, "v1")} {
		if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.CommandContext(ctx, exporter, "rbac", "--config.file="+cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("rbac: %v\n%s", err, out)
	}
	var role rbacv1.ClusterRole
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096).Decode(&role); err != nil {
		t.Fatalf("decode the printed ClusterRole: %v\n%s", err, out)
	}
	gadgets := schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "gadgets"}
	certs := schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "certs"}
	eventually(t, 10*time.Second, "the custom resources served", func() (bool, string) {
		_, err1 := dyn.Resource(gadgets).List(ctx, metav1.ListOptions{})
		_, err2 := dyn.Resource(certs).List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil, fmt.Sprint(err1, err2)
	})

	t.Run("generated role", func(t *testing.T) {
		kubeconfig := serviceAccountKubeconfig(ctx, t, "kce-e2e-rbac", &role)
		e := startExporter(t, "--kubeconfig="+kubeconfig, "--config.file="+cfgPath, "--stall.threshold=1h")
		body := e.waitReady(60 * time.Second)
		for _, want := range []string{"resource gadgets.e2e.kce.io: tracking, synced", "resource certs.e2e.kce.io: tracking, synced"} {
			if !strings.Contains(body, want) {
				t.Errorf("/readyz lacks %q:\n%s", want, body)
			}
		}
		// Two served versions: the preferred one (v1 over v1beta1) is watched.
		if want := `resource=gadgets.e2e.kce.io state=tracking why="version v1, kind Gadget.e2e.kce.io"`; !strings.Contains(e.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, tail(e.logs.String(), 30))
		}
		mfs := e.scrape()
		for _, c := range []string{"rollouts", "pods", "endpoints", "resources"} {
			if v, _ := value(mfs, "kube_convergence_collector_up", map[string]string{"collector": c}); v != 1 {
				t.Errorf("collector_up{%s} = %v, want 1", c, v)
			}
		}

		const d1, d2 = 600 * time.Millisecond, 900 * time.Millisecond
		// Cluster-scoped, two served versions: the preferred v1 is watched.
		g := testController{t: t, kind: "Gadget", dyn: dyn.Resource(gadgets)}
		gt0 := g.create(ctx, "g1")
		time.Sleep(d1)
		gt1 := g.setStatus(ctx, "g1", statusOf(1, condition("Ready", "False", 0)))
		time.Sleep(d2)
		gt2 := g.setStatus(ctx, "g1", statusOf(1, condition("Ready", "True", 0)))
		// cert-manager style: no status.observedGeneration, the condition's own.
		c := testController{t: t, kind: "Cert", dyn: dyn.Resource(certs).Namespace("default")}
		ct0 := c.create(ctx, "c1")
		time.Sleep(d1)
		ct1 := c.setStatus(ctx, "c1", map[string]any{"conditions": []any{condition("Ready", "False", 1)}})
		time.Sleep(d2)
		ct2 := c.setStatus(ctx, "c1", map[string]any{"conditions": []any{condition("Ready", "True", 1)}})
		for _, tc := range []struct {
			kind, ns, stage string
			want            time.Duration
		}{
			{"Gadget.e2e.kce.io", "", "observed", gt1.Sub(gt0)}, {"Gadget.e2e.kce.io", "", "ready", gt2.Sub(gt0)},
			{"Cert.e2e.kce.io", "default", "observed", ct1.Sub(ct0)}, {"Cert.e2e.kce.io", "default", "ready", ct2.Sub(ct0)},
		} {
			match := map[string]string{"kind": tc.kind, "namespace": tc.ns, "stage": tc.stage, "change": "create"}
			var sum float64
			var n uint64
			eventually(t, 10*time.Second, tc.kind+" "+tc.stage, func() (bool, string) {
				sum, n = histogram(e.scrape(), "kube_convergence_rollout_duration_seconds", match)
				return n == 1, fmt.Sprint(n)
			})
			if !within(sum, tc.want.Seconds(), 0.3) {
				t.Errorf("%s %s: %.3f s, want %.3f s (+-0.3 s)", tc.kind, tc.stage, sum, tc.want.Seconds())
			} else {
				t.Logf("%s %s (namespace %q): %.3f s measured, %.3f s by the controller's write times", tc.kind, tc.stage, tc.ns, sum, tc.want.Seconds())
			}
		}

		// kstatus Stalled=True: reported at once, far before the 10m threshold.
		c.create(ctx, "c2")
		stalledAt := c.setStatus(ctx, "c2", map[string]any{"conditions": []any{condition("Ready", "False", 1), condition("Stalled", "True", 1)}})
		eventually(t, 2*time.Second, "c2 stalled within 2 s", func() (bool, string) {
			_, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Cert.e2e.kce.io", "name": "c2", "stage": "ready", "reason": "stalled"})
			return ok, ""
		})
		t.Logf("Stalled=True reported %v after the write", time.Since(stalledAt).Round(time.Millisecond))
		if strings.Contains(strings.ToLower(e.logs.String()), "forbidden") {
			t.Errorf("a forbidden error under the generated ClusterRole:\n%s", tail(e.logs.String(), 30))
		}
	})

	t.Run("one resource forbidden", func(t *testing.T) {
		partial := role.DeepCopy()
		for i := range partial.Rules {
			if slices.Contains(partial.Rules[i].APIGroups, resGroup) {
				partial.Rules[i].Resources = []string{"gadgets"}
			}
		}
		kubeconfig := serviceAccountKubeconfig(ctx, t, "kce-e2e-partial", partial)
		e := startExporter(t, "--kubeconfig="+kubeconfig, "--config.file="+cfgPath)
		state := func(resource, s string) float64 {
			v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": resource, "state": s})
			return v
		}
		e.waitReady(60 * time.Second)
		eventually(t, 15*time.Second, "certs forbidden, gadgets tracking", func() (bool, string) {
			return state("certs.e2e.kce.io", "forbidden") == 1 && state("gadgets.e2e.kce.io", "tracking") == 1,
				fmt.Sprint(state("certs.e2e.kce.io", "tracking"))
		})
		_, body, _ := e.get("/readyz")
		if want := "resource certs.e2e.kce.io: forbidden (not tracked, excluded from readiness)"; !strings.Contains(body, want) {
			t.Errorf("/readyz lacks %q:\n%s", want, body)
		}
	})
}

// The demo's Backup CRD and controller (make demo) against the sandbox:
// the exporter, configured with the demo's configuration, times the
// controller's injected delays, and the Backup that fails shows stalled.
func TestResourcesDemoBackups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	// TestDashboards installs the whole demo and deletes its namespace when
	// it ends: wait until that deletion (kwok ends pods within their 30 s
	// grace period) is over.
	eventually(t, 2*time.Minute, "no terminating "+demo.Namespace+" namespace", func() (bool, string) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, demo.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return ns.Status.Phase != corev1.NamespaceTerminating, string(ns.Status.Phase)
	})
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "backups."+demo.BackupGroup, metav1.DeleteOptions{})
		_ = client.CoreV1().Namespaces().Delete(context.Background(), demo.Namespace, metav1.DeleteOptions{})
	})
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, demo.BackupsConfig))
	e.waitReady(60 * time.Second)
	if err := demo.InstallBackups(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	ctl, stop := context.WithCancel(ctx)
	defer stop()
	var wmu sync.Mutex
	var writes []demo.BackupWrite
	go demo.RunBackupControllerReporting(ctl, dyn, slog.New(slog.DiscardHandler), func(w demo.BackupWrite) {
		wmu.Lock()
		writes = append(writes, w)
		wmu.Unlock()
	})
	match := func(stage string) map[string]string {
		return map[string]string{"kind": "Backup.demo.kce.io", "namespace": demo.Namespace, "stage": stage, "change": "create"}
	}
	eventually(t, 20*time.Second, "two backups ready, one stalled", func() (bool, string) {
		mfs := e.scrape()
		_, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", match("ready"))
		_, stalled := value(mfs, "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Backup.demo.kce.io", "name": "broken", "reason": "stalled"})
		return n == 2 && stalled, fmt.Sprint(n, stalled)
	})
	mfs := e.scrape()
	// The truth: each backup's create as the API server completed it (the
	// audit log) and the controller's first status write (observed: the
	// three backups) and its Ready=True write (ready: two), as the API
	// server answered them. The exporter times each stage by its receipt
	// of those writes: later by the watch's latency, tens of milliseconds.
	created := map[string]time.Time{}
	for _, ev := range audited(t, "backups", demo.Namespace, func(e auditEvent) bool {
		return e.Verb == "create" && e.ResponseStatus.Code == 201 && e.ObjectRef.Subresource == ""
	}) {
		created[ev.ObjectRef.Name] = ev.StageTimestamp
	}
	wmu.Lock()
	truth := map[string][]float64{}
	for _, w := range writes {
		c, ok := created[w.Name]
		if w.Generation != 1 || !ok {
			continue // a later spec change (hourly every 20 s), or no create seen
		}
		stage := "observed"
		if w.Ready {
			stage = "ready"
		} else if slices.ContainsFunc(writes, func(o demo.BackupWrite) bool { return o.Name == w.Name && o.Generation == 1 && o.At.Before(w.At) }) {
			continue // the failing backup's last write: no stage reached
		}
		truth[stage] = append(truth[stage], w.At.Sub(c).Seconds())
	}
	wmu.Unlock()
	for _, stage := range []string{"observed", "ready"} {
		sum, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", match(stage))
		want := truth[stage]
		if len(want) == 0 || uint64(len(want)) != n {
			t.Errorf("stage %s: %d observations, the controller wrote %d (%v)", stage, n, len(want), want)
			continue
		}
		var wantSum float64
		for _, d := range want {
			wantSum += d
		}
		mean, wantMean := sum/float64(n), wantSum/float64(len(want))
		// The write's answer reaches the controller about when the watch
		// event reaches the exporter: within 0.15 s either way.
		if math.Abs(mean-wantMean) > 0.15 {
			t.Errorf("stage %s: mean %.3f s over %d backups; the controller's writes say %.3f s", stage, mean, n, wantMean)
		} else {
			t.Logf("stage %s: mean %.3f s over %d backups, the controller's writes %.3f s (configured delay %v)", stage, mean, n, wantMean,
				map[string]time.Duration{"observed": demo.BackupObserveDelay, "ready": demo.BackupObserveDelay + demo.BackupReadyDelay}[stage])
		}
	}
}

// A CRD that starts serving a newer version: the exporter switches its
// informer to the new preferred version, and the episode in flight goes on
// (not closed as deleted) and is measured when its controller observes it.
func TestResourcesVersionSwitchKeepsEpisodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, "resources:\n  - {group: e2e.kce.io, resource: dials}\n"))
	e.waitReady(60 * time.Second)
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "dials."+resGroup, metav1.DeleteOptions{})
	})
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Dial", "dials", "Namespaced", true, "v1beta1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := testController{t: t, kind: "Dial", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1beta1", Resource: "dials"}).Namespace("default")}
	eventually(t, 10*time.Second, "dials served", func() (bool, string) {
		_, err := old.dyn.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	eventually(t, 10*time.Second, "tracking v1beta1", func() (bool, string) {
		return strings.Contains(e.logs.String(), `resource=dials.e2e.kce.io state=tracking why="version v1beta1`), ""
	})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": resGroup + "/v1beta1", "kind": "Dial",
		"metadata": map[string]any{"name": "d1"}, "spec": map[string]any{"size": int64(1)}}}
	if _, err := old.dyn.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// Serve v1 too: the preferred version becomes v1.
	err := retryOnConflict(func() error {
		u, err := dyn.Resource(crdGVR).Get(ctx, "dials."+resGroup, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vs, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		v1 := crd("Dial", "dials", "Namespaced", true, "v1").Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
		v1["storage"] = false
		_ = unstructured.SetNestedSlice(u.Object, append(vs, v1), "spec", "versions")
		_, err = dyn.Resource(crdGVR).Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "watching v1", func() (bool, string) {
		return strings.Contains(e.logs.String(), `msg="custom resource: watching another version" collector=resources resource=dials.e2e.kce.io from=v1beta1 to=v1`), ""
	})
	ctl := testController{t: t, kind: "Dial", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "dials"}).Namespace("default")}
	// The API server serves a version added to a CRD about a second later
	// (its discovery and handlers are rebuilt): the test's own writes wait
	// for it like the exporter's informer does.
	eventually(t, 10*time.Second, "v1 served", func() (bool, string) {
		_, err := ctl.dyn.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	// The status is written once the v1 informer has synced. Before, the
	// API server closes the v1beta1 watch as it rebuilds the CRD's
	// storage, and the v1 informer's watch may not be open yet: a write in
	// that window reaches the exporter with the next list, up to about a
	// second later (the reflector's backoff), on either informer, which is
	// what the flaky 1.1 s against 0.13 s of truth measured.
	eventually(t, 20*time.Second, "the v1 informer synced", func() (bool, string) {
		return strings.Contains(e.logs.String(), `resource=dials.e2e.kce.io from=v1beta1 to=v1`) &&
			strings.Contains(e.logs.String(), "the new version's informer has synced"), ""
	})
	t1 := ctl.setStatus(ctx, "d1", statusOf(1, condition("Ready", "True", 0)))
	match := map[string]string{"kind": "Dial.e2e.kce.io", "stage": "ready", "change": "create"}
	var sum float64
	eventually(t, 10*time.Second, "d1 ready measured", func() (bool, string) {
		var n uint64
		sum, n = histogram(e.scrape(), "kube_convergence_rollout_duration_seconds", match)
		return n == 1, fmt.Sprint(n)
	})
	if !within(sum, t1.Sub(t0).Seconds(), 0.3) {
		t.Errorf("ready %.3f s, want %.3f s (+-0.3 s)", sum, t1.Sub(t0).Seconds())
	}
	if del := sumFamily(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"kind": "Dial.e2e.kce.io", "outcome": "deleted"}); del != 0 {
		t.Errorf("%v episodes closed as deleted by the version switch", del)
	}
}

func retryOnConflict(f func() error) error {
	for i := 0; ; i++ {
		err := f()
		if !apierrors.IsConflict(err) || i == 5 {
			return err
		}
	}
}

// An exporter restart over healthy custom resources pages nobody: 10
// phase-only objects (judged by a ready: expression, no observedGeneration
// anywhere) and 10 conditions-only ones (Ready=True without
// observedGeneration, True since before their last spec write), each
// created, made healthy by its controller, then written again (generation
// 2) without its status changing. Neither the exporter that watched it all
// nor the one started after it shows a stalled series or an open episode
// for them, past their 2 s stallThreshold. A canary, really not ready when
// the second exporter starts, stalls: proof that the threshold passed and
// that the exporter does judge.
func TestResourcesRestartOverHealthy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	t.Cleanup(func() {
		for _, n := range []string{"phases", "conds"} {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), n+"."+resGroup, metav1.DeleteOptions{})
		}
	})
	for _, c := range []*unstructured.Unstructured{crd("Phase", "phases", "Namespaced", true, "v1"), crd("Cond", "conds", "Namespaced", true, "v1")} {
		if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctls := map[string]testController{}
	for _, r := range []struct{ kind, plural string }{{"Phase", "phases"}, {"Cond", "conds"}} {
		ctls[r.plural] = testController{t: t, kind: r.kind, dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: r.plural}).Namespace("default")}
		eventually(t, 10*time.Second, r.plural+" served", func() (bool, string) {
			_, err := ctls[r.plural].dyn.List(ctx, metav1.ListOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	cfg := writeConfig(t, `
resources:
  - group: e2e.kce.io
    resource: phases
    ready: ['{.status.phase}=Running']
    stallThreshold: 2s
  - group: e2e.kce.io
    resource: conds
    stallThreshold: 2s
`)
	first := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg)
	first.waitReady(60 * time.Second)
	eventually(t, 10*time.Second, "both resources tracking", func() (bool, string) {
		mfs := first.scrape()
		a, _ := value(mfs, "kube_convergence_resource_state", map[string]string{"resource": "phases.e2e.kce.io", "state": "tracking"})
		b, _ := value(mfs, "kube_convergence_resource_state", map[string]string{"resource": "conds.e2e.kce.io", "state": "tracking"})
		return a == 1 && b == 1, fmt.Sprint(a, b)
	})

	// Ready since a day ago: a condition that stayed True through writes.
	since := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	statuses := map[string]map[string]any{
		"phases": {"phase": "Running"},
		"conds": {"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled",
			"message": "set by the e2e controller", "lastTransitionTime": since}}},
	}
	for plural, ctl := range ctls {
		for i := range 10 {
			name := fmt.Sprintf("%s-%02d", plural, i)
			ctl.create(ctx, name)
			ctl.setStatus(ctx, name, statuses[plural])
			if err := retryOnConflict(func() error {
				u, err := ctl.dyn.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				u.Object["spec"] = map[string]any{"size": int64(2)}
				_, err = ctl.dyn.Update(ctx, u, metav1.UpdateOptions{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// quiet checks e shows nothing for the 20: no stalled series, no open
	// episode, no recovered one; the canary only. recovered: whether the
	// canary's episode was recovered (e started after it was written).
	quiet := func(e *exporterProc, what string, recovered float64) {
		t.Helper()
		mfs := e.scrape()
		if mf := mfs["kube_convergence_rollout_stalled_seconds"]; mf != nil {
			for _, m := range mf.Metric {
				if labelsMatch(m, map[string]string{"namespace": "default"}) && !labelsMatch(m, map[string]string{"name": "canary"}) &&
					(labelsMatch(m, map[string]string{"kind": "Phase.e2e.kce.io"}) || labelsMatch(m, map[string]string{"kind": "Cond.e2e.kce.io"})) {
					t.Errorf("%s: stalled series %v", what, m.Label)
				}
			}
		}
		for kind, want := range map[string][2]float64{"Phase.e2e.kce.io": {1, recovered}, "Cond.e2e.kce.io": {0, 0}} {
			if v, _ := value(mfs, "kube_convergence_rollouts_in_progress", map[string]string{"kind": kind, "namespace": "default"}); v != want[0] {
				t.Errorf("%s: rollouts_in_progress{kind=%s} = %v, want %v (the canary only)", what, kind, v, want[0])
			}
			if v := sumFamily(mfs, "kube_convergence_rollouts_recovered_total", map[string]string{"kind": kind}); v != want[1] {
				t.Errorf("%s: rollouts_recovered_total{kind=%s} = %v, want %v", what, kind, v, want[1])
			}
		}
	}
	canaryStalled := func(e *exporterProc) (bool, string) {
		v, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"kind": "Phase.e2e.kce.io", "name": "canary", "stage": "ready"})
		return ok && v > 2, fmt.Sprint(v, ok)
	}
	// The canary: created last, never ready.
	ctls["phases"].create(ctx, "canary")
	ctls["phases"].setStatus(ctx, "canary", map[string]any{"phase": "Pending"})

	// The exporter that watched it all: every create converged, every
	// later write left the objects ready; past the threshold, the canary
	// alone is stalled.
	eventually(t, 20*time.Second, "the 20 creates converged and the canary stalled", func() (bool, string) {
		mfs := first.scrape()
		n := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"outcome": "converged", "kind": "Phase.e2e.kce.io"}) +
			sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"outcome": "converged", "kind": "Cond.e2e.kce.io"})
		stalled, why := canaryStalled(first)
		return n == 20 && stalled, fmt.Sprint("converged ", n, ", canary ", why)
	})
	quiet(first, "the live exporter", 0)

	if _, err := first.stop(10 * time.Second); err != nil {
		t.Fatalf("first exporter: %v", err)
	}
	second := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg)
	second.waitReady(60 * time.Second)
	restarted := time.Now()
	eventually(t, 20*time.Second, "the canary stalled after the restart", func() (bool, string) { return canaryStalled(second) })
	t.Logf("canary stalled %v after the restart", time.Since(restarted).Round(time.Millisecond))
	quiet(second, "after the restart", 1)
}
