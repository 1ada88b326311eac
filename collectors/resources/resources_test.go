package resources

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// crd is a CRD of widgets.example.com as the API server serves it.
func crd(established bool, versions ...map[string]any) *unstructured.Unstructured {
	vs := make([]any, len(versions))
	for i, v := range versions {
		vs[i] = v
	}
	status := "False"
	if established {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "versions": vs,
			"names": map[string]any{"kind": "Widget", "plural": "widgets"}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
	}}
}

func ver(name string, served, status bool) map[string]any {
	v := map[string]any{"name": name, "served": served, "storage": true}
	if status {
		v["subresources"] = map[string]any{"status": map[string]any{}}
	}
	return v
}

// The states that need no informer: each CRD shape gives its state, exposed
// as 1 for it and 0 for the others, and logged once per change.
func TestCRDStates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		crd     *unstructured.Unstructured
		deleted bool
		want    string
	}{
		{"not established", "", crd(false, ver("v1", true, true)), false, StateCRDMissing},
		{"deleted", "", crd(true, ver("v1", true, true)), true, StateCRDMissing},
		{"configured version not served", "v2", crd(true, ver("v1", true, true), ver("v2", false, true)), false, StateVersionNotServed},
		{"configured version absent", "v3", crd(true, ver("v1", true, true)), false, StateVersionNotServed},
		{"no status subresource", "", crd(true, ver("v1", true, false)), false, StateNoStatusSubresource},
		{"preferred version without status subresource", "", crd(true, ver("v1beta1", true, true), ver("v1", true, false)), false, StateNoStatusSubresource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Resources = []config.Resource{{Group: "example.com", Resource: "widgets", Version: tc.version, Conditions: []string{"Ready"}}}
			c := New(collectors.NewEpisodes(cfg, time.Now), cfg, time.Minute, slog.New(slog.DiscardHandler), time.Now)
			reg := prometheus.NewPedanticRegistry()
			if err := c.Register(reg); err != nil {
				t.Fatal(err)
			}
			dyn := start(t, c, tc.crd)
			if tc.deleted {
				// Tracked first, then its CRD deleted.
				waitState(t, c, StateTracking)
				if err := dyn.Resource(crdGVR).Delete(context.Background(), tc.crd.GetName(), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			waitState(t, c, tc.want)
			if got := c.States()["widgets.example.com"]; got != tc.want {
				t.Fatalf("state %q, want %q", got, tc.want)
			}
			for _, s := range States {
				want := 0.0
				if s == tc.want {
					want = 1
				}
				if got := testutil.ToFloat64(c.state.WithLabelValues("widgets.example.com", s)); got != want {
					t.Errorf("resource_state{state=%q} = %v, want %v", s, got, want)
				}
			}
			ready, lines := c.Readiness()
			if want := "resource widgets.example.com: " + tc.want + " (not tracked, excluded from readiness)"; len(lines) != 1 || lines[0] != want {
				t.Errorf("readiness lines %q, want %q", lines, want)
			}
			_ = ready // whether the CRD list has synced yet does not matter here
		})
	}
}

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// start starts c on a fake API server holding crds and no widget.
func start(t *testing.T, c *Collector, crds ...*unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	t.Helper()
	objs := make([]runtime.Object, len(crds))
	for i, u := range crds {
		objs[i] = u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdGVR: "CustomResourceDefinitionList", widgetGVR: "WidgetList",
	}, objs...)
	f := informers.New(fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
	f.SetDynamic(dyn)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Start(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	return dyn
}

// waitState waits until widgets.example.com is in state want.
func waitState(t *testing.T, c *Collector, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.States()["widgets.example.com"] != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %q after 10 s, want %q", c.States()["widgets.example.com"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Without resources the collector reads nothing: the default ClusterRole
// needs no CRD rule.
func TestNothingConfiguredReadsNothing(t *testing.T) {
	cfg := config.Default()
	c := New(collectors.NewEpisodes(cfg, time.Now), cfg, time.Minute, slog.New(slog.DiscardHandler), time.Now)
	if rs := c.Resources(); len(rs) != 0 {
		t.Errorf("resources %v, want none", rs)
	}
	if ready, lines := c.Readiness(); !ready || len(lines) != 0 {
		t.Errorf("readiness %v %q", ready, lines)
	}
}
