package informers

import (
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The caps on the strings from the cluster that the caches keep (bytes;
// docs/performance.md, "Strings from the cluster"). The API server bounds
// names, namespaces, uids, labels, finalizers and field managers; it bounds
// nothing of a condition but a pod condition's type, nothing of a
// container's status, image or a reference's fields, and an Event written
// through core/v1 without an eventTime skips even the events.k8s.io limits
// on reason and reporting controller. One writer could make each cached
// copy of its objects keep a megabyte. The transforms (Compact, the custom
// resources' records.Convention.Transform) cut every other string they
// keep to a cap below, on a rune boundary: each is the API's own bound for
// the kind of value where it has one, so that a value the API accepts is
// not cut; messages and condition reasons, which metav1.Condition lets
// grow to 32 KiB and 1,024 bytes, are cut shorter (MaxMessage, MaxReason).
const (
	// MaxLabel (a DNS label): a reference's namespace, kind (a CRD's kind
	// is a DNS-1035 label, mixed case) and uid (36-byte UUIDs), a
	// container's name.
	MaxLabel = 63
	// MaxReason: an Event's reason and action (events.k8s.io's limits);
	// every condition's reason and status, a container state's reason, a
	// pod's phase. CamelCase words, compared with constants of under 30
	// bytes; metav1.Condition admits 1,024 for a reason.
	MaxReason = 128
	// MaxManager: a field manager's name, as the API server validates it
	// (FieldManagerMaxLength; an aggregated API server may not).
	MaxManager = 128
	// MaxName (a DNS subdomain): a reference's name, a StatefulSet's
	// revisions (ControllerRevision names).
	MaxName = 253
	// MaxMessage: an Event's note and a condition's message, read by people
	// (timelines, logs), never compared by the collectors. The API admits
	// 1 KB for a note (events.k8s.io) and 32 KiB for a metav1.Condition's
	// message; 256 bytes hold the scheduler's and the controllers' usual
	// messages whole.
	MaxMessage = 256
	// MaxQualifiedName (<DNS subdomain>/<name>, 253 + 1 + 63): a condition's
	// type, an Event's reporting controller (validated as one when the
	// Event has an eventTime) and the deprecated source component that
	// stands for it; an apiVersion (<group>/<version>) has the same bound.
	MaxQualifiedName = MaxName + 1 + MaxLabel
	// MaxImage: a container's image. The API bounds no image; the longest
	// reference the distribution grammar parses is 520 bytes (name 255,
	// tag 128, sha512 digest 135).
	MaxImage = 1024
	// MaxServicePorts: the ports of a Service the cache keeps (numbers
	// only, for the webhook audit); the API server bounds none.
	MaxServicePorts = 32
	// MaxKeptAnnotation: the value of an annotation Compact keeps: the
	// longest it writes itself is AnnotationWriteManagers (four managers and
	// their separators); the API's are integers and timestamps.
	MaxKeptAnnotation = maxWriteManagers * (MaxManager + 1)
)

// CutUTF8 cuts s to at most n bytes on a rune boundary. A cut string is a
// copy: a substring would keep the decoded string, whole, alive in the
// cache.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// cut is CutUTF8 for the API's string types.
func cut[S ~string](s S, n int) S { return S(CutUTF8(string(s), n)) }

// capCondition cuts a condition's strings (its type, status, reason and
// message), whatever the kind's condition type.
func capCondition[T, S ~string](typ *T, status *S, reason, message *string) {
	*typ, *status = cut(*typ, MaxQualifiedName), cut(*status, MaxReason)
	*reason, *message = CutUTF8(*reason, MaxReason), CutUTF8(*message, MaxMessage)
}

// capOwner cuts an owner reference's strings: the API validates only that
// they are there.
func capOwner(r *metav1.OwnerReference) {
	r.APIVersion, r.Kind = CutUTF8(r.APIVersion, MaxQualifiedName), CutUTF8(r.Kind, MaxLabel)
	r.Name, r.UID = CutUTF8(r.Name, MaxName), cut(r.UID, MaxLabel)
}

// reference is what is read of an object reference (an Event's regarding
// object, an endpoint's target), cut: the API validates none of its
// fields. Its resourceVersion and fieldPath are read by nothing.
func reference(r *corev1.ObjectReference) corev1.ObjectReference {
	return corev1.ObjectReference{
		APIVersion: CutUTF8(r.APIVersion, MaxQualifiedName), Kind: CutUTF8(r.Kind, MaxLabel),
		Namespace: CutUTF8(r.Namespace, MaxLabel), Name: CutUTF8(r.Name, MaxName), UID: cut(r.UID, MaxLabel),
	}
}
