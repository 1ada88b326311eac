package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A truth pod that another writer sets not Ready after the truth write (as
// a lagging kwok did in a 2,000-pod run, leaving the run waiting for ever)
// is made Ready again; its truth stays the first write.
func TestTruthWriterWritesAgainWhenReadyIsTakenBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "scale-truth-00", Name: "truth-000-x", UID: "u1", Labels: map[string]string{truthLabel: "true"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}
	c := fake.NewClientset(pod)
	w, err := startTruthWriter(ctx, c, slog.New(slog.DiscardHandler), 1)
	if err != nil {
		t.Fatal(err)
	}
	ready := func(want bool) {
		t.Helper()
		for ctx.Err() == nil {
			p, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err == nil && podReady(p) == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the pod never became ready=%v", want)
	}
	ready(true)
	// The writer records its write after the API answered it: a poll can
	// see the pod Ready before the record exists (a flake in CI, 874a583).
	var first map[string]acceptance
	for ctx.Err() == nil {
		if first, _, _ = w.results(); len(first) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The other writer: Ready back to False.
	p, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].Status = corev1.ConditionFalse
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not waited for as ready=false: the writer may have written Ready
	// again before a poll sees it taken back (a flake in CI).
	ready(true)
	for ctx.Err() == nil {
		if _, _, again := w.results(); again > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	written, failed, rewritten := w.results()
	if len(written) != 1 || failed != 0 || rewritten != 1 || written["u1"] != first["u1"] {
		t.Errorf("written %v (first %v), %d failed, %d rewritten: want the first write kept, 0, 1", written, first, failed, rewritten)
	}
}
