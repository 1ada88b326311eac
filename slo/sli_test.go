package slo

import (
	"fmt"
	"testing"
)

// The catalogue is read from the collectors' declarations; what it says is
// the public interface users' SLO files match, pinned here so that a
// renamed metric, label or label value is a deliberate change.
func TestLatencyCatalogueIsThePublicInterface(t *testing.T) {
	want := []LatencyMetric{
		{
			Histogram: "kube_convergence_rollout_duration_seconds",
			Exceeded:  "kube_convergence_rollout_threshold_exceeded_total",
			Labels: []LabelValues{
				{Name: "kind", Values: []string{"Deployment", "StatefulSet", "DaemonSet"}},
				{Name: "namespace"},
				{Name: "stage", Values: []string{"observed", "updated", "available", "ready", "endpoints_ready"}},
				{Name: "change", Values: []string{"create", "template", "scale", "other"}},
			},
		},
		{
			Histogram: "kube_convergence_pod_startup_seconds",
			Exceeded:  "kube_convergence_pod_startup_threshold_exceeded_total",
			Labels: []LabelValues{
				{Name: "namespace"},
				{Name: "owner_kind"},
				{Name: "stage", Values: []string{"scheduled", "ready_to_start_containers", "initialized", "containers_ready", "ready"}},
			},
		},
		{
			Histogram: "kube_convergence_endpoint_propagation_seconds",
			Exceeded:  "kube_convergence_endpoint_propagation_threshold_exceeded_total",
			Labels:    []LabelValues{{Name: "namespace"}},
		},
	}
	got := LatencyMetrics()
	for i := range got {
		got[i].Buckets = nil
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("catalogue\n%v\nwant\n%v", got, want)
	}
}
