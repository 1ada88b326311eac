package informers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestPreferredVersion(t *testing.T) {
	for _, tc := range []struct {
		versions map[string]CRDVersion
		want     string
	}{
		{map[string]CRDVersion{"v1beta1": {Served: true}, "v1": {Served: true}, "v1alpha1": {Served: true}}, "v1"},
		{map[string]CRDVersion{"v1beta1": {Served: true}, "v1": {Served: false}}, "v1beta1"},
		{map[string]CRDVersion{"v2beta1": {Served: true}, "v1": {Served: true}}, "v1"}, // GA before beta, as discovery orders them
		{map[string]CRDVersion{"v2": {Served: true}, "v10": {Served: true}}, "v10"},
		{map[string]CRDVersion{"v1": {Served: false}}, ""},
	} {
		if got := (CRD{Versions: tc.versions}).Preferred(); got != tc.want {
			t.Errorf("preferred(%v) = %q, want %q", tc.versions, got, tc.want)
		}
	}
}

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gadgetsV1 = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	gadgetsV2 = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gadgets"}
)

// gadgetCRD is the CRD of gadgets.example.com serving versions, each with
// the status subresource.
func gadgetCRD(versions ...string) *unstructured.Unstructured {
	var vs []any
	for _, v := range versions {
		vs = append(vs, map[string]any{"name": v, "served": true, "storage": v == versions[0], "subresources": map[string]any{"status": map[string]any{}}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets.example.com", "uid": "crd", "resourceVersion": fmt.Sprint(len(versions))},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "versions": vs,
			"names": map[string]any{"kind": "Gadget", "plural": "gadgets"}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
}

func gadget(version, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/" + version, "kind": "Gadget",
		"metadata": map[string]any{"namespace": "ns", "name": name, "uid": "u-" + name, "resourceVersion": "1"},
	}}
}

// customWorld is a factory over a fake API server, with a CustomResources
// whose notifications and states are recorded.
type customWorld struct {
	t   *testing.T
	dyn *dynamicfake.FakeDynamicClient
	f   *Factory
	cr  *CustomResources
	ctx context.Context

	mu     sync.Mutex
	events []string
}

func newCustomWorld(t *testing.T, objs ...runtime.Object) *customWorld {
	t.Helper()
	w := &customWorld{t: t}
	w.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdGVR: "CustomResourceDefinitionList", gadgetsV1: "GadgetList", gadgetsV2: "GadgetList",
	}, objs...)
	w.f = New(fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
	w.f.SetDynamic(w.dyn)
	w.cr = w.f.CustomResources()
	w.cr.now = func() time.Time { return t0 } // the date of an unstamped CRD's notification
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.ctx = ctx
	return w
}

func (w *customWorld) record(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, fmt.Sprintf(format, args...))
}

// track tracks gadgets for collector "test", with handlers recording what
// they receive.
func (w *customWorld) track() {
	w.t.Helper()
	WatchCustom(w.cr, "test", Resource{Group: "example.com", Resource: "gadgets"}, func(ci CustomInformer) Handlers[unstructured.Unstructured] {
		w.record("informer %s kind %s", ci.Resource.Version, ci.Kind)
		return Handlers[unstructured.Unstructured]{
			Changed: func(_, u *unstructured.Unstructured, _ Seen) {
				w.record("changed %s@%s", u.GetName(), u.GetAPIVersion())
			},
			Gone: func(u *unstructured.Unstructured, s Seen) {
				w.record("gone %s@%s at %s", u.GetName(), u.GetAPIVersion(), s.At.Sub(t0))
			},
			Now: func() time.Time { return t0.Add(time.Minute) },
		}
	})
	if err := w.cr.Track(w.ctx, "test", CustomResource{Group: "example.com", Resource: "gadgets",
		OnState: func(state, why string) { w.record("state %s: %s", state, why) }}); err != nil {
		w.t.Fatal(err)
	}
}

