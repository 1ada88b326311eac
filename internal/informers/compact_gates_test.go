package informers

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A pod with 300 scheduling gates stays gated after compaction, with one
// gate kept; a pod without gates stays without.
func TestCompactKeepsSchedulingGated(t *testing.T) {
	gates := make([]corev1.PodSchedulingGate, 300)
	for i := range gates {
		gates[i].Name = fmt.Sprintf("example.com/queue-%d", i)
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: gates}}
	if _, err := Compact(p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.SchedulingGates) != 1 || p.Spec.SchedulingGates[0].Name != "example.com/queue-0" {
		t.Fatalf("gates after compaction = %v, want the first of 300", p.Spec.SchedulingGates)
	}
	open := &corev1.Pod{}
	if _, err := Compact(open); err != nil {
		t.Fatal(err)
	}
	if len(open.Spec.SchedulingGates) != 0 {
		t.Fatalf("gates appeared: %v", open.Spec.SchedulingGates)
	}
}
