package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// Injected truths of the recordings: kwok's pod stages take exactly these
// delays (jitter-delay equal to delay), the EndpointSlice controller
// batches pod-triggered updates by sliceBatchPeriod, and the scenario's own
// controller of Widgets writes their status after these delays.
const (
	podCreateDelay   = 1 * time.Second
	podReadyDelay    = 2 * time.Second
	sliceBatchPeriod = 2 * time.Second
	widgetObserve    = 500 * time.Millisecond
	widgetReady      = 1500 * time.Millisecond
)

// TestRecordScenarios records the scenarios of testdata from a real control
// plane (internal/sandbox): KCE_RECORD=1 go test -run TestRecordScenarios
// ./internal/replay/ (about 3 minutes; KCE_RECORD=name records one). It
// rewrites testdata/<name>.jsonl and, where the scenario has one, the
// exporter configuration testdata/<name>.yaml it is replayed with; then
// rerun the replay tests with -update and review the goldens' diff.
func TestRecordScenarios(t *testing.T) {
	only := os.Getenv("KCE_RECORD")
	if only == "" {
		t.Skip("records from a real control plane: KCE_RECORD=1 (or a scenario name)")
	}
	// The watch cache off: a watch reads etcd, so a compaction during a
	// cut ends it with 410 Gone and a relist (SANDBOX.md, "A real 410").
	// The sandbox then falls back from WatchList to LIST (sendInitialEvents
	// needs the cache).
	sb := sandbox.StartT(t, sandbox.Options{
		Stages:                 sandbox.StagesGeneral,
		ControllerManagerFlags: []string{"--endpointslice-updates-batch-period=" + sliceBatchPeriod.String()},
		APIServerFlags:         []string{"--watch-cache=false"},
	})
	ctx := context.Background()
	if err := sb.CreateNode(ctx, "kwok-node-0"); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sb: sb, c: kubernetes.NewForConfigOrDie(sb.AdminConfig()), d: dynamic.NewForConfigOrDie(sb.AdminConfig())}
	for _, s := range scenarios {
		if only != "1" && only != s.name {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			e.t = t
			e.record(ctx, s)
		})
	}
}

type env struct {
	t  *testing.T
	sb *sandbox.Sandbox
	c  kubernetes.Interface
	d  dynamic.Interface
	// proxy is between the recorder and the API server in the scenarios
	// that cut the watch.
	proxy *sandbox.Proxy
}

type scenario struct {
	name string
	// config is the exporter configuration the recording is replayed with
	// (testdata/<name>.yaml); "": the default.
	config string
	// cut: the recorder reads through a proxy the scenario can cut.
	cut bool
	// only, when set, trims the recording to these resources (the others
	// get an empty list cycle, replay.RecordOptions.Unrecorded).
	only []informers.Resource
	// before runs before the recorder starts: the initial lists see it.
	before func(ctx context.Context, e *env, ns string) error
	run    func(ctx context.Context, e *env, r *replay.Recorder, ns string) error
}

