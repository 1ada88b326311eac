package informers

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A pod with 300 scheduling gates stays gated after compaction (its record
// keeps whether, not the gates); a pod without gates stays without.
func TestCompactKeepsSchedulingGated(t *testing.T) {
	gates := make([]corev1.PodSchedulingGate, 300)
	for i := range gates {
		gates[i].Name = fmt.Sprintf("example.com/queue-%d", i)
	}
	gated, err := Compact(&corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: gates}})
	if err != nil {
		t.Fatal(err)
	}
	if p := gated.(*Pod); !p.Spec.SchedulingGated {
		t.Fatalf("a pod with 300 gates is not gated after compaction: %+v", p.Spec)
	}
	open, err := Compact(&corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if p := open.(*Pod); p.Spec.SchedulingGated {
		t.Fatalf("a pod without gates is gated after compaction: %+v", p.Spec)
	}
}
