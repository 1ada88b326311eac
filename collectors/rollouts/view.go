package rollouts

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// view reads the informer caches to complete a workload's record with the
// facts that live in other objects: its pods (stall reason), and the
// EndpointSlices of the Services selecting them (endpoints stage).
type view struct {
	pods, replicaSets, nodes, services, slices cache.SharedIndexInformer
	deployments, statefulSets, daemonSets      cache.SharedIndexInformer
}

// record builds the full record of a workload object, and returns the
// names of the Services selecting its pods.
func (v *view) record(obj any) (tracker.Workload, []string, bool) {
	var w tracker.Workload
	var pods []*informers.Pod
	var isNew func(*informers.Pod) bool
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w = records.Deployment(o)
		rev := o.Annotations["deployment.kubernetes.io/revision"]
		newRS := map[string]bool{}
		for _, rs := range informers.ByIndex[*appsv1.ReplicaSet](v.replicaSets, informers.IndexOwner, string(o.UID)) {
			if rev != "" && rs.Annotations["deployment.kubernetes.io/revision"] == rev {
				newRS[string(rs.UID)] = true
			}
			pods = append(pods, informers.ByIndex[*informers.Pod](v.pods, informers.IndexOwner, string(rs.UID))...)
		}
		isNew = func(p *informers.Pod) bool { return newRS[ownerUID(p)] }
	case *appsv1.StatefulSet:
		w = records.StatefulSet(o)
		pods = informers.ByIndex[*informers.Pod](v.pods, informers.IndexOwner, string(o.UID))
		rev := o.Status.UpdateRevision
		isNew = func(p *informers.Pod) bool {
			return rev != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] == rev
		}
	case *appsv1.DaemonSet:
		w = records.DaemonSet(o)
		pods = informers.ByIndex[*informers.Pod](v.pods, informers.IndexOwner, string(o.UID))
		gen := o.Annotations["deprecated.daemonset.template.generation"]
		isNew = func(p *informers.Pod) bool { return gen != "" && p.Labels["pod-template-generation"] == gen }
	default:
		return w, nil, false
	}
	var reasons []string
	eps := make([]tracker.EndpointPod, 0, len(pods))
	for _, p := range pods {
		n := isNew(p)
		if n {
			if r := tracker.NotReadyReason(records.PodFacts(p, v.nodeReady)); r != "" {
				reasons = append(reasons, r)
			}
		}
		eps = append(eps, tracker.EndpointPod{UID: string(p.UID), New: n, Ready: records.PodReady(p), Terminating: p.DeletionTimestamp != nil})
	}
	w.PodReason = tracker.DominantReason(reasons)
	services, names := v.servicesSelecting(w.Namespace, pods)
	w.Endpoints = tracker.EndpointsState(eps, services, v.podExists, w.Status.Partition > 0)
	if w.OnDelete {
		// A scale of an OnDelete workload converges on its pods of any
		// revision (the manual update may be pending).
		for i := range eps {
			eps[i].New = true
		}
		w.EndpointsAnyRevision = tracker.EndpointsState(eps, services, v.podExists, false)
	}
	return w, names, true
}

// servicesSelecting returns the Services of namespace whose selector matches
// at least one of pods, with the pods their slices list as ready
// endpoints, and their names.
func (v *view) servicesSelecting(namespace string, pods []*informers.Pod) ([]tracker.ServiceSlices, []string) {
	if len(pods) == 0 {
		return nil, nil
	}
	// Pods of one ReplicaSet or revision carry the same labels: each run
	// of equal label sets is matched once (the matching was 8% of the
	// exporter's CPU in the 2,000-pod template change before).
	sets := make([]map[string]string, 0, 4)
	for _, p := range pods {
		if n := len(sets); n == 0 || !maps.Equal(sets[n-1], p.Labels) {
			sets = append(sets, p.Labels)
		}
	}
	var out []tracker.ServiceSlices
	var names []string
	for _, svc := range informers.ByIndex[*corev1.Service](v.services, cache.NamespaceIndex, namespace) {
		if !records.PublishesSelectedPods(svc) {
			continue // endpoints managed by hand, or none (ExternalName): not the chain
		}
		match := false
		for _, l := range sets {
			if records.Selects(svc.Spec.Selector, l) {
				match = true
				break
			}
		}
		if !match {
			continue
		}
		ready := map[string]bool{}
		for _, s := range informers.ByIndex[*discoveryv1.EndpointSlice](v.slices, informers.IndexService, namespace+"/"+svc.Name) {
			// One definition of a ready endpoint, shared with the
			// endpoints collector: terminating endpoints are not.
			records.EachReadyPod(s, func(uid string) { ready[uid] = true })
		}
		out = append(out, tracker.ServiceSlices{PublishNotReadyAddresses: svc.Spec.PublishNotReadyAddresses, Ready: ready})
		names = append(names, svc.Name)
	}
	return out, names
}

func (v *view) podExists(uid string) bool {
	objs, err := v.pods.GetIndexer().ByIndex(informers.IndexUID, uid)
	return err == nil && len(objs) > 0
}

func (v *view) nodeReady(name string) bool {
	obj, ok, err := v.nodes.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return true
	}
	n, ok := obj.(*corev1.Node)
	return !ok || records.NodeReady(n)
}

// workloadOf returns the UID of the workload controlling p: its
// StatefulSet or DaemonSet, or the Deployment of its ReplicaSet.
func (v *view) workloadOf(p *informers.Pod) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return ""
	}
	if ref.Kind != "ReplicaSet" {
		return string(ref.UID)
	}
	obj, ok, err := v.replicaSets.GetIndexer().GetByKey(p.Namespace + "/" + ref.Name)
	if err != nil || !ok {
		return ""
	}
	return ownerUID(obj.(*appsv1.ReplicaSet))
}

// lookup returns the current record of a workload by kind and name, with
// the names of the Services selecting its pods.
func (v *view) lookup(kind tracker.Kind, namespace, name string) (tracker.Workload, []string, bool) {
	var inf cache.SharedIndexInformer
	switch kind {
	case tracker.Deployment:
		inf = v.deployments
	case tracker.StatefulSet:
		inf = v.statefulSets
	case tracker.DaemonSet:
		inf = v.daemonSets
	default:
		return tracker.Workload{}, nil, false
	}
	obj, ok, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return tracker.Workload{}, nil, false
	}
	return v.record(obj)
}

func ownerUID(o metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return string(ref.UID)
	}
	return ""
}

// podsOf returns the pods of a workload: a StatefulSet's or DaemonSet's
// own, a Deployment's through its ReplicaSets.
func (v *view) podsOf(kind tracker.Kind, uid string) []*informers.Pod {
	if kind != tracker.Deployment {
		return informers.ByIndex[*informers.Pod](v.pods, informers.IndexOwner, uid)
	}
	var pods []*informers.Pod
	for _, rs := range informers.ByIndex[*appsv1.ReplicaSet](v.replicaSets, informers.IndexOwner, uid) {
		pods = append(pods, informers.ByIndex[*informers.Pod](v.pods, informers.IndexOwner, string(rs.UID))...)
	}
	return pods
}
