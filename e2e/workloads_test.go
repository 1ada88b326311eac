package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
)

func namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The namespace controller needs the default service account for pods
	// only with the ServiceAccount admission plugin; the sandbox's
	// controller-manager creates it within a second anyway.
	return name
}

func service(t *testing.T, ns, app string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watcher records, with its own receive times, when an object reached a
// state: the test's independent measurement of what the exporter measures.
type watcher struct {
	t  *testing.T
	w  watch.Interface
	ch <-chan watch.Event
}

func watchKind(t *testing.T, ns string, kind string) *watcher {
	t.Helper()
	ctx := context.Background()
	var w watch.Interface
	var err error
	switch kind {
	case "Deployment":
		w, err = client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	case "StatefulSet":
		w, err = client.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{})
	case "DaemonSet":
		w, err = client.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &watcher{t: t, w: w, ch: w.ResultChan()}
}

// until returns the receive time of the first event satisfying cond.
func (w *watcher) until(timeout time.Duration, what string, cond func(runtime.Object) bool) time.Time {
	w.t.Helper()
	deadline := time.After(timeout)
	var last runtime.Object
	for {
		select {
		case ev, ok := <-w.ch:
			now := time.Now()
			if !ok {
				w.t.Fatalf("watch closed waiting for %s", what)
			}
			last = ev.Object
			if cond(ev.Object) {
				return now
			}
		case <-deadline:
			w.t.Fatalf("timed out after %v waiting for %s; last object: %+v", timeout, what, last)
		}
	}
}

func generationIs(g int64) func(runtime.Object) bool {
	return func(o runtime.Object) bool { return o.(metav1.Object).GetGeneration() == g }
}

// deploymentAvailable is the test's own reading of the `available` stage.
func deploymentAvailable(g int64) func(runtime.Object) bool {
	return func(o runtime.Object) bool {
		d := o.(*appsv1.Deployment)
		n := *d.Spec.Replicas
		if d.Generation != g || d.Status.ObservedGeneration < g || d.Status.UpdatedReplicas != n ||
			d.Status.AvailableReplicas != n || d.Status.Replicas != n {
			return false
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				return c.Reason == "NewReplicaSetAvailable"
			}
		}
		return true
	}
}

// stageSeconds waits until the exporter's histogram has n observations for
// the labels and returns their mean.
func stageSeconds(t *testing.T, e *exporterProc, n uint64, labels map[string]string) float64 {
	t.Helper()
	return familySeconds(t, e, "kube_convergence_rollout_duration_seconds", n, labels)
}

// recoveredStageSeconds is stageSeconds for the recovered rollouts' family.
func recoveredStageSeconds(t *testing.T, e *exporterProc, n uint64, labels map[string]string) float64 {
	t.Helper()
	return familySeconds(t, e, "kube_convergence_rollout_recovered_duration_seconds", n, labels)
}

func familySeconds(t *testing.T, e *exporterProc, family string, n uint64, labels map[string]string) float64 {
	t.Helper()
	var sum float64
	eventually(t, 30*time.Second, fmt.Sprintf("%s%v count %d", family, labels, n), func() (bool, string) {
		s, c := histogram(e.scrape(), family, labels)
		sum = s
		return c == n, fmt.Sprintf("count %d sum %.3f", c, s)
	})
	return sum / float64(n)
}
