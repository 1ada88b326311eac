package churn

import (
	"encoding/binary"
	"hash/maphash"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// What a write's progress is, per kind, read from the cached (compacted)
// copies the watch hands over: tracker.Progress's Spec is the state asked
// for, Status the state reported towards it. Times are never part of it
// (lastUpdateTime, lastHeartbeatTime, managedFields times), nor messages,
// annotations and labels, nor counters that move without progress
// (collisionCount): a write that moves only those is not progress. The
// table is in docs/retries.md ("Write churn").

// progressOf returns the state of obj for tracker.Progress, and false for
// an object whose writes are not judged: a ReplicaSet controlled by a
// Deployment, whose every write follows its Deployment (a spec or
// annotation write of the Deployment copied down, the deployment
// controller scaling it during a rollout, its pods' progress): a loop
// through it shows on the Deployment, with the Deployment's writer.
func progressOf(obj metav1.Object) (tracker.Progress, bool) {
	spec, status := newHash(), newHash()
	spec.lifecycle(obj)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec.ptr(o.Spec.Replicas).workloadSpec(obj)
		s := o.Status
		status.int(s.ObservedGeneration).int(int64(s.Replicas)).int(int64(s.UpdatedReplicas)).
			int(int64(s.ReadyReplicas)).int(int64(s.AvailableReplicas)).int(int64(s.UnavailableReplicas)).
			ptr(s.TerminatingReplicas).str(obj.GetAnnotations()["deployment.kubernetes.io/revision"])
		for _, c := range s.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	case *appsv1.StatefulSet:
		spec.ptr(o.Spec.Replicas).workloadSpec(obj)
		s := o.Status
		status.int(s.ObservedGeneration).int(int64(s.Replicas)).int(int64(s.ReadyReplicas)).
			int(int64(s.CurrentReplicas)).int(int64(s.UpdatedReplicas)).int(int64(s.AvailableReplicas)).
			str(s.CurrentRevision).str(s.UpdateRevision)
		for _, c := range s.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	case *appsv1.DaemonSet:
		spec.workloadSpec(obj)
		s := o.Status
		status.int(s.ObservedGeneration).int(int64(s.CurrentNumberScheduled)).int(int64(s.NumberMisscheduled)).
			int(int64(s.DesiredNumberScheduled)).int(int64(s.NumberReady)).int(int64(s.UpdatedNumberScheduled)).
			int(int64(s.NumberAvailable)).int(int64(s.NumberUnavailable))
		for _, c := range s.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	case *appsv1.ReplicaSet:
		if c := metav1.GetControllerOf(obj); c != nil && c.Kind == "Deployment" {
			return tracker.Progress{}, false
		}
		spec.ptr(o.Spec.Replicas).int(int64(o.Spec.MinReadySeconds))
		s := o.Status
		status.int(s.ObservedGeneration).int(int64(s.Replicas)).int(int64(s.FullyLabeledReplicas)).
			int(int64(s.ReadyReplicas)).int(int64(s.AvailableReplicas)).ptr(s.TerminatingReplicas)
		for _, c := range s.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	case *informers.Pod:
		spec.str(o.Spec.NodeName).bool(o.Spec.SchedulingGated)
		for _, image := range o.Spec.Images {
			spec.str(image)
		}
		status.str(string(o.Status.Phase))
		for _, c := range o.Status.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
		for _, cs := range [][]informers.ContainerStatus{o.Status.InitContainerStatuses, o.Status.ContainerStatuses} {
			for _, c := range cs {
				status.container(c)
			}
		}
	case *corev1.Node:
		spec.bool(o.Spec.Unschedulable)
		for _, c := range o.Status.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	case *corev1.Service:
		// Compact keeps the selector, the type and publishNotReadyAddresses,
		// and no status: a status write (a load balancer's ingress) moves
		// nothing here, so only a rare one is not a loop.
		spec.str(string(o.Spec.Type)).bool(o.Spec.PublishNotReadyAddresses).labels(o.Spec.Selector)
	case *discoveryv1.EndpointSlice:
		// The endpoints as Compact keeps them: their pod, node and
		// conditions, in any order.
		var sum uint64
		for _, e := range o.Endpoints {
			eh := newHash()
			if e.TargetRef != nil {
				eh.str(string(e.TargetRef.UID))
			}
			if e.NodeName != nil {
				eh.str(*e.NodeName)
			}
			sum += eh.boolPtr(e.Conditions.Ready).boolPtr(e.Conditions.Serving).boolPtr(e.Conditions.Terminating).h.Sum64()
		}
		status.int(int64(sum)).int(int64(len(o.Endpoints)))
	case *corev1.Namespace:
		status.str(string(o.Status.Phase))
		for _, c := range o.Status.Conditions {
			status.condition(string(c.Type), string(c.Status), c.Reason)
		}
	}
	return tracker.Progress{Spec: spec.fold(), Status: status.fold()}, true
}

