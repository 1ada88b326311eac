// Package records turns API objects (as compacted by package informers) into
// the plain records of package tracker. It is the only place that knows both
// the API types and the tracker's: collectors stay short adapters and the
// tracker never imports Kubernetes.
package records

import (
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// SpecWritten is the API-side time of the last spec write that Compact
// extracted from managedFields; zero when unknown.
func SpecWritten(m *metav1.ObjectMeta) time.Time {
	t, err := time.Parse(time.RFC3339, m.Annotations[informers.AnnotationSpecWriteTime])
	if err != nil {
		return time.Time{}
	}
	return t
}

// StatusWritten is the API-side time of the last status write that
// Compact extracted from managedFields; zero when unknown.
func StatusWritten(m *metav1.ObjectMeta) time.Time {
	t, err := time.Parse(time.RFC3339, m.Annotations[informers.AnnotationStatusWriteTime])
	if err != nil {
		return time.Time{}
	}
	return t
}

func base(kind tracker.Kind, m *metav1.ObjectMeta, observed int64) tracker.Workload {
	return tracker.Workload{
		Kind: kind, UID: string(m.UID), Namespace: m.Namespace, Name: m.Name,
		Generation: m.Generation, ObservedGeneration: observed,
		Created: m.CreationTimestamp.Time, SpecWritten: SpecWritten(m), StatusWritten: StatusWritten(m),
		TemplateHash: m.Annotations[informers.AnnotationTemplateHash],
		OtherHash:    m.Annotations[informers.AnnotationOtherHash],
	}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1 // the API default
	}
	return *r
}

// Deployment returns the record of d, without endpoint and pod facts.
func Deployment(d *appsv1.Deployment) tracker.Workload {
	w := base(tracker.Deployment, &d.ObjectMeta, d.Status.ObservedGeneration)
	w.SpecReplicas = replicas(d.Spec.Replicas)
	w.Paused = d.Spec.Paused
	w.Status = tracker.Status{
		Replicas: d.Status.Replicas, UpdatedReplicas: d.Status.UpdatedReplicas,
		AvailableReplicas: d.Status.AvailableReplicas, ReadyReplicas: d.Status.ReadyReplicas,
	}
	for _, c := range d.Status.Conditions {
		switch c.Type {
		case appsv1.DeploymentProgressing:
			w.Status.HasProgressing = true
			w.Status.ProgressingReason = c.Reason
			w.ProgressDeadlineExceeded = c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
		case appsv1.DeploymentReplicaFailure:
			w.ReplicaFailure = c.Status == corev1.ConditionTrue
		}
	}
	return w
}

// StatefulSet returns the record of s, without endpoint and pod facts.
func StatefulSet(s *appsv1.StatefulSet) tracker.Workload {
	w := base(tracker.StatefulSet, &s.ObjectMeta, s.Status.ObservedGeneration)
	w.SpecReplicas = replicas(s.Spec.Replicas)
	w.OnDelete = s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	w.Status = tracker.Status{
		Replicas: s.Status.Replicas, UpdatedReplicas: s.Status.UpdatedReplicas,
		AvailableReplicas: s.Status.AvailableReplicas, ReadyReplicas: s.Status.ReadyReplicas,
		CurrentRevision: s.Status.CurrentRevision, UpdateRevision: s.Status.UpdateRevision,
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		w.Status.Partition = *ru.Partition
	}
	return w
}

// DaemonSet returns the record of d, without endpoint and pod facts.
func DaemonSet(d *appsv1.DaemonSet) tracker.Workload {
	w := base(tracker.DaemonSet, &d.ObjectMeta, d.Status.ObservedGeneration)
	w.OnDelete = d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType
	w.Status = tracker.Status{
		DesiredNumberScheduled: d.Status.DesiredNumberScheduled, UpdatedNumberScheduled: d.Status.UpdatedNumberScheduled,
		NumberAvailable: d.Status.NumberAvailable, NumberUnavailable: d.Status.NumberUnavailable,
	}
	return w
}