var scenarios = []scenario{{
	name: "rollout",
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("create Service web and Deployment web (3 replicas; kwok: Initialized after 1s, Ready 2s later)")
		if err := e.service(ctx, ns, "web"); err != nil {
			return err
		}
		if err := e.deployment(ctx, demo.Deployment(ns, "web", 3, demo.Delays(podCreateDelay, podReadyDelay))); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 1); err != nil {
			return err
		}
		// As the end-to-end test, which reads the first episode's stages
		// before the second write: its endpoints are published first.
		if err := e.endpointsReady(ctx, ns, "web", 3); err != nil {
			return err
		}
		r.Note("new image: a rolling update")
		if err := e.setImage(ctx, ns, "web", "registry.example/web:v2"); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 2); err != nil {
			return err
		}
		if err := e.settled(ctx, ns, "web", 3); err != nil {
			return err
		}
		return sleep(ctx, sliceBatchPeriod+time.Second)
	},
}, {
	name: "scale-during-rollout",
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("create Deployment web (2 replicas)")
		if err := e.deployment(ctx, demo.Deployment(ns, "web", 2, demo.Delays(podCreateDelay, podReadyDelay))); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 1); err != nil {
			return err
		}
		r.Note("new image, then a scale to 4 while it rolls")
		if err := e.setImage(ctx, ns, "web", "registry.example/web:v2"); err != nil {
			return err
		}
		if err := sleep(ctx, 1500*time.Millisecond); err != nil {
			return err
		}
		if err := e.updateDeployment(ctx, ns, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](4) }); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 3); err != nil {
			return err
		}
		if err := e.settled(ctx, ns, "web", 4); err != nil {
			return err
		}
		return sleep(ctx, time.Second)
	},
}, {
	name:   "quota-blocked",
	config: "stall:\n  threshold: 15s\n",
	before: func(ctx context.Context, e *env, ns string) error { return e.quota(ctx, ns, "1") },
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("a ResourceQuota of 1 pod; create Deployment web (3 replicas): FailedCreate")
		if err := e.deployment(ctx, demo.Deployment(ns, "web", 3, demo.Delays(podCreateDelay, podReadyDelay))); err != nil {
			return err
		}
		// Past the 15 s stall threshold of its config, so that the stall
		// and its reason are in the goldens.
		return sleep(ctx, 20*time.Second)
	},
}, {
	name: "watch-gap-relist",
	cut:  true,
	before: func(ctx context.Context, e *env, ns string) error {
		for _, name := range []string{"settles", "gone", "rolls"} {
			if err := e.deployment(ctx, demo.Deployment(ns, name, 1, demo.Delays(100*time.Millisecond, 200*time.Millisecond))); err != nil {
				return err
			}
		}
		for _, name := range []string{"settles", "gone", "rolls"} {
			if err := e.available(ctx, ns, name, 1); err != nil {
				return err
			}
		}
		return nil
	},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		err := e.gap(ctx, r, func() error {
			r.Note("during the cut: delete gone, create born, scale settles to 2, a new template for rolls (pods Ready 4s after creation): in flight at the relist")
			if err := e.c.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
				return err
			}
			if err := e.deployment(ctx, demo.Deployment(ns, "born", 1, demo.Delays(100*time.Millisecond, 200*time.Millisecond))); err != nil {
				return err
			}
			if err := e.updateDeployment(ctx, ns, "settles", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) }); err != nil {
				return err
			}
			if err := e.available(ctx, ns, "born", 1); err != nil {
				return err
			}
			if err := e.available(ctx, ns, "settles", 2); err != nil {
				return err
			}
			if err := e.gone(ctx, ns, "gone"); err != nil {
				return err
			}
			return e.updateDeployment(ctx, ns, "rolls", func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "registry.example/rolls:v2"
				d.Spec.Template.Annotations = demo.Delays(2*time.Second, 2*time.Second)
			})
		})
		if err != nil {
			return err
		}
		if err := e.available(ctx, ns, "rolls", 2); err != nil {
			return err
		}
		if err := e.settled(ctx, ns, "rolls", 1); err != nil {
			return err
		}
		return sleep(ctx, time.Second)
	},
}, {
	name: "pod-recreated-during-gap",
	cut:  true,
	before: func(ctx context.Context, e *env, ns string) error {
		if err := e.headless(ctx, ns, "db"); err != nil {
			return err
		}
		if err := e.statefulSet(ctx, ns, "db"); err != nil {
			return err
		}
		return e.podReady(ctx, ns, "db-0", "")
	},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		old, err := e.c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return e.gap(ctx, r, func() error {
			r.Note("during the cut: delete pod db-0 (uid %s); the StatefulSet controller creates it again", old.UID)
			if err := e.c.CoreV1().Pods(ns).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
				return err
			}
			return e.podReady(ctx, ns, "db-0", old.UID)
		})
	},
}, {
	name: "custom-resource",
	config: `resources:
  - group: example.com
    resource: widgets
    version: v1
`,
	before: func(ctx context.Context, e *env, _ string) error { return e.widgetCRD(ctx) },
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("create Widget w1; its controller (the scenario) observes after 0.5s, Ready 1.5s later")
		widgets := e.d.Resource(widgetResource).Namespace(ns)
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w1", "namespace": ns},
			"spec":     map[string]any{"size": int64(1)},
		}}
		if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := e.reconcileWidget(ctx, widgets, "w1", 1); err != nil {
			return err
		}
		r.Note("a spec change: generation 2")
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "size")
			_, err = widgets.Update(ctx, u, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		if err := e.reconcileWidget(ctx, widgets, "w1", 2); err != nil {
			return err
		}
		return sleep(ctx, time.Second)
	},
}, {
	// An exporter started over healthy custom resources: phase-only
	// Widgets (a ready: expression, no observedGeneration anywhere), each
	// ready on its controller's status since before its last spec write,
	// and a canary that is not. Replayed, the canary alone is a recovered
	// episode, and stalls past its 1 s stallThreshold.
	name: "custom-resource-restart",
	config: `resources:
  - group: example.com
    resource: widgets
    version: v1
    ready: ['{.status.phase}=Running']
    stallThreshold: 1s
`,
	before: func(ctx context.Context, e *env, ns string) error {
		if err := e.widgetCRD(ctx); err != nil {
			return err
		}
		widgets := e.d.Resource(widgetResource).Namespace(ns)
		phases := map[string]string{"w1": "Running", "w2": "Running", "w3": "Running", "canary": "Pending"}
		for _, name := range []string{"w1", "w2", "w3", "canary"} {
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"name": name, "namespace": ns},
				"spec":     map[string]any{"size": int64(1)},
			}}
			u, err := widgets.Create(ctx, w, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			u.Object["status"] = map[string]any{"phase": phases[name]}
			if u, err = widgets.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
				return err
			}
			_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "size")
			if _, err := widgets.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return nil
	},
	run: func(ctx context.Context, _ *env, r *replay.Recorder, _ string) error {
		r.Note("started over 3 ready Widgets at generation 2 and a Pending canary; wait 2s")
		return sleep(ctx, 2*time.Second)
	},
}, {
	name: "warning-event-series",
	before: func(ctx context.Context, e *env, ns string) error {
		return e.deployment(ctx, demo.Deployment(ns, "web", 1, demo.Delays(100*time.Millisecond, 200*time.Millisecond)))
	},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		d, err := e.c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		// The legacy recorder (tools/record, what kube-controller-manager
		// uses) writes every repeat as a count increment.
		r.Note("tools/record: 5 Warning BackOff on Deployment web, 1s apart (count 1..5)")
		legacy := record.NewBroadcaster()
		legacy.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.c.CoreV1().Events(ns)})
		defer legacy.Shutdown()
		lr := legacy.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "replay-legacy-controller"})
		for range 5 {
			lr.Event(d, corev1.EventTypeWarning, "BackOff", "back-off restarting the rollout")
			if err := sleep(ctx, time.Second); err != nil {
				return err
			}
		}
		// tools/events (events.k8s.io) writes the first occurrence and
		// the second as series.count 2; later ones only on its 30 min
		// refresh.
		r.Note("tools/events: 3 Warning Unhealthy on Deployment web, 1s apart (series)")
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: e.c.EventsV1()})
		stop := make(chan struct{})
		b.StartRecordingToSink(stop)
		defer close(stop)
		er := b.NewRecorder(scheme.Scheme, "replay-series-controller")
		for range 3 {
			er.Eventf(d, nil, corev1.EventTypeWarning, "Unhealthy", "Probe", "probe of the rollout failed")
			if err := sleep(ctx, time.Second); err != nil {
				return err
			}
		}
		return e.eventsSettled(ctx, ns)
	},
}, {
	// kube-controller-manager's writes during a large rollout: the
	// Deployment's and its ReplicaSets' status and scale writes, which the
	// churn collector must read as progress (pods and the other resources
	// are left out: megabytes nobody reads here).
	name: "rollout-100-replicas",
	only: []informers.Resource{informers.Deployments, informers.ReplicaSets},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("create Deployment web (100 replicas; kwok: Initialized after 1s, Ready 1s later)")
		if err := e.deployment(ctx, demo.Deployment(ns, "web", 100, demo.Delays(time.Second, time.Second))); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 1); err != nil {
			return err
		}
		r.Note("new image: a rolling update of 100 replicas (maxSurge and maxUnavailable 25%%)")
		if err := e.setImage(ctx, ns, "web", "registry.example/web:v2"); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 2); err != nil {
			return err
		}
		if err := e.settled(ctx, ns, "web", 100); err != nil {
			return err
		}
		return sleep(ctx, time.Second)
	},
}, {
	// An autoscaler's scale writes through /scale, every 5 s (three times
	// the HorizontalPodAutoscaler's fastest cadence, 15 s), following a
	// load that goes up and down; kube-controller-manager follows each.
	name: "hpa-scaling",
	only: []informers.Resource{informers.Deployments, informers.ReplicaSets},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		r.Note("create Deployment web (3 replicas; kwok: Initialized after 500ms, Ready 500ms later)")
		if err := e.deployment(ctx, demo.Deployment(ns, "web", 3, demo.Delays(500*time.Millisecond, 500*time.Millisecond))); err != nil {
			return err
		}
		if err := e.available(ctx, ns, "web", 1); err != nil {
			return err
		}
		load := []int32{5, 8, 10, 8, 6, 4, 6, 9, 12, 9, 6, 3}
		r.Note("kce-autoscaler scales web through /scale every 5s: %v", load)
		for _, n := range load {
			if err := e.scale(ctx, ns, "web", n, "kce-autoscaler"); err != nil {
				return err
			}
			if err := sleep(ctx, 5*time.Second); err != nil {
				return err
			}
		}
		return e.settled(ctx, ns, "web", 3)
	},
}, {
	// Writers in a loop without progress, every 200 ms for 6 s: one
	// restamps an annotation of Deployment restamped, one a condition's
	// lastUpdateTime of Deployment stamped, and two server-side appliers
	// take spec.replicas of Deployment fought from each other with force.
	// Replayed with churn.hotWrites 4: a status time has one-second
	// precision, so its restamps reach the API server once a second.
	name:   "churn-loops",
	config: "churn:\n  hotWrites: 4\n",
	only:   []informers.Resource{informers.Deployments, informers.ReplicaSets},
	run: func(ctx context.Context, e *env, r *replay.Recorder, ns string) error {
		for _, name := range []string{"restamped", "stamped", "fought"} {
			if err := e.deployment(ctx, demo.Deployment(ns, name, 1, demo.Delays(100*time.Millisecond, 100*time.Millisecond))); err != nil {
				return err
			}
			if err := e.available(ctx, ns, name, 1); err != nil {
				return err
			}
		}
		r.Note("every 200ms for 6s: kce-restamper annotates restamped, kce-status-stamper restamps stamped's Available lastUpdateTime, kce-fight-a and kce-fight-b apply fought's replicas (1, 2) in turn with force")
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := range 30 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"kce.example/heartbeat":"%d"}}}`, time.Now().UnixNano())
			if _, err := e.c.AppsV1().Deployments(ns).Patch(ctx, "restamped", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kce-restamper"}); err != nil {
				return err
			}
			if err := e.stampCondition(ctx, ns, "stamped", "kce-status-stamper"); err != nil {
				return err
			}
			manager := []string{"kce-fight-a", "kce-fight-b"}[i%2]
			fight := appsv1ac.Deployment("fought", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(int32(1 + i%2)))
			if _, err := e.c.AppsV1().Deployments(ns).Apply(ctx, fight, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
				return err
			}
		}
		return sleep(ctx, time.Second)
	},
}}

// record runs s and writes its recording.
func (e *env) record(ctx context.Context, s scenario) {
	t := e.t
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ns := "replay-" + s.name
	if _, err := e.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	if s.config != "" {
		var err error
		if cfg, err = config.Parse([]byte(s.config)); err != nil {
			t.Fatal(err)
		}
	}
	if s.before != nil {
		if err := s.before(ctx, e, ns); err != nil {
			t.Fatal(err)
		}
	}
	restCfg := e.sb.AdminConfig()
	e.proxy = nil
	if s.cut {
		p, err := e.sb.NewProxy()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Restore)
		e.proxy = p
		restCfg = p.Config(restCfg)
	}
	// As the exporter's client: protobuf for built-in types.
	restCfg = rest.CopyConfig(restCfg)
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	var out bytes.Buffer
	recorded, unrecorded := all.ResourcesOf(cfg), []informers.Resource(nil)
	if s.only != nil {
		recorded, unrecorded = nil, nil
		for _, res := range all.ResourcesOf(cfg) {
			if slices.Contains(s.only, res) {
				recorded = append(recorded, res)
			} else {
				unrecorded = append(unrecorded, res)
			}
		}
	}
	r, err := replay.NewRecorder(replay.RecordOptions{
		Client: kubernetes.NewForConfigOrDie(restCfg), Dynamic: dynamic.NewForConfigOrDie(restCfg),
		Resources: recorded, Unrecorded: unrecorded, Namespaces: []string{ns}, Out: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	r.Note("scenario %s: every resource listed", s.name)
	runErr := s.run(ctx, e, r, ns)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	path := filepath.Join("testdata", s.name+".jsonl")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if s.config != "" {
		if err := os.WriteFile(filepath.Join("testdata", s.name+".yaml"), []byte(s.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d lines, %d bytes", path, bytes.Count(out.Bytes(), []byte("\n")), out.Len())
}

// gap cuts the recorder off the API server, runs during, compacts etcd so
// that every resumed watch gets 410 Gone, restores the path and waits for
// the relists (SANDBOX.md, "A real 410").
func (e *env) gap(ctx context.Context, r *replay.Recorder, during func() error) error {
	r.Note("cut the recorder's connections")
	e.proxy.Cut()
	if err := during(); err != nil {
		return err
	}
	rev, err := e.sb.CompactEtcd(ctx)
	if err != nil {
		return err
	}
	r.Note("etcd compacted at revision %d; restore the connections", rev)
	e.proxy.Restore()
	if err := r.WaitForRelists(ctx, 2); err != nil {
		return err
	}
	return sleep(ctx, time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// until polls cond every 50 ms until it holds, for at most a minute.
func until(ctx context.Context, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deployment creates d with pods that kwok deletes 1 s after their
// deletion (it waits for the grace period: 30 s by default).
func (e *env) deployment(ctx context.Context, d *appsv1.Deployment) error {
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	_, err := e.c.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	return err
}

func (e *env) service(ctx context.Context, ns, app string) error {
	_, err := e.c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	return err
}

func (e *env) headless(ctx context.Context, ns, app string) error {
	_, err := e.c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}, ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	return err
}

func (e *env) statefulSet(ctx context.Context, ns, name string) error {
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: demo.PodTemplate(name, demo.Delays(200*time.Millisecond, 300*time.Millisecond)),
		},
	}
	set.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	_, err := e.c.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{})
	return err
}

func (e *env) quota(ctx context.Context, ns, pods string) error {
	if _, err := e.c.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return until(ctx, "quota status", func() (bool, error) {
		q, err := e.c.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := q.Status.Hard[corev1.ResourcePods]
		return ok, nil
	})
}

func (e *env) updateDeployment(ctx context.Context, ns, name string, mutate func(*appsv1.Deployment)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(d)
		_, err = e.c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

// scale writes the Deployment's replicas through its /scale subresource,
// as a HorizontalPodAutoscaler does.
func (e *env) scale(ctx context.Context, ns, name string, replicas int32, manager string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.c.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = e.c.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
}

// stampCondition restamps the lastUpdateTime of the Deployment's
// Available condition and nothing else, through /status: a write without
// progress (kube-controller-manager leaves it: its own status is the same).
func (e *env) stampCondition(ctx context.Context, ns, name, manager string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range d.Status.Conditions {
			if d.Status.Conditions[i].Type == appsv1.DeploymentAvailable {
				d.Status.Conditions[i].LastUpdateTime = metav1.Now()
			}
		}
		_, err = e.c.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
}

func (e *env) setImage(ctx context.Context, ns, name, image string) error {
	return e.updateDeployment(ctx, ns, name, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
}

// settled waits until the Deployment's pods are its replicas: the old
// ones are deleted.
func (e *env) settled(ctx context.Context, ns, name string, replicas int) error {
	return until(ctx, "pods of "+name+" settled", func() (bool, error) {
		pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == replicas, nil
	})
}

// available waits until generation gen of the Deployment is rolled out and
// available.
func (e *env) available(ctx context.Context, ns, name string, gen int64) error {
	return until(ctx, fmt.Sprintf("deployment %s/%s generation %d available", ns, name, gen), func() (bool, error) {
		d, err := e.c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Generation >= gen && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	})
}

func (e *env) gone(ctx context.Context, ns, name string) error {
	return until(ctx, "deployment "+name+" and its pods deleted", func() (bool, error) {
		pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		_, err = e.c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return len(pods.Items) == 0 && err != nil && strings.Contains(err.Error(), "not found"), nil
	})
}

// podReady waits until the pod is Ready, under another uid than notUID.
func (e *env) podReady(ctx context.Context, ns, name string, notUID types.UID) error {
	return until(ctx, "pod "+name+" ready", func() (bool, error) {
		p, err := e.c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if notUID != "" && p.UID == notUID {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// endpointsReady waits until the Service's EndpointSlices list n ready
// endpoints.
func (e *env) endpointsReady(ctx context.Context, ns, svc string, n int) error {
	return until(ctx, "endpoints of "+svc+" ready", func() (bool, error) {
		l, err := e.c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range l.Items {
			for _, ep := range l.Items[i].Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					ready++
				}
			}
		}
		return ready == n, nil
	})
}

// eventsSettled waits until the Warning Events of ns have stopped changing
// for 2 s (the recorders write asynchronously).
func (e *env) eventsSettled(ctx context.Context, ns string) error {
	last, stable := "", 0
	return until(ctx, "events settled", func() (bool, error) {
		l, err := e.c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var b strings.Builder
		for i := range l.Items {
			fmt.Fprintf(&b, "%s@%s ", l.Items[i].Name, l.Items[i].ResourceVersion)
		}
		if b.String() == last {
			stable++
		} else {
			last, stable = b.String(), 0
		}
		return stable >= 40, nil
	})
}

var (
	crdResource    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetResource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// widgetCRD creates the Widget CRD (once per sandbox) and waits until
// Widgets are served.
func (e *env) widgetCRD(ctx context.Context) error {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": open, "status": open}}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}}
	if _, err := e.d.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return until(ctx, "widgets served", func() (bool, error) {
		_, err := e.d.Resource(widgetResource).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
}

// reconcileWidget plays the Widget's controller for generation gen:
// observed (Ready False, Progressing) after widgetObserve, Ready True
// widgetReady later.
func (e *env) reconcileWidget(ctx context.Context, widgets dynamic.ResourceInterface, name string, gen int64) error {
	cond := func(status, reason string) map[string]any {
		return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": "replay scenario controller",
			"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	}
	write := func(status, reason string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := widgets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if u.GetGeneration() != gen {
				return errors.New("unexpected generation")
			}
			u.Object["status"] = map[string]any{"observedGeneration": gen, "conditions": []any{cond(status, reason)}}
			_, err = widgets.UpdateStatus(ctx, u, metav1.UpdateOptions{})
			return err
		})
	}
	if err := sleep(ctx, widgetObserve); err != nil {
		return err
	}
	if err := write("False", "Progressing"); err != nil {
		return err
	}
	if err := sleep(ctx, widgetReady); err != nil {
		return err
	}
	return write("True", "Succeeded")
}
