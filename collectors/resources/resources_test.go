package resources

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// crd is a CRD of widgets.example.com as compactCRD leaves it.
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
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "versions": vs,
			"names": map[string]any{"kind": "Widget", "plural": "widgets"}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
	}}
}

func ver(name string, served, status bool) map[string]any {
	return map[string]any{"name": name, "served": served, "storage": true, "statusSubresource": status}
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
			c.onCRD(tc.crd, tc.deleted)
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
			_ = ready // the CRD list has not synced in this test
		})
	}
}

func TestPreferredVersion(t *testing.T) {
	for _, tc := range []struct {
		versions map[string]crdVersion
		want     string
	}{
		{map[string]crdVersion{"v1beta1": {served: true}, "v1": {served: true}, "v1alpha1": {served: true}}, "v1"},
		{map[string]crdVersion{"v1beta1": {served: true}, "v1": {served: false}}, "v1beta1"},
		{map[string]crdVersion{"v2beta1": {served: true}, "v1": {served: true}}, "v1"}, // GA before beta, as discovery orders them
		{map[string]crdVersion{"v2": {served: true}, "v10": {served: true}}, "v10"},
		{map[string]crdVersion{"v1": {served: false}}, ""},
	} {
		if got := preferred(tc.versions); got != tc.want {
			t.Errorf("preferred(%v) = %q, want %q", tc.versions, got, tc.want)
		}
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
