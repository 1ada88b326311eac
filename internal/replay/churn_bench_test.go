package replay

import (
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// BenchmarkChurnEvent is one live event while every Deployment of a
// synthetic cluster rolls out at once (the scale run's template change):
// deployments Deployments of 10 pods each, behind a Service each, 20 per
// namespace (as `make scale` lays them out), each with an open episode;
// then, in turn, one pod of one of them changes its Ready condition
// (event=pod-ready) or one endpoint of its Service's EndpointSlice its
// ready condition (event=endpointslice). A cost that grows with
// deployments is a cost per event that grows with the cluster: at 20,000
// pods a template change delivers about 100,000 pod events and 40,000
// slice events.
func BenchmarkChurnEvent(b *testing.B) {
	t := loadTemplates(b)
	for _, deployments := range []int{200, 2000} {
		// One cluster per size for both events and every b.N: playing
		// 20,000 pods takes seconds.
		b.Run(fmt.Sprintf("deployments=%d", deployments), func(b *testing.B) {
			h, namespaces, at := churning(b, t, deployments)
			rv := 1_000_000 // never repeated: an unchanged resourceVersion is a resync, ignored
			for _, event := range []string{"pod-ready", "endpointslice"} {
				b.Run("event="+event, func(b *testing.B) {
					var states [2]runtime.Object
					var r informers.Resource
					switch event {
					case "pod-ready":
						// The first pod of web-0 as cluster lists it.
						pod := t.pod.DeepCopy()
						pod.Namespace, pod.Name, pod.UID = "bench-0", "web-0-5d4f8-0", "p-0-0"
						pod.OwnerReferences[0].Name, pod.OwnerReferences[0].UID = "web-0-5d4f8", "rs-0"
						pod.Labels = maps.Clone(pod.Labels)
						pod.Labels["bench/deployment"] = "web-0"
						notReady := pod.DeepCopy()
						setReady(notReady, corev1.ConditionFalse)
						states, r = [2]runtime.Object{pod, notReady}, informers.Pods
					case "endpointslice":
						_, slice := serviceOf(t, 0, namespaces)
						notReady := slice.DeepCopy()
						notReady.Endpoints[0].Conditions.Ready = new(bool)
						states, r = [2]runtime.Object{slice, notReady}, informers.EndpointSlices
					}
					objs := [2]metaObject{access(b, states[0]), access(b, states[1])}
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						o := objs[i%2]
						rv++
						o.m.SetResourceVersion(strconv.Itoa(rv))
						if err := h.line(Line{Type: typeModified, Resource: r, At: at, Live: true, Object: o.obj}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// churning plays a synthetic cluster of deployments Deployments (20 per
// namespace) with a Service and an EndpointSlice each, then a template
// change of every Deployment, and checks that every one has an open
// episode. It returns the harness, the number of namespaces and the time
// of the template change.
func churning(b *testing.B, t templates, deployments int) (*Harness, int, time.Time) {
	b.Helper()
	h := New(Options{})
	b.Cleanup(h.Close)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	namespaces := deployments / 20
	if err := h.Play(t.cluster(deployments*podsPerDeployment, namespaces, at)); err != nil {
		b.Fatal(err)
	}
	// A Service per Deployment selecting its pods, and its slice listing
	// them as ready endpoints.
	at = at.Add(time.Second)
	for i := range deployments {
		svc, slice := serviceOf(t, i, namespaces)
		for _, l := range []Line{
			{Type: typeAdded, Resource: informers.Services, At: at, Live: true, Object: svc},
			{Type: typeAdded, Resource: informers.EndpointSlices, At: at, Live: true, Object: slice},
		} {
			if err := h.line(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A template change of every Deployment: a new generation the
	// controller has not observed yet opens an episode each.
	at = at.Add(time.Second)
	for i := range deployments {
		d := t.deploy.DeepCopy()
		d.Namespace, d.Name = fmt.Sprintf("bench-%d", i%namespaces), fmt.Sprintf("web-%d", i)
		d.UID = types.UID(fmt.Sprintf("d-%d", i))
		d.Generation++
		d.Spec.Template.Annotations = map[string]string{"bench/restartedAt": at.Format(time.RFC3339)}
		d.ResourceVersion = strconv.Itoa(500_000 + i)
		if err := h.line(Line{Type: typeModified, Resource: informers.Deployments, At: at, Live: true, Object: d}); err != nil {
			b.Fatal(err)
		}
	}
	if open := gaugeSum(b, h, "kube_convergence_rollouts_in_progress"); open != float64(deployments) {
		b.Fatalf("%v rollouts in progress after the template change, want %d", open, deployments)
	}
	return h, namespaces, at
}

// serviceOf is the Service of Deployment i of cluster, selecting its pods
// by the template's labels, and its EndpointSlice listing its pods as
// ready endpoints.
func serviceOf(t templates, i, namespaces int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	ns, name := fmt.Sprintf("bench-%d", i%namespaces), fmt.Sprintf("web-%d", i)
	sel := map[string]string{}
	for k, v := range t.deploy.Spec.Selector.MatchLabels {
		sel[k] = v
	}
	sel["bench/deployment"] = name
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("svc-%d", i)), ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeClusterIP},
	}
	yes := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", UID: types.UID(fmt.Sprintf("slice-%d", i)), ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for j := range podsPerDeployment {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-5d4f8-%d", name, j), UID: types.UID(fmt.Sprintf("p-%d-%d", i, j))},
		})
	}
	return svc, slice
}

// gaugeSum is the sum of a gauge family's series.
func gaugeSum(b *testing.B, h *Harness, name string) float64 {
	b.Helper()
	mfs, err := h.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, m := range mfs[name].GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum
}

func setReady(p *corev1.Pod, s corev1.ConditionStatus) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = s
		}
	}
}
