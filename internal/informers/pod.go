package informers

import (
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod is what the pod informer's cache keeps of a pod: Compact's record,
// not a *corev1.Pod. It has the metadata as compactMeta leaves it and the
// few fields the collectors read, under corev1.Pod's names, so that reading
// one reads like reading the other. A trimmed *corev1.Pod cannot be made
// small: its empty struct alone is about 1.2 KB (PodSpec and PodStatus
// carry every field of the API), and the trimmed pod of a one-container
// kwok pod about 3.7 KB; BenchmarkCompactMemoryPerObject measures this
// record (docs/performance.md).
//
// Its metadata has no annotations: what the exporter's stamps and hooks
// wrote into them (the receipt, the writer) are fields (Receipt,
// RecordedWriter), and no annotation of the API's is read of a pod. A map
// costs about 300 bytes.
//
// The collectors and the timelines share one record per pod and must not
// modify it (as every object of a client-go cache).
type Pod struct {
	metav1.ObjectMeta
	Spec   PodSpec
	Status PodStatus

	received int64 // Unix ns; 0: not stamped
	listed   bool
	writer   string
}

// Receipt implements Receipt: when the exporter received the pod and
// whether a list cycle delivered it (see Stamp).
func (p *Pod) Receipt() (time.Time, bool) {
	if p.received == 0 {
		return time.Time{}, p.listed
	}
	return time.Unix(0, p.received), p.listed
}

// PodSpec is what the collectors read of a pod's spec.
type PodSpec struct {
	NodeName string
	// SchedulingGated: the pod has at least one scheduling gate (which
	// ones is read by nothing: scheduling_gated and the startup clock ask
	// only whether).
	SchedulingGated bool
	ReadinessGates  []corev1.PodReadinessGate
	// Images are the images of the containers (not the init containers),
	// in order: an image changed in place is progress (collectors/churn).
	Images []string
}

// PodStatus is what the collectors read of a pod's status.
type PodStatus struct {
	Phase                 corev1.PodPhase
	Conditions            []PodCondition
	InitContainerStatuses []ContainerStatus
	ContainerStatuses     []ContainerStatus
}

// PodCondition is a pod condition without its probe time and
// observedGeneration. Message is kept only for PodScheduled=False (the
// scheduler's reason a pod cannot be placed, cut as an Event's note): the
// timelines show it, and nothing reads the others.
type PodCondition struct {
	Type               corev1.PodConditionType
	Status             corev1.ConditionStatus
	Reason             string
	Message            string
	LastTransitionTime metav1.Time
}

// ContainerStatus is a container's status: its state, readiness, whether
// it started, its restarts.
type ContainerStatus struct {
	Name         string
	State        ContainerState
	Ready        bool
	Started      *bool // nil when the kubelet did not say (shared, read-only)
	RestartCount int32
}

// ContainerStateKind is which of corev1.ContainerState's members is set.
type ContainerStateKind uint8

// The container states; ContainerStateUnknown when the status has none.
const (
	ContainerStateUnknown ContainerStateKind = iota
	ContainerWaiting
	ContainerRunning
	ContainerTerminated
)

// ContainerState is a container's current state: which, and the reason
// (waiting or terminated) and exit code (terminated) that are read.
type ContainerState struct {
	Kind     ContainerStateKind
	Reason   string
	ExitCode int32
}

// GetObjectKind implements runtime.Object: the record has no type meta, as
// the typed objects of a client-go cache have none.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopy returns a copy of p that shares nothing with it (Started, the
// one pointer below the metadata, points at shared constants).
func (p *Pod) DeepCopy() *Pod {
	if p == nil {
		return nil
	}
	out := new(Pod)
	*out = *p
	p.DeepCopyInto(&out.ObjectMeta)
	out.Spec.ReadinessGates = slices.Clone(p.Spec.ReadinessGates)
	out.Spec.Images = slices.Clone(p.Spec.Images)
	out.Status.Conditions = slices.Clone(p.Status.Conditions)
	out.Status.InitContainerStatuses = slices.Clone(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = slices.Clone(p.Status.ContainerStatuses)
	return out
}

// ConditionOf returns p's condition of type t, nil without one.
func (p *Pod) ConditionOf(t corev1.PodConditionType) *PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Shared values of ContainerStatus.Started: one pointer per value instead
// of an allocation per container.
var startedTrue, startedFalse = true, false

// compactPod returns the record of p; p's metadata must be compacted.
func compactPod(p *corev1.Pod) *Pod {
	out := &Pod{ObjectMeta: p.ObjectMeta}
	a := p.Annotations
	if ns, err := strconv.ParseInt(a[AnnotationReceived], 10, 64); err == nil {
		out.received = ns
	}
	out.listed = a[AnnotationListed] == "true"
	out.writer = a[AnnotationWriter]
	out.Annotations = nil
	for i := range out.OwnerReferences {
		ref := &out.OwnerReferences[i]
		ref.APIVersion, ref.Kind = common(ref.APIVersion), common(ref.Kind)
	}
	out.Spec = PodSpec{
		NodeName:        p.Spec.NodeName,
		SchedulingGated: len(p.Spec.SchedulingGates) > 0,
		ReadinessGates:  p.Spec.ReadinessGates,
	}
	if len(p.Spec.Containers) > 0 {
		out.Spec.Images = make([]string, len(p.Spec.Containers))
		for i, c := range p.Spec.Containers {
			out.Spec.Images[i] = CutUTF8(c.Image, MaxImage)
		}
	}
	out.Status = PodStatus{
		Phase:                 cut(corev1.PodPhase(common(string(p.Status.Phase))), MaxReason),
		InitContainerStatuses: compactStatuses(p.Status.InitContainerStatuses),
		ContainerStatuses:     compactStatuses(p.Status.ContainerStatuses),
	}
	if len(p.Status.Conditions) > 0 {
		out.Status.Conditions = make([]PodCondition, len(p.Status.Conditions))
		for i, c := range p.Status.Conditions {
			pc := PodCondition{Type: corev1.PodConditionType(common(string(c.Type))), Status: corev1.ConditionStatus(common(string(c.Status))),
				Reason: common(c.Reason), LastTransitionTime: c.LastTransitionTime}
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				// Why a pod cannot be scheduled: the timeline shows it,
				// and only pending pods carry it.
				pc.Message = c.Message
			}
			capCondition(&pc.Type, &pc.Status, &pc.Reason, &pc.Message)
			out.Status.Conditions[i] = pc
		}
	}
	return out
}

func compactStatuses(ss []corev1.ContainerStatus) []ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]ContainerStatus, len(ss))
	for i, s := range ss {
		c := ContainerStatus{Name: CutUTF8(common(s.Name), MaxLabel), Ready: s.Ready, RestartCount: s.RestartCount}
		if s.Started != nil {
			c.Started = &startedFalse
			if *s.Started {
				c.Started = &startedTrue
			}
		}
		switch st := s.State; {
		case st.Waiting != nil:
			c.State = ContainerState{Kind: ContainerWaiting, Reason: CutUTF8(common(st.Waiting.Reason), MaxReason)}
		case st.Running != nil:
			c.State = ContainerState{Kind: ContainerRunning}
		case st.Terminated != nil:
			c.State = ContainerState{Kind: ContainerTerminated, Reason: CutUTF8(common(st.Terminated.Reason), MaxReason), ExitCode: st.Terminated.ExitCode}
		}
		out[i] = c
	}
	return out
}

