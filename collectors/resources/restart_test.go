package resources

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// healthy is a custom resource long healthy: its spec last written (at
// generation 4) a day ago, its status written by its controller since,
// without an observedGeneration anywhere: a phase (phase-only operators),
// or a Ready condition that stayed True through the last spec write (its
// lastTransitionTime older than the write).
func healthy(kind string, i int, status map[string]any) *unstructured.Unstructured {
	written := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": kind,
		"metadata": map[string]any{
			"name": fmt.Sprintf("%s-%02d", strings.ToLower(kind), i), "namespace": "apps",
			"uid": fmt.Sprintf("%s-uid-%02d", kind, i), "resourceVersion": fmt.Sprint(100 + i), "generation": int64(4),
			"creationTimestamp": written.Add(-240 * time.Hour).Format(time.RFC3339),
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply", "time": written.Format(time.RFC3339),
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}},
		},
		"spec":   map[string]any{"size": int64(i)},
		"status": status,
	}}
}

// An exporter restart over 10 phase-only and 10 conditions-only healthy
// custom resources: every object arrives through the initial list, through
// the watch seam's rules (informers.Handle), and none opens an episode or
// stalls, an hour later or ever. Before, each opened a recovered episode,
// stalled at once (18 of 20 seen on the sandbox).
func TestRestartOverHealthyCustomResources(t *testing.T) {
	cfg, err := config.Parse([]byte(`
resources:
  - group: example.com
    resource: phases
    ready: ['{.status.phase}=Running']
  - group: example.com
    resource: conds
`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	ep := collectors.NewEpisodes(cfg, clock)
	c := New(ep, cfg, 5*time.Minute, slog.New(slog.DiscardHandler), clock)
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]tracker.Kind{"phases.example.com": "Phase.example.com", "conds.example.com": "Cond.example.com"}
	for name, kind := range kinds {
		r := c.resources[name]
		h := informers.Handle(c.objectHandlers(r, kind))
		for i := range 10 {
			status := map[string]any{"phase": "Running"}
			if name == "conds.example.com" {
				status = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled",
					"lastTransitionTime": "2026-11-01T08:00:00Z"}}}
			}
			u := healthy(string(kind[:strings.Index(string(kind), ".")]), i, status)
			informers.Stamp(u, start.Add(time.Duration(i)*time.Millisecond), true)
			obj, err := r.conv.Transform(u)
			if err != nil {
				t.Fatal(err)
			}
			h.OnAdd(obj, true)
		}
	}
	for _, at := range []time.Duration{time.Second, 6 * time.Minute, time.Hour} {
		now = start.Add(at)
		c.mu.Lock()
		c.ep.Observe(c.tr.Tick(now), c.logger)
		c.mu.Unlock()
		open, stalled := c.Episodes(now)
		if len(open) != 0 || len(stalled) != 0 {
			t.Fatalf("+%v after the restart: %d open, %d stalled episodes; want none: %+v", at, len(open), len(stalled), stalled)
		}
		if n := testutil.CollectAndCount(reg, "kube_convergence_rollout_stalled_seconds"); n != 0 {
			t.Fatalf("+%v: %d stalled series, want 0", at, n)
		}
	}
}