// seed is the process's seed of the state hashes: states are compared
// within one process only.
var seed = maphash.MakeSeed()

// hash accumulates one part's fields (runtime/maphash: no allocation, a
// few nanoseconds per field); each method returns h for chaining.
type hash struct{ h maphash.Hash }

func newHash() hash {
	var h hash
	h.h.SetSeed(seed)
	return h
}

// fold is the 32-bit state the tracker keeps (xor-folded).
func (h *hash) fold() uint32 {
	s := h.h.Sum64()
	return uint32(s>>32) ^ uint32(s)
}

func (h *hash) byte(b byte) *hash {
	_ = h.h.WriteByte(b)
	return h
}

func (h *hash) int(v int64) *hash {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	_, _ = h.h.Write(b[:])
	return h
}

func (h *hash) str(s string) *hash {
	_, _ = h.h.WriteString(s)
	return h.byte(0)
}

func (h *hash) bool(b bool) *hash {
	if b {
		return h.byte(1)
	}
	return h.byte(2)
}

func (h *hash) boolPtr(b *bool) *hash {
	if b == nil {
		return h.byte(0)
	}
	return h.bool(*b)
}

func (h *hash) ptr(v *int32) *hash {
	if v == nil {
		return h.int(-1)
	}
	return h.int(int64(*v))
}

func (h *hash) condition(typ, status, reason string) {
	h.str(typ).str(status).str(reason)
}

// labels hashes a map in any order (a sum of its entries' hashes).
func (h *hash) labels(m map[string]string) *hash {
	var sum uint64
	for k, v := range m {
		e := newHash()
		sum += e.str(k).str(v).h.Sum64()
	}
	return h.int(int64(sum)).int(int64(len(m)))
}

// container is a container's progress: ready, started, the state it is in
// and why, its restarts.
func (h *hash) container(c informers.ContainerStatus) *hash {
	h.str(c.Name).bool(c.Ready).boolPtr(c.Started).int(int64(c.RestartCount))
	switch s := c.State; s.Kind {
	case informers.ContainerWaiting:
		h.byte('w').str(s.Reason)
	case informers.ContainerRunning:
		h.byte('r')
	case informers.ContainerTerminated:
		h.byte('t').str(s.Reason).int(int64(s.ExitCode))
	}
	return h
}

// lifecycle is what every kind's spec part holds: whether the object is
// being deleted and how many finalizers still hold it (a finalizer's
// removal is progress of a deletion).
func (h *hash) lifecycle(m metav1.Object) *hash {
	return h.bool(m.GetDeletionTimestamp() != nil).int(int64(len(m.GetFinalizers())))
}

// workloadSpec is a workload's spec as Compact keeps it: the hash of the
// pod template and of the rest of the spec (not the annotations, which
// bump a Deployment's generation without asking for anything).
func (h *hash) workloadSpec(m metav1.Object) {
	a := m.GetAnnotations()
	h.str(a[informers.AnnotationTemplateHash]).str(a[informers.AnnotationOtherHash])
}