// CompactPod returns the record the cache keeps of p (what Compact makes of
// a copy of it), for code that has a *corev1.Pod of its own.
func CompactPod(p *corev1.Pod) *Pod {
	c := p.DeepCopy()
	compactMeta(&c.ObjectMeta)
	return compactPod(c)
}

// common returns s, as a constant when it is one of the values every pod
// repeats (condition types and statuses, phases, owner kinds, the kubelet's
// reasons, the usual container name): the decoder allocates each string
// of each object, and a pod record keeps about 15 such. A fixed set, so
// it holds nothing per object.
func common(s string) string {
	switch s {
	case "":
		return ""
	case "True":
		return "True"
	case "False":
		return "False"
	case "Unknown":
		return "Unknown"
	case "PodScheduled":
		return "PodScheduled"
	case "Initialized":
		return "Initialized"
	case "ContainersReady":
		return "ContainersReady"
	case "Ready":
		return "Ready"
	case "PodReadyToStartContainers":
		return "PodReadyToStartContainers"
	case "DisruptionTarget":
		return "DisruptionTarget"
	case "Pending":
		return "Pending"
	case "Running":
		return "Running"
	case "Succeeded":
		return "Succeeded"
	case "Failed":
		return "Failed"
	case "apps/v1":
		return "apps/v1"
	case "batch/v1":
		return "batch/v1"
	case "v1":
		return "v1"
	case "ReplicaSet":
		return "ReplicaSet"
	case "StatefulSet":
		return "StatefulSet"
	case "DaemonSet":
		return "DaemonSet"
	case "Job":
		return "Job"
	case "Node":
		return "Node"
	case "ContainersNotReady":
		return "ContainersNotReady"
	case "PodCompleted":
		return "PodCompleted"
	case "Unschedulable":
		return "Unschedulable"
	case "ContainerCreating":
		return "ContainerCreating"
	case "PodInitializing":
		return "PodInitializing"
	case "CrashLoopBackOff":
		return "CrashLoopBackOff"
	case "ImagePullBackOff":
		return "ImagePullBackOff"
	case "ErrImagePull":
		return "ErrImagePull"
	case "Completed":
		return "Completed"
	case "Error":
		return "Error"
	case "OOMKilled":
		return "OOMKilled"
	case "app":
		return "app"
	}
	return s
}
