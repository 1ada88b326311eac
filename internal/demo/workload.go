// Package demo is the workload of `make demo` (and of end-to-end tests that
// need a busy cluster): rollouts that converge quickly and slowly, one that
// never converges because its pods never become Ready, one blocked by a
// ResourceQuota, a StatefulSet and a DaemonSet that roll, scale-ups and
// scale-downs, pods that report PodReadyToStartContainers, Services whose
// endpoints lag their pods (the demo's controller-manager batches slice
// updates, see SliceBatchPeriod), a pod in two Services and a selector that
// moves, and churn every few seconds.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Namespace holds the demo workload; QuotaNamespace the quota-blocked one.
const (
	Namespace      = "demo"
	QuotaNamespace = "demo-quota"
)

// SliceBatchPeriod is the demo controller-manager's
// --endpointslice-updates-batch-period: pod-triggered EndpointSlice updates
// wait that long, so every Service's endpoints lag their pods' readiness by
// up to 2 s, as on large clusters that batch to cut slice churn (0 by
// default: tens of milliseconds, too fast to see).
const SliceBatchPeriod = 2 * time.Second

// Delays returns kwok annotations for exact pod stage delays.
func Delays(create, ready time.Duration) map[string]string {
	return map[string]string{
		"pod-create.stage.kwok.x-k8s.io/delay":        create.String(),
		"pod-create.stage.kwok.x-k8s.io/jitter-delay": create.String(),
		"pod-ready.stage.kwok.x-k8s.io/delay":         ready.String(),
		"pod-ready.stage.kwok.x-k8s.io/jitter-delay":  ready.String(),
	}
}

// Install creates the demo objects. It is idempotent only on a fresh cluster.
func Install(ctx context.Context, c kubernetes.Interface) error {
	for _, ns := range []string{Namespace, QuotaNamespace} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("demo: namespace %s: %w", ns, err)
		}
	}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: QuotaNamespace, Name: "two-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}
	if _, err := c.CoreV1().ResourceQuotas(QuotaNamespace).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("demo: quota: %w", err)
	}
	deadline := int32(30)
	objects := []struct {
		ns  string
		d   *appsv1.Deployment
		svc bool
	}{
		// Converges in about 1.5 s per pod wave.
		{Namespace, Deployment(Namespace, "web", 3, Delays(500*time.Millisecond, time.Second)), true},
		// Slow pods: 2 s + 8 s.
		{Namespace, Deployment(Namespace, "slow", 2, Delays(2*time.Second, 8*time.Second)), true},
		// Pods start but never pass readiness: stalls with readiness_failing,
		// then progress_deadline_exceeded shows in its conditions.
		{Namespace, withDeadline(Deployment(Namespace, "never-ready", 2, NeverReady), deadline), true},
		// A quota of 2 pods for 4 replicas: replica_failure.
		{QuotaNamespace, Deployment(QuotaNamespace, "over-quota", 4, Delays(500*time.Millisecond, 500*time.Millisecond)), false},
		// Pods whose node reports PodReadyToStartContainers (the project's
		// kwok Stage): sandbox 500 ms, init 1 s, ready 1 s.
		{Namespace, Deployment(Namespace, "sandbox", 2, ReadyToStartContainers(500*time.Millisecond, time.Second, time.Second)), true},
	}
	for _, o := range objects {
		if o.svc {
			if err := createService(ctx, c, o.ns, o.d.Name); err != nil {
				return err
			}
		}
		if _, err := c.AppsV1().Deployments(o.ns).Create(ctx, o.d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("demo: deployment %s: %w", o.d.Name, err)
		}
	}
	// A second Service in front of web's pods: a pod in two Services; Churn
	// moves its selector between web and slow.
	if err := createServiceFor(ctx, c, Namespace, CanaryService, "web"); err != nil {
		return err
	}
	two := int32(2)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &two, ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: PodTemplate("db", Delays(time.Second, 2*time.Second)),
		},
	}
	if err := createService(ctx, c, Namespace, "db"); err != nil {
		return err
	}
	if _, err := c.AppsV1().StatefulSets(Namespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("demo: statefulset: %w", err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: PodTemplate("agent", Delays(500*time.Millisecond, time.Second)),
		},
	}
	if _, err := c.AppsV1().DaemonSets(Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("demo: daemonset: %w", err)
	}
	return nil
}

