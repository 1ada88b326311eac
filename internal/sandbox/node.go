package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// nodeReadyTimeout bounds CreateNode's wait. kwok initialises a node within
// tens of milliseconds; the controller-manager removes the not-ready taint
// within about a second.
const nodeReadyTimeout = time.Minute

// CreateNode creates a Node that kwok manages (annotation
// kwok.x-k8s.io/node=fake, label type=kwok) with room for 1000 pods, and
// waits until it is Ready and carries no not-ready or unreachable taint, so
// that pods created afterwards are scheduled at once.
func (s *Sandbox) CreateNode(ctx context.Context, name string) error {
	if !s.enabled[Kwok] {
		return fmt.Errorf("sandbox: create node %s: kwok is not running in this sandbox", name)
	}
	cs, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return fmt.Errorf("sandbox: create node %s: %w", name, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		// The apiserver keeps the status of a created Node (the kubelet
		// registers this way), and kwok's node-initialize stage keeps an
		// allocatable that is already set.
		Status: corev1.NodeStatus{Capacity: room, Allocatable: room},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sandbox: create node %s: %w", name, err)
	}
	var last *corev1.Node
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, nodeReadyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient; the deadline decides
		}
		last = n
		return nodeSchedulable(n), nil
	})
	if err != nil {
		state := "never read back"
		if last != nil {
			state = fmt.Sprintf("conditions %v, taints %v", last.Status.Conditions, last.Spec.Taints)
		}
		return fmt.Errorf("sandbox: node %s not ready (%s): %w", name, state, err)
	}
	return nil
}

func nodeSchedulable(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}
