package e2e

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The writes tests make to workloads, as users and controllers make them.
// Each retries on conflicts with the controllers' status writes and takes
// the client to write through (the shared client, or a test's direct one
// beside a proxied exporter).

// updateDeployment applies mutate to the current Deployment and writes it
// (a full update, as kubectl edit and most controllers do); it returns the
// written object.
func updateDeployment(t *testing.T, c kubernetes.Interface, ns, name string, mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	var out *appsv1.Deployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(d)
		out, err = c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setImage changes the image of a Deployment's first container: a pod
// template change.
func setImage(t *testing.T, ns, name, image string) {
	t.Helper()
	updateDeployment(t, client, ns, name, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
}

// setTemplate gives a Deployment a new image and pod annotations and
// returns the written object.
func setTemplate(t *testing.T, c kubernetes.Interface, ns, name, image string, annotations map[string]string) *appsv1.Deployment {
	t.Helper()
	return updateDeployment(t, c, ns, name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image
		d.Spec.Template.Annotations = annotations
	})
}

// scale writes spec.replicas through the /scale subresource, as kubectl
// scale and the HPA do.
func scale(t *testing.T, c kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec = autoscalingv1.ScaleSpec{Replicas: replicas}
		_, err = c.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
