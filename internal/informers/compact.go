package informers

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations that Compact writes into cached copies only (never to the API
// server), carrying what it extracted from the fields it dropped.
const (
	// AnnotationSpecWriteTime is the newest managedFields time of an entry
	// that touches f:spec (RFC 3339, one-second precision): the API-side
	// time of the last spec write.
	AnnotationSpecWriteTime = "kube-convergence.io/spec-write-time"
	// AnnotationTemplateHash hashes the pod template, to tell a template
	// change from a scale or another spec change.
	AnnotationTemplateHash = "kube-convergence.io/template-hash"
	// AnnotationOtherHash hashes the spec without template and replicas.
	AnnotationOtherHash = "kube-convergence.io/other-spec-hash"
	// AnnotationCompacted marks an object Compact has already compacted
	// (see Compact), with this process's compactedMark as its value. It
	// costs one map entry of shared strings per cached object, tens of
	// bytes against the 2-4 KB that compaction saves. A pod's record (Pod)
	// needs none: its type says it.
	AnnotationCompacted = "kube-convergence.io/compacted"
	// AnnotationWriteManagers names the field managers of the object's
	// last write (newline-separated: a manager name is printable), and
	// AnnotationWriteTime its time (RFC 3339, one-second precision), as
	// WriteOf reads them; workloads only, for their timelines.
	AnnotationWriteManagers = "kube-convergence.io/write-managers"
	AnnotationWriteTime     = "kube-convergence.io/write-time"
	// AnnotationStatusWriteTime is the time of the object's last status
	// write (StatusWriteOf; RFC 3339, one-second precision): the API-side
	// time of the stages its controller reports.
	AnnotationStatusWriteTime = "kube-convergence.io/status-write-time"
)

// compactedMark is the value of AnnotationCompacted on the copies this
// process compacted: random, because the annotation can come from the
// cluster too (whoever may write an object may set it), and an object
// marked with a value the API could send would be passed unchanged, never
// compacted, capped nor hashed (it was a constant "true": the seed
// found-compacted-annotation-from-the-api of FuzzCompactDecoded). The API
// server never sees the cached copies, so it cannot echo the mark;
// compactMeta drops an annotation of that name from the API.
var compactedMark = "true-" + rand.Text()

// markedCompacted reports whether annotations carry this process's mark.
func markedCompacted(annotations map[string]string) bool {
	return annotations[AnnotationCompacted] == compactedMark
}

// Annotations of the API objects that the collectors read; all others are
// dropped (kubectl's last-applied-configuration alone is often kilobytes).
var keptAnnotations = map[string]bool{
	"deployment.kubernetes.io/revision":                true,
	"deprecated.daemonset.template.generation":         true,
	"endpoints.kubernetes.io/last-change-trigger-time": true,
	AnnotationReceived:                                 true,
	AnnotationListed:                                   true,
	AnnotationWriter:                                   true,
	AnnotationWriteManagers:                            true,
	AnnotationWriteTime:                                true,
	AnnotationStatusWriteTime:                          true,
}

// Compact is the informers' transform: it extracts what the collectors need
// from managedFields and the pod template, then drops them and everything
// else unused, so the cache holds compact records. managedFields alone are
// about 2-4 KB per pod (measured on pods written by kubectl, the scheduler
// and the kubelet). Every string it keeps that the API server does not
// bound is cut to its cap (caps.go). Objects it does not know pass
// unchanged.
//
// Compact is idempotent, as client-go requires of a transform whose output
// can reach it again: every object of a WatchList stream is transformed
// twice, into the reflector's temporary store and again by the informer's
// FIFO on Replace (client-go v0.37.2 reflector.go watchList,
// the_real_fifo.go Replace). A second pass would find managedFields and the
// pod template already gone and would replace the spec write time and the
// template hash with nothing: recovered rollouts would then be timed from
// creationTimestamp and the next change of every workload classified as a
// template change. So Compact marks what it compacted and passes marked
// objects unchanged.
func Compact(obj any) (any, error) {
	if compacted(obj) {
		return obj, nil
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		compactMeta(&o.ObjectMeta)
		return compactPod(o), nil
	case *appsv1.Deployment:
		setWrite(&o.ObjectMeta)
		compactMeta(&o.ObjectMeta)
		spec := o.Spec
		spec.Template = corev1.PodTemplateSpec{}
		spec.Replicas = nil
		setHashes(&o.ObjectMeta, &o.Spec.Template, &spec)
		// Of the spec, what the records read stays (here and below); the
		// rest is in the hashes.
		o.Spec = appsv1.DeploymentSpec{Replicas: o.Spec.Replicas, Paused: o.Spec.Paused}
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
		}
	case *appsv1.StatefulSet:
		setWrite(&o.ObjectMeta)
		compactMeta(&o.ObjectMeta)
		spec := o.Spec
		spec.Template = corev1.PodTemplateSpec{}
		spec.Replicas = nil
		spec.VolumeClaimTemplates = nil
		setHashes(&o.ObjectMeta, &o.Spec.Template, &spec)
		o.Spec = appsv1.StatefulSetSpec{Replicas: o.Spec.Replicas, UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: o.Spec.UpdateStrategy.Type}}
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil {
			o.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ru.Partition}
		}
		o.Status.CurrentRevision, o.Status.UpdateRevision = CutUTF8(o.Status.CurrentRevision, MaxName), CutUTF8(o.Status.UpdateRevision, MaxName)
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
		}
	case *appsv1.DaemonSet:
		setWrite(&o.ObjectMeta)
		compactMeta(&o.ObjectMeta)
		spec := o.Spec
		spec.Template = corev1.PodTemplateSpec{}
		setHashes(&o.ObjectMeta, &o.Spec.Template, &spec)
		o.Spec = appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: o.Spec.UpdateStrategy.Type}}
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		compactMeta(&o.ObjectMeta)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		compactMeta(&o.ObjectMeta)
	case *corev1.Namespace:
		compactMeta(&o.ObjectMeta)
		o.Spec = corev1.NamespaceSpec{}
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
		}
	case *appsv1.ReplicaSet:
		compactMeta(&o.ObjectMeta)
		o.Spec = appsv1.ReplicaSetSpec{Replicas: o.Spec.Replicas, MinReadySeconds: o.Spec.MinReadySeconds}
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
		}
	case *corev1.Node:
		// Only conditions matter: readiness (node_not_ready), and the
		// pressure conditions the timelines show; node status is large.
		// Heartbeat times change every 10 s and are read by nothing.
		compactMeta(&o.ObjectMeta)
		var kept []corev1.NodeCondition
		for _, c := range o.Status.Conditions {
			if NodeConditionKept(c.Type) {
				c.LastHeartbeatTime = metav1.Time{}
				capCondition(&c.Type, &c.Status, &c.Reason, &c.Message)
				kept = append(kept, c)
			}
		}
		o.Spec = corev1.NodeSpec{Unschedulable: o.Spec.Unschedulable}
		o.Status = corev1.NodeStatus{Conditions: kept}
	case *corev1.Service:
		compactMeta(&o.ObjectMeta)
		// The webhook audit reads the port numbers (a webhook's
		// clientConfig.service.port must be one; at most MaxServicePorts
		// are kept) and whether the Service is headless (clusterIP None:
		// the API server cannot route a webhook call to it); no address.
		var ports []corev1.ServicePort
		for _, p := range o.Spec.Ports[:min(len(o.Spec.Ports), MaxServicePorts)] {
			ports = append(ports, corev1.ServicePort{Port: p.Port})
		}
		headless := ""
		if o.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = corev1.ClusterIPNone
		}
		o.Spec = corev1.ServiceSpec{Selector: o.Spec.Selector, PublishNotReadyAddresses: o.Spec.PublishNotReadyAddresses, Type: o.Spec.Type,
			ClusterIP: headless, Ports: ports}
		o.Status = corev1.ServiceStatus{}
	case *eventsv1.Event:
		compactEvent(o)
	case *discoveryv1.EndpointSlice:
		compactMeta(&o.ObjectMeta)
		o.Ports = nil
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			e.Addresses, e.Hints, e.Hostname, e.Zone, e.DeprecatedTopology = nil, nil, nil, nil, nil
			if e.TargetRef != nil {
				*e.TargetRef = reference(e.TargetRef)
			}
		}
	}
	return obj, nil
}

