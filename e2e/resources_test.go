package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
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
	t   *testing.T
	dyn dynamic.ResourceInterface
}

func (c testController) create(ctx context.Context, name string) time.Time {
	c.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": resGroup + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"size": int64(1)},
	}}
	if _, err := c.dyn.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
}

// setStatus writes status (observedGeneration and one condition) and
// returns when the write returned.
func (c testController) setStatus(ctx context.Context, name string, observed int64, condType, condStatus string) time.Time {
	c.t.Helper()
	u, err := c.dyn.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	status := map[string]any{"conditions": []any{map[string]any{
		"type": condType, "status": condStatus, "reason": "Test", "message": "set by the e2e controller",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}
	if observed > 0 {
		status["observedGeneration"] = observed
	}
	u.Object["status"] = status
	if _, err := c.dyn.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
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
// own write times within 0.3 s. Then its CRD is deleted: the episode in
// flight closes as deleted, the state is crd_missing, and the informer
// stops (no further relists). A CRD without status subresource is refused.
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
		for _, n := range []string{"widgets", "nostatuses"} {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), n+"."+resGroup, metav1.DeleteOptions{})
		}
	})
	installed := time.Now()
	for _, c := range []*unstructured.Unstructured{crd("Widget", "widgets", "Namespaced", true, "v1"), crd("NoStatus", "nostatuses", "Namespaced", false, "v1")} {
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
	ctl := testController{t: t, dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "widgets"}).Namespace("default")}
	eventually(t, 10*time.Second, "widgets served", func() (bool, string) {
		_, err := ctl.dyn.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Injected truth: observed after d1, Ready after d1 + d2.
	const d1, d2 = 700 * time.Millisecond, 1200 * time.Millisecond
	t0 := ctl.create(ctx, "w1")
	time.Sleep(d1)
	t1 := ctl.setStatus(ctx, "w1", 1, "Ready", "False")
	time.Sleep(d2)
	t2 := ctl.setStatus(ctx, "w1", 1, "Ready", "True")
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

	// Delete the CRD: w2's episode closes as deleted, the state is
	// crd_missing, and the informer stops relisting.
	if err := dyn.Resource(crdGVR).Delete(ctx, "widgets."+resGroup, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "crd_missing and w2 deleted", func() (bool, string) {
		mfs := e.scrape()
		del := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"kind": "Widget.e2e.kce.io", "outcome": "deleted"})
		return state("widgets.e2e.kce.io", "crd_missing") == 1 && del == 1, fmt.Sprint("deleted=", del)
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
	if _, ok := value(e.scrape(), "kube_convergence_rollout_stalled_seconds", map[string]string{"name": "w2"}); ok {
		t.Error("w2 still stalled after its CRD was deleted")
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