// Churn changes the demo workload every few seconds until ctx ends: new
// images (rollouts), scale-ups and scale-downs, a StatefulSet and a
// DaemonSet rollout.
func Churn(ctx context.Context, c kubernetes.Interface, logger *slog.Logger) {
	steps := []struct {
		what string
		do   func(ctx context.Context, i int) error
	}{
		{"web: new image", func(ctx context.Context, i int) error {
			return updateDeployment(ctx, c, "web", func(d *appsv1.Deployment) { setImage(&d.Spec.Template, i) })
		}},
		{"web: scale", func(ctx context.Context, i int) error {
			return updateDeployment(ctx, c, "web", func(d *appsv1.Deployment) { n := int32(2 + i%4); d.Spec.Replicas = &n })
		}},
		{"slow: new image", func(ctx context.Context, i int) error {
			return updateDeployment(ctx, c, "slow", func(d *appsv1.Deployment) { setImage(&d.Spec.Template, i) })
		}},
		{"db: new image", func(ctx context.Context, i int) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				s, err := c.AppsV1().StatefulSets(Namespace).Get(ctx, "db", metav1.GetOptions{})
				if err != nil {
					return err
				}
				setImage(&s.Spec.Template, i)
				_, err = c.AppsV1().StatefulSets(Namespace).Update(ctx, s, metav1.UpdateOptions{})
				return err
			})
		}},
		{"web: scale down", func(ctx context.Context, _ int) error {
			return updateDeployment(ctx, c, "web", func(d *appsv1.Deployment) { n := int32(1); d.Spec.Replicas = &n })
		}},
		{"web-canary: move the selector", func(ctx context.Context, i int) error {
			// Pods newly selected are due as endpoints from the change.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				svc, err := c.CoreV1().Services(Namespace).Get(ctx, CanaryService, metav1.GetOptions{})
				if err != nil {
					return err
				}
				svc.Spec.Selector = map[string]string{"app": []string{"web", "slow"}[i%2]}
				_, err = c.CoreV1().Services(Namespace).Update(ctx, svc, metav1.UpdateOptions{})
				return err
			})
		}},
		{"sandbox: new image", func(ctx context.Context, i int) error {
			return updateDeployment(ctx, c, "sandbox", func(d *appsv1.Deployment) { setImage(&d.Spec.Template, i) })
		}},
		{"agent: new image", func(ctx context.Context, i int) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				d, err := c.AppsV1().DaemonSets(Namespace).Get(ctx, "agent", metav1.GetOptions{})
				if err != nil {
					return err
				}
				setImage(&d.Spec.Template, i)
				_, err = c.AppsV1().DaemonSets(Namespace).Update(ctx, d, metav1.UpdateOptions{})
				return err
			})
		}},
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := steps[i%len(steps)]
		if err := s.do(ctx, i); err != nil && ctx.Err() == nil {
			logger.Warn("demo churn step failed", "step", s.what, "err", err)
		}
	}
}

// PodTemplate is a pod template for kwok nodes.
func PodTemplate(app string, annotations map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "app", Image: "registry.example/" + app + ":v0"}},
			NodeSelector: map[string]string{"type": "kwok"},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

// Deployment is a Deployment of replicas pods for kwok nodes.
func Deployment(ns, name string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: PodTemplate(name, annotations),
		},
	}
}

func withDeadline(d *appsv1.Deployment, seconds int32) *appsv1.Deployment {
	d.Spec.ProgressDeadlineSeconds = &seconds
	return d
}

// CanaryService is the demo's second Service over web's pods.
const CanaryService = "web-canary"

func createService(ctx context.Context, c kubernetes.Interface, ns, app string) error {
	return createServiceFor(ctx, c, ns, app, app)
}

func createServiceFor(ctx context.Context, c kubernetes.Interface, ns, name, app string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("demo: service %s: %w", name, err)
	}
	return nil
}

func setImage(t *corev1.PodTemplateSpec, i int) {
	t.Spec.Containers[0].Image = fmt.Sprintf("registry.example/%s:v%d", t.Labels["app"], i)
}

func updateDeployment(ctx context.Context, c kubernetes.Interface, name string, mutate func(*appsv1.Deployment)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(d)
		_, err = c.AppsV1().Deployments(Namespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}