// PodFacts returns what the not-ready classification reads from p.
// nodeReady reports whether a node's Ready condition is True (unknown nodes
// count as ready: no evidence against them).
func PodFacts(p *informers.Pod, nodeReady func(name string) bool) tracker.PodFacts {
	f := tracker.PodFacts{
		Phase:       string(p.Status.Phase),
		Terminating: p.DeletionTimestamp != nil,
		Ready:       PodReady(p),
		Init:        containerStates(p.Status.InitContainerStatuses),
		Containers:  containerStates(p.Status.ContainerStatuses),
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			f.Unschedulable = true
		}
	}
	if p.Spec.NodeName != "" && nodeReady != nil && !nodeReady(p.Spec.NodeName) {
		f.NodeNotReady = true
	}
	f.SchedulingGated = p.Spec.SchedulingGated
	f.ContainersReady = conditionTrue(p, corev1.ContainersReady)
	for _, g := range p.Spec.ReadinessGates {
		if !conditionTrue(p, g.ConditionType) {
			f.ReadinessGatePending = true
			break
		}
	}
	return f
}

func conditionTrue(p *informers.Pod, t corev1.PodConditionType) bool {
	c := p.ConditionOf(t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// PodReady reports the pod's Ready condition.
func PodReady(p *informers.Pod) bool { return conditionTrue(p, corev1.PodReady) }

func containerStates(ss []informers.ContainerStatus) []tracker.ContainerState {
	out := make([]tracker.ContainerState, len(ss))
	for i, s := range ss {
		c := tracker.ContainerState{Running: s.State.Kind == informers.ContainerRunning, RestartCount: s.RestartCount}
		switch s.State.Kind {
		case informers.ContainerWaiting:
			c.WaitingReason = s.State.Reason
		case informers.ContainerTerminated:
			c.Terminated, c.TerminatedExit = true, s.State.ExitCode
		}
		out[i] = c
	}
	return out
}

// NodeReady reports a node's Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podStages maps the pod conditions that mark startup stages.
var podStages = map[corev1.PodConditionType]tracker.PodStage{
	corev1.PodScheduled:              tracker.PodStageScheduled,
	corev1.PodReadyToStartContainers: tracker.PodStageReadyToStartContainers,
	corev1.PodInitialized:            tracker.PodStageInitialized,
	corev1.ContainersReady:           tracker.PodStageContainersReady,
	corev1.PodReady:                  tracker.PodStageReady,
}

// owner_kind values beyond the controller kinds.
const (
	// OwnerKindNone is the owner_kind of a pod without a controller.
	OwnerKindNone = "none"
	// OwnerKindOther is the owner_kind of a pod whose controller is not one
	// of ownerKinds: any tenant can write any kind into an ownerReference
	// (and operators' own kinds are many), so the label is clamped to keep
	// its cardinality fixed.
	OwnerKindOther = "other"
)

// ownerKinds are the controllers of pods that the API server itself serves,
// by API group and kind: the owner_kind values besides none and other.
var ownerKinds = map[[2]string]bool{
	{"apps", "ReplicaSet"}: true, {"apps", "StatefulSet"}: true, {"apps", "DaemonSet"}: true,
	{"batch", "Job"}: true, {"", "ReplicationController"}: true,
	{"", "Node"}: true, // static (mirror) pods are owned by their Node
}

// OwnerKinds lists every owner_kind value, for documentation and tests.
var OwnerKinds = []string{"ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController", "Node", OwnerKindNone, OwnerKindOther}

// OwnerKind is the owner_kind label of a pod: its controller's kind when the
// API server serves it in the expected group, none without a controller,
// other otherwise (a CRD's kind, or a kind a tenant invented).
func OwnerKind(p metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return OwnerKindNone
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !ownerKinds[[2]string{gv.Group, ref.Kind}] {
		return OwnerKindOther
	}
	return ref.Kind
}

// Pod returns the record of p for the pod startup tracker. nodeReady is as
// for PodFacts.
func Pod(p *informers.Pod, nodeReady func(name string) bool) tracker.Pod {
	r := tracker.Pod{
		PodRef:  tracker.PodRef{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, OwnerKind: OwnerKind(p)},
		Created: p.CreationTimestamp.Time,
		Facts:   PodFacts(p, nodeReady),
	}
	for _, c := range p.Status.Conditions {
		if s, ok := podStages[c.Type]; ok {
			r.Conditions = append(r.Conditions, tracker.PodCondition{Stage: s, True: c.Status == corev1.ConditionTrue, LastTransition: c.LastTransitionTime.Time})
		}
	}
	return r
}

// ServedPod returns the record of p for the endpoint tracker; services are
// the names of the Services that select it (see PublishesByReadiness).
func ServedPod(p *informers.Pod, services []string) tracker.ServedPod {
	return tracker.ServedPod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name,
		Ready: PodReady(p), Terminating: p.DeletionTimestamp != nil, Services: services}
}

// PublishesSelectedPods reports whether the EndpointSlice controller
// publishes the pods svc selects: it has a selector (without one, endpoints
// are managed by hand) and is not of type ExternalName (a DNS alias: the
// controller skips it and publishes nothing, even with a selector;
// kubernetes pkg/controller/endpointslice/endpointslice_controller.go,
// syncService). Used by the endpoints collector and the rollout view alike.
func PublishesSelectedPods(svc *corev1.Service) bool {
	return len(svc.Spec.Selector) > 0 && svc.Spec.Type != corev1.ServiceTypeExternalName
}

// Selects reports whether a Service's selector selects a pod's labels: a
// non-empty selector whose every key the labels hold with the same value.
// It is labels.SelectorFromSet(selector).Matches(labels.Set(podLabels))
// for the selectors PublishesSelectedPods accepts, without building a
// selector: the collectors match every Service of a namespace against the
// pods of each event.
func Selects(selector, podLabels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if got, ok := podLabels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// PublishesByReadiness reports whether the EndpointSlice controller
// publishes svc's pods according to their readiness: PublishesSelectedPods
// and publishNotReadyAddresses off (with it, pods are ready endpoints
// whether Ready or not, so there is no Ready-to-endpoint delay to measure).
func PublishesByReadiness(svc *corev1.Service) bool {
	return PublishesSelectedPods(svc) && !svc.Spec.PublishNotReadyAddresses
}

// ReadyEndpoint reports whether an endpoint of an EndpointSlice is a ready
// endpoint, the one definition used by the endpoints collector and the
// rollout view: conditions.ready true (the API reads nil as true) and not
// terminating. The controller sets ready=false on terminating endpoints,
// except for Services with publishNotReadyAddresses, where a terminating
// pod stays ready=true until it is deleted; excluding it there too keeps
// "published" meaning "traffic is meant to go to it".
func ReadyEndpoint(e *discoveryv1.Endpoint) bool {
	if e.Conditions.Terminating != nil && *e.Conditions.Terminating {
		return false
	}
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// AnnotationTriggerTime is set by the EndpointSlice controller: the
// earliest pod change (a Ready transition time, by the node's clock) that the
// slice update reflects.
const AnnotationTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time"

// EachReadyPod calls fn with the UID of every pod the slice lists as a
// ready endpoint (ReadyEndpoint: terminating endpoints are not), without
// building a Slice: the rollout view reads this on every evaluation.
func EachReadyPod(s *discoveryv1.EndpointSlice, fn func(uid string)) {
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" && ReadyEndpoint(e) {
			fn(string(e.TargetRef.UID))
		}
	}
}

// Slice returns the record of an EndpointSlice: the pods that are ready
// endpoints in it, and its trigger time.
func Slice(s *discoveryv1.EndpointSlice) tracker.Slice {
	r := tracker.Slice{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name, Service: s.Labels[discoveryv1.LabelServiceName]}
	EachReadyPod(s, func(uid string) { r.Ready = append(r.Ready, uid) })
	if v := s.Annotations[AnnotationTriggerTime]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			r.TriggerTime = t
		}
	}
	return r
}

// LastWrite returns the field managers and the API-side time of the
// object's last write, as Compact extracted them from managedFields
// (informers.WriteOf); nil and zero when unknown.
func LastWrite(m *metav1.ObjectMeta) (managers []string, at time.Time) {
	if v := m.Annotations[informers.AnnotationWriteManagers]; v != "" {
		managers = strings.Split(v, "\n")
	}
	at, _ = time.Parse(time.RFC3339, m.Annotations[informers.AnnotationWriteTime])
	return managers, at
}