// compacted reports whether obj is already Compact's output: a record type
// of its own (Pod), or an API object marked AnnotationCompacted.
func compacted(obj any) bool {
	switch o := obj.(type) {
	case *Pod:
		return true
	case *corev1.Pod:
		// Compact makes a record of its own of it: the API object it
		// marked (compactMeta) is not a cached one.
		return false
	case metav1.Object:
		return markedCompacted(o.GetAnnotations())
	}
	return false
}

func compactMeta(m *metav1.ObjectMeta) {
	var newest time.Time
	for _, f := range m.ManagedFields {
		if f.Time == nil || f.FieldsV1 == nil || !bytes.Contains(f.FieldsV1.GetRawBytes(), []byte(`"f:spec"`)) {
			continue
		}
		if t := f.Time.Time; t.After(newest) {
			newest = t
		}
	}
	m.ManagedFields = nil
	m.GenerateName = "" // read by nothing; any length on a core/v1 Event
	for i := range m.OwnerReferences {
		capOwner(&m.OwnerReferences[i])
	}
	kept := map[string]string{}
	for k, v := range m.Annotations {
		if keptAnnotations[k] {
			kept[k] = CutUTF8(v, MaxKeptAnnotation)
		}
	}
	if !newest.IsZero() {
		kept[AnnotationSpecWriteTime] = newest.UTC().Format(time.RFC3339)
	}
	kept[AnnotationCompacted] = compactedMark
	m.Annotations = kept
}

