package informers_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// Every pod the sandbox recordings hold (kwok's and the controllers' real
// writes: pending, unschedulable, gated, running, crash-looping,
// terminating) becomes a record that says what the API object says, field
// by field, read from the object itself; the receipt and the writer move
// from annotations to fields, and no annotation is kept.
func TestPodRecordSaysWhatThePodSays(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "replay", "testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	at := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	pods, states := 0, map[informers.ContainerStateKind]int{}
	// The recordings have no container that terminated: one as the kubelet
	// reports a container that exited with an error.
	exited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-x", UID: "u", Annotations: map[string]string{}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: 2, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}
	for _, f := range append(files, "") {
		var rec *replay.Recording
		if f == "" {
			rec = &replay.Recording{Lines: []replay.Line{{Object: exited}}}
		} else {
			var err error
			rec, err = replay.ReadFile(f, replay.NewResources())
			if err != nil && strings.Contains(err.Error(), "unknown resource") {
				t.Logf("%s: not read here (a custom resource's recording): %v", f, err)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range rec.Lines {
			p, ok := l.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pods++
			api := p.DeepCopy()
			informers.Stamp(api, at, pods%2 == 0)
			api.Annotations[informers.AnnotationWriter] = "kwok-controller"
			out, err := informers.Compact(api.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			r, ok := out.(*informers.Pod)
			if !ok {
				t.Fatalf("Compact made a %T of a pod", out)
			}
			name := filepath.Base(f) + " " + p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
			if r.Name != p.Name || r.Namespace != p.Namespace || r.UID != p.UID || r.ResourceVersion != p.ResourceVersion ||
				!r.CreationTimestamp.Equal(&p.CreationTimestamp) || !reflect.DeepEqual(r.DeletionTimestamp, p.DeletionTimestamp) ||
				!reflect.DeepEqual(r.Labels, p.Labels) || !reflect.DeepEqual(r.OwnerReferences, p.OwnerReferences) ||
				!slices.Equal(r.Finalizers, p.Finalizers) {
				t.Errorf("%s: metadata %+v, want that of %+v", name, r.ObjectMeta, p.ObjectMeta)
			}
			if r.Annotations != nil || r.ManagedFields != nil {
				t.Errorf("%s: annotations %v, %d managedFields kept", name, r.Annotations, len(r.ManagedFields))
			}
			if got, listed := r.Receipt(); !got.Equal(at) || listed != (pods%2 == 0) {
				t.Errorf("%s: receipt %v listed %v, want %v %v", name, got, listed, at, pods%2 == 0)
			}
			if got, _ := informers.Received(r); !got.Equal(at) {
				t.Errorf("%s: Received %v, want %v", name, got, at)
			}
			if w := informers.RecordedWriter(r); w != "kwok-controller" {
				t.Errorf("%s: writer %q", name, w)
			}
			images := []string{}
			for _, c := range p.Spec.Containers {
				images = append(images, c.Image)
			}
			if r.Spec.NodeName != p.Spec.NodeName || r.Spec.SchedulingGated != (len(p.Spec.SchedulingGates) > 0) ||
				!slices.Equal(r.Spec.ReadinessGates, p.Spec.ReadinessGates) || !slices.Equal(r.Spec.Images, images) || r.Status.Phase != p.Status.Phase {
				t.Errorf("%s: spec %+v phase %s, want those of %+v %s", name, r.Spec, r.Status.Phase, p.Spec, p.Status.Phase)
			}
			if len(r.Status.Conditions) != len(p.Status.Conditions) {
				t.Fatalf("%s: %d conditions, want %d", name, len(r.Status.Conditions), len(p.Status.Conditions))
			}
			for i, c := range p.Status.Conditions {
				g := r.Status.Conditions[i]
				msg := ""
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					msg = c.Message
				}
				if g.Type != c.Type || g.Status != c.Status || g.Reason != c.Reason || !g.LastTransitionTime.Equal(&c.LastTransitionTime) || g.Message != msg {
					t.Errorf("%s: condition %+v, want %+v", name, g, c)
				}
				if r.ConditionOf(c.Type) != &r.Status.Conditions[i] {
					t.Errorf("%s: ConditionOf(%s) is not the record's condition", name, c.Type)
				}
			}
			for _, pair := range [][2]any{{p.Status.InitContainerStatuses, r.Status.InitContainerStatuses}, {p.Status.ContainerStatuses, r.Status.ContainerStatuses}} {
				want, got := pair[0].([]corev1.ContainerStatus), pair[1].([]informers.ContainerStatus)
				if len(got) != len(want) {
					t.Fatalf("%s: %d container statuses, want %d", name, len(got), len(want))
				}
				for i, w := range want {
					g := got[i]
					var kind informers.ContainerStateKind
					var reason string
					var exit int32
					switch s := w.State; {
					case s.Waiting != nil:
						kind, reason = informers.ContainerWaiting, s.Waiting.Reason
					case s.Running != nil:
						kind = informers.ContainerRunning
					case s.Terminated != nil:
						kind, reason, exit = informers.ContainerTerminated, s.Terminated.Reason, s.Terminated.ExitCode
					}
					states[kind]++
					if g.Name != w.Name || g.Ready != w.Ready || g.RestartCount != w.RestartCount || !reflect.DeepEqual(g.Started, w.Started) ||
						g.State != (informers.ContainerState{Kind: kind, Reason: reason, ExitCode: exit}) {
						t.Errorf("%s: container %+v, want %+v", name, g, w)
					}
				}
			}
			if again, _ := informers.Compact(r); again != any(r) {
				t.Errorf("%s: a record compacted again is another object", name)
			}
			if c := r.DeepCopy(); !reflect.DeepEqual(c, r) || len(c.Status.Conditions) > 0 && &c.Status.Conditions[0] == &r.Status.Conditions[0] {
				t.Errorf("%s: DeepCopy is not an unshared equal copy:\n%#v\n%#v", name, c, r)
			}
		}
	}
	// The recordings must hold what the comparison is about.
	if pods < 90 || states[informers.ContainerWaiting] == 0 || states[informers.ContainerRunning] == 0 || states[informers.ContainerTerminated] == 0 {
		t.Errorf("the recordings hold %d pods, container states %v: want pods waiting, running and terminated", pods, states)
	}
}