// await waits until the recorded events include want, in order, and
// returns them.
func (w *customWorld) await(want ...string) []string {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		got := slices.Clone(w.events)
		w.mu.Unlock()
		if containsInOrder(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("events after 10 s:\n%s\nwant, in order:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func (w *customWorld) readiness(wantSynced bool, want string) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		synced, lines := w.cr.Readiness("test")
		if synced == wantSynced && len(lines) == 1 && lines[0] == want {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("readiness %v %q, want %v %q", synced, lines, wantSynced, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tracked custom resource's life: its informer starts when the CRD is
// there, moves to a new preferred version (objects the new version does
// not list are gone, dated by the handlers' clock), and stops when the
// CRD goes, handing every object it held to Gone dated by the CRD's
// deletion; nothing reaches the handlers after.
func TestCustomResourceLifecycle(t *testing.T) {
	w := newCustomWorld(t, gadgetCRD("v1"), gadget("v1", "g1"), gadget("v1", "g2"), gadget("v2", "g1"))
	w.track()
	w.f.Start(w.ctx)
	w.await("informer v1 kind Gadget", "state tracking: version v1")
	w.await("changed g1@example.com/v1") // the initial list, in no order
	w.await("changed g2@example.com/v1")
	w.readiness(true, "resource gadgets.example.com: tracking, synced")

	// v2 served too: the preferred version.
	if _, err := w.dyn.Resource(crdGVR).Update(w.ctx, gadgetCRD("v1", "v2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await("informer v2 kind Gadget", "changed g1@example.com/v2", "gone g2@example.com/v1 at 1m0s")

	if err := w.dyn.Resource(crdGVR).Delete(w.ctx, "gadgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await("gone g1@example.com/v2 at 0s", "state crd_missing: CustomResourceDefinition deleted")
	w.readiness(true, "resource gadgets.example.com: crd_missing (not tracked, excluded from readiness)")
	if _, err := w.dyn.Resource(gadgetsV2).Namespace("ns").Create(w.ctx, gadget("v2", "g3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	got := w.await()
	if n := strings.Count(strings.Join(got, "\n"), "gone g1"); n != 1 {
		t.Errorf("g1 gone %d times, want once:\n%s", n, strings.Join(got, "\n"))
	}
	if slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "g3") }) {
		t.Errorf("a stopped informer's object reached the handlers:\n%s", strings.Join(got, "\n"))
	}
	if states := w.cr.States("test"); states["gadgets.example.com"] != CustomCRDMissing {
		t.Errorf("states %v", states)
	}
}

// Without its CRD in the list, a tracked resource is missing it; a list
// that RBAC forbids is forbidden, and tracking again once allowed; a
// collector's Judge refuses a version.
func TestCustomResourceStates(t *testing.T) {
	t.Run("no CRD", func(t *testing.T) {
		w := newCustomWorld(t)
		w.track()
		if synced, lines := w.cr.Readiness("test"); synced || len(lines) != 1 || lines[0] != "resource gadgets.example.com: waiting for the CRD list" {
			t.Errorf("before the CRD list: %v %q", synced, lines)
		}
		w.f.Start(w.ctx)
		w.await("state crd_missing: no CustomResourceDefinition")
		w.readiness(true, "resource gadgets.example.com: crd_missing (not tracked, excluded from readiness)")
	})
	t.Run("forbidden, then allowed", func(t *testing.T) {
		w := newCustomWorld(t, gadgetCRD("v1"))
		var forbid atomic.Bool
		forbid.Store(true)
		w.dyn.PrependReactor("list", "gadgets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if forbid.Load() {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "gadgets"}, "", fmt.Errorf("RBAC"))
			}
			return false, nil, nil
		})
		w.track()
		w.f.Start(w.ctx)
		w.await("state tracking: version v1", "state forbidden: failed to list gadgets.example.com: gadgets.example.com is forbidden: RBAC")
		w.readiness(true, "resource gadgets.example.com: forbidden (not tracked, excluded from readiness)")
		forbid.Store(false)
		w.await("state tracking: list allowed")
		w.readiness(true, "resource gadgets.example.com: tracking, synced")
	})
	t.Run("judged unfit", func(t *testing.T) {
		w := newCustomWorld(t, gadgetCRD("v1"))
		if err := w.cr.Track(w.ctx, "test", CustomResource{Group: "example.com", Resource: "gadgets",
			Judge:   func(crd CRD, v string) (string, string) { return "unfit", crd.Kind + " " + v },
			OnState: func(state, why string) { w.record("state %s: %s", state, why) }}); err != nil {
			t.Fatal(err)
		}
		w.f.Start(w.ctx)
		w.await("state unfit: Gadget v1")
	})
}

// BeforeTransform's hooks read each object before the transform, from
// informers started before them too (collectors start on their own).
func TestCustomResourceBeforeTransform(t *testing.T) {
	w := newCustomWorld(t, gadgetCRD("v1"), gadget("v1", "g1"))
	hook := func(name string) func(ci CustomInformer) Hook {
		return func(ci CustomInformer) Hook {
			return func(m metav1.Object) {
				_, raw := m.(*unstructured.Unstructured)
				w.record("%s %s %s %v", name, ci.Kind, m.GetName(), raw)
			}
		}
	}
	w.cr.BeforeTransform(hook("early"))
	w.track()
	w.f.Start(w.ctx)
	w.await("early Gadget g1 true", "changed g1@example.com/v1")
	w.cr.BeforeTransform(hook("late"))
	if _, err := w.dyn.Resource(gadgetsV1).Namespace("ns").Create(w.ctx, gadget("v1", "g2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await("early Gadget g2 true", "late Gadget g2 true", "changed g2@example.com/v1")
}