// maxWriteManagers bounds the managers named for one write: several only
// share a second when a controller and a person write at once.
const maxWriteManagers = 4

// WriteOf returns the field managers of an object's last write and its
// time: the managers of the managedFields entries with the newest time,
// status entries excepted (the controller's status writes are
// not the write that asks for a rollout). Entry times have one-second
// precision, so managers writing in the same second are named together.
// A write through /scale stamps no time on v1.37 (see NewestManager): the
// previous stamp's managers are then returned, and the timelines, seeing
// the stamp did not move with the generation, name none
// (timeline.WriteEntry). Nil without timed entries. Names are cut to
// MaxManager.
func WriteOf(fields []metav1.ManagedFieldsEntry) (managers []string, at time.Time) {
	for _, f := range fields {
		if f.Time == nil || f.Subresource == "status" || statusOnly(f.FieldsV1) {
			continue
		}
		switch m, t := CutUTF8(f.Manager, MaxManager), f.Time.Time; {
		case t.After(at):
			managers, at = append(managers[:0], m), t
		case t.Equal(at) && !slices.Contains(managers, m) && len(managers) < maxWriteManagers:
			managers = append(managers, m)
		}
	}
	return managers, at
}

// statusOnly reports whether an entry's fields are status fields only: a
// status write through the main resource (clients before the status
// subresource, or tests) is not the write either.
func statusOnly(f *metav1.FieldsV1) bool {
	if f == nil {
		return false
	}
	raw := f.GetRawBytes()
	return bytes.Contains(raw, []byte(`"f:status"`)) && !bytes.Contains(raw, []byte(`"f:spec"`)) && !bytes.Contains(raw, []byte(`"f:metadata"`))
}

// StatusWriteOf returns the time of an object's last status write: the
// newest managedFields time of the status entries (zero without one). A
// controller's status entry is re-stamped whenever its write changes the
// object, so this dates the status the exporter judges, to the second.
func StatusWriteOf(fields []metav1.ManagedFieldsEntry) time.Time {
	var at time.Time
	for _, f := range fields {
		if f.Time != nil && (f.Subresource == "status" || statusOnly(f.FieldsV1)) && f.Time.After(at) {
			at = f.Time.Time
		}
	}
	return at
}

// setWrite records WriteOf's and StatusWriteOf's answers in annotations
// Compact keeps.
func setWrite(m *metav1.ObjectMeta) {
	if st := StatusWriteOf(m.ManagedFields); !st.IsZero() {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[AnnotationStatusWriteTime] = st.UTC().Format(time.RFC3339)
	}
	managers, at := WriteOf(m.ManagedFields)
	if len(managers) == 0 {
		return
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[AnnotationWriteManagers] = strings.Join(managers, "\n")
	m.Annotations[AnnotationWriteTime] = at.UTC().Format(time.RFC3339)
}

// setHashes records the hash of the pod template and of the rest of the spec
// (other must already have template and replicas cleared).
func setHashes(m *metav1.ObjectMeta, template *corev1.PodTemplateSpec, other interface{ Marshal() ([]byte, error) }) {
	m.Annotations[AnnotationTemplateHash] = hashOf(template)
	m.Annotations[AnnotationOtherHash] = hashOf(other)
}

// hashOf hashes an object's protobuf encoding. Protobuf marshalling of the
// generated types is deterministic (fields in tag order, maps sorted).
func hashOf(o interface{ Marshal() ([]byte, error) }) string {
	b, err := o.Marshal()
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	h.Write(b)
	var out [8]byte
	binary.BigEndian.PutUint64(out[:], h.Sum64())
	return string(hexOf(out[:]))
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0xf]
	}
	return out
}

// CompactMeta compacts the metadata of an object Compact does not know (a
// custom resource, compacted by its collector's own transform): it keeps
// the spec write time, the receive stamps and nothing else of the
// annotations, and drops managedFields.
func CompactMeta(m *metav1.ObjectMeta) { compactMeta(m) }

// NodeConditionKept reports whether Compact keeps a node condition: Ready,
// and the conditions under which the kubelet evicts or the scheduler
// avoids the node (MemoryPressure, DiskPressure, PIDPressure,
// NetworkUnavailable).
func NodeConditionKept(t corev1.NodeConditionType) bool {
	switch t {
	case corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable:
		return true
	}
	return false
}
