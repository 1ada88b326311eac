package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// recordEnv, set to 1, makes TestFluxKustomization write the statuses it
// saw into fluxFixtures instead of checking the fixtures' shape against them.
const recordEnv = "KCE_RECORD"

// fluxFixtures holds the Kustomization statuses recorded from the real
// controller, one file per case, for the unit tests of the convention.
var fluxFixtures = filepath.Join("..", "testdata", "operators", "flux")

const (
	fluxNS   = "flux-e2e"
	fluxKind = "Kustomization.kustomize.toolkit.fluxcd.io"
	// fluxTimeout is the Kustomization's spec.timeout: how long its health
	// check waits before the reconcile fails. 30 s is the least the
	// controller accepts (v1.9.6 GetTimeout raises anything shorter to 30 s).
	fluxTimeout = 30 * time.Second
	// fluxRetry is its spec.retryInterval, longer than the test's wait after
	// a failure, so that no retry holds the worker when the next spec write
	// comes (a new generation waits for the reconcile in flight).
	fluxRetry = 2 * time.Minute
	// fluxStall is the exporter's stallThreshold for Kustomizations.
	fluxStall = 10 * time.Second
)

// fluxSource is the repository the test publishes: a Deployment whose pods
// kwok makes Ready (./good), the same Deployment with a nodeSelector no node
// matches (./unready: its new pods are never scheduled, the rollout never
// completes), and a file that is not YAML (./broken).
func fluxSource(replicas int) map[string]string {
	deployment := func(nodeSelector string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        pod-create.stage.kwok.x-k8s.io/delay: 200ms
        pod-create.stage.kwok.x-k8s.io/jitter-delay: 200ms
        pod-ready.stage.kwok.x-k8s.io/delay: 300ms
        pod-ready.stage.kwok.x-k8s.io/jitter-delay: 300ms
    spec:%s
      containers:
      - {name: web, image: registry.invalid/web:1}
`, replicas, nodeSelector)
	}
	return map[string]string{
		"good/kustomization.yaml":    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\n",
		"good/deployment.yaml":       deployment(""),
		"unready/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\n",
		"unready/deployment.yaml":    deployment("\n      nodeSelector: {kce.test/no-such-node: \"true\"}"),
		"broken/configmap.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [broken\n",
	}
}

// Flux's real kustomize-controller reconciles a Kustomization from a
// GitRepository whose status the test writes (source-controller is not
// run), with wait: true, through: (a) success, (b) a failing health check,
// (c) a broken manifest, (d) spec changes back to success and a new source
// revision. Injected truth: the statuses the controller wrote (read by the
// test's own watch, with their receipt times), and what the test changed.
// Each case asserts the real status (the facts the exporter must read) and
// what the exporter reports: (a) and (d) converge, timed within 0.5 s of
// the test's watch; (b) and (c) stall at stage ready for a reason other
// than not_observed (Flux leaves status.observedGeneration at the last
// success while its conditions carry the new generation).
func TestFluxKustomization(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	record := os.Getenv(recordEnv) == "1"
	version := fluxVersion(t)

	f, err := sandbox.StartKustomizeController(ctx, sb, sandbox.FluxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- last 40 lines of %s:\n%s", f.LogPath(), f.LogTail(40))
		}
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	// The controller's /metrics as a Prometheus scrape target.
	prom, err := sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{Targets: []sandbox.ScrapeTarget{f.MetricsTarget()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	ks := dyn.Resource(sandbox.KustomizationResource).Namespace(fluxNS)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the controller stops: it removes its finalizer once it has
	// pruned what it applied; without it the namespace could never go.
	t.Cleanup(func() {
		bg, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = ks.Delete(bg, "app", metav1.DeleteOptions{})
		for bg.Err() == nil {
			if _, err := ks.Get(bg, "app", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = client.CoreV1().Namespaces().Delete(context.Background(), fluxNS, metav1.DeleteOptions{})
	})

	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, fmt.Sprintf(`
resources:
  - group: kustomize.toolkit.fluxcd.io
    resource: kustomizations
    stallThreshold: %s
`, fluxStall)))
	e.waitReady(60 * time.Second)
	eventually(t, 10*time.Second, "kustomizations tracked", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": "kustomizations.kustomize.toolkit.fluxcd.io", "state": "tracking"})
		return v == 1, fmt.Sprint(v)
	})

	art1, err := f.PublishGitRepository(ctx, fluxNS, "repo", fluxSource(2))
	if err != nil {
		t.Fatal(err)
	}
	h := watchObject(ctx, t, ks, "app")

	// Every case starts from the state the one before left: a case that
	// stopped early (the controller did not get there) stops the rest; one
	// that only found the exporter wrong does not.
	run := func(name string, fn func(t *testing.T)) {
		completed := false
		t.Run(name, func(t *testing.T) {
			fn(t)
			completed = true
		})
		if !completed {
			t.FailNow()
		}
	}
	var created time.Time
	run("a success", func(t *testing.T) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": "app", "namespace": fluxNS},
			"spec": map[string]any{
				"interval": "30s", "timeout": fluxTimeout.String(), "retryInterval": fluxRetry.String(),
				"path": "./good", "prune": true, "wait": true,
				"targetNamespace": fluxNS,
				"sourceRef":       map[string]any{"kind": "GitRepository", "name": "repo"},
			},
		}}
		if _, err := ks.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created = time.Now()
		ready := h.waitFor(t, 0, time.Minute, "Ready=True at generation 1", func(u *unstructured.Unstructured) bool {
			return conditionOf(u, "Ready")["status"] == "True" && observedGen(u) == 1
		})
		u := h.settled(t)
		wantCondition(t, u, "Ready", "True", "ReconciliationSucceeded", 1)
		wantCondition(t, u, "Healthy", "True", "Succeeded", 1)
		if c := conditionOf(u, "Reconciling"); c != nil {
			t.Errorf("Reconciling condition left on success: %v", c)
		}
		wantStatusString(t, u, "lastAttemptedRevision", art1.Revision)
		wantStatusString(t, u, "lastAppliedRevision", art1.Revision)
		t.Logf("Ready=True %v after the create (test's watch)", ready.at.Sub(created).Round(time.Millisecond))
		fluxFixture(t, record, version, "ready", "a success: generation 1 applied, health check passed", u)

		// The exporter: one converged create episode, its ready stage timed
		// like the test's watch saw it, and no stall left.
		eventually(t, 15*time.Second, "the create episode converged", func() (bool, string) {
			v := sumFamily(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"kind": fluxKind, "outcome": "converged"})
			return v == 1, fmt.Sprint(v)
		})
		mfs := e.scrape()
		sum, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", map[string]string{"kind": fluxKind, "namespace": fluxNS, "stage": "ready", "change": "create"})
		if want := ready.at.Sub(created).Seconds(); n != 1 || !within(sum, want, 0.5) {
			t.Errorf("ready stage: %d observations, %.3f s; want 1 of %.3f s (+-0.5 s)", n, sum, want)
		} else {
			t.Logf("ready stage: %.3f s measured, %.3f s by the test's watch", sum, want)
		}
		if s := stallsOf(mfs, "app"); len(s) > 0 {
			t.Errorf("stalled after converging: %v", s)
		}
	})

	// spec changes the Kustomization's path and returns when and at which
	// generation the write was answered.
	spec := func(t *testing.T, path string) (time.Time, int64) {
		t.Helper()
		u, err := ks.Patch(ctx, "app", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"path":%q}}`, path), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return time.Now(), u.GetGeneration()
	}
	// failing asserts the status of a failed reconcile of generation gen
	// after a success at generation 1, and that the exporter stalls it at
	// stage ready for a reason other than not_observed.
	failing := func(t *testing.T, u *unstructured.Unstructured, gen int64, reason string) {
		t.Helper()
		wantCondition(t, u, "Ready", "False", reason, gen)
		wantCondition(t, u, "Reconciling", "True", "ProgressingWithRetry", gen)
		if og := observedGen(u); og != 1 {
			t.Errorf("status.observedGeneration = %d, want 1 (the last success; kustomize-controller sets it only on success)", og)
		}
		// The artefact was fetched: the attempt is recorded, the applied
		// revision stays the last success's (the same artefact here).
		wantStatusString(t, u, "lastAttemptedRevision", art1.Revision)
		wantStatusString(t, u, "lastAppliedRevision", art1.Revision)

		// Checked only while the failure is the object's current state:
		// the exporter's stall is of the newest generation.
		var got []string
		ok := poll(fluxStall+10*time.Second, func() bool {
			got = stallsOf(e.scrape(), "app")
			return len(got) == 1 && strings.HasPrefix(got[0], "ready/") && got[0] != "ready/not_observed"
		})
		if !ok {
			t.Errorf("exporter stalls of app: %v; want one at stage ready with a reason other than not_observed "+
				"(the conditions carry generation %d, status.observedGeneration the last success's)", got, gen)
		} else {
			t.Logf("exporter: stalled %s", got[0])
		}
	}

	run("b health check fails", func(t *testing.T) {
		from := h.len()
		changed, gen := spec(t, "./unready")
		// The controller holds the item in its worker for the whole health
		// check: its workqueue reports it as unfinished work. Sampled every
		// half second while the check runs (no status write comes between
		// its start and its end).
		var longest float64
		sampled, stopSampling := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				if v, ok := value(controllerMetrics(f.MetricsAddr()), "workqueue_longest_running_processor_seconds", map[string]string{"name": "kustomization"}); ok {
					longest = max(longest, v)
				}
				select {
				case <-stopSampling:
					return
				case <-ctx.Done(): // the test failed before the health check did
					return
				case <-tick.C:
				}
			}
		}()
		failed := h.waitFor(t, from, fluxTimeout+45*time.Second, "Ready=False HealthCheckFailed", func(u *unstructured.Unstructured) bool {
			return conditionOf(u, "Ready")["reason"] == "HealthCheckFailed" && u.GetGeneration() == gen
		})
		close(stopSampling)
		<-sampled
		t.Logf("Ready=False HealthCheckFailed %v after the spec write; workqueue_longest_running_processor_seconds{name=kustomization} reached %.1f s",
			failed.at.Sub(changed).Round(time.Millisecond), longest)
		if longest < fluxTimeout.Seconds()/2 {
			t.Errorf("longest running processor %.1f s during a %v health check, want at least half of it", longest, fluxTimeout)
		}
		u := h.settled(t)
		wantCondition(t, u, "Healthy", "False", "HealthCheckFailed", gen)
		fluxFixture(t, record, version, "health-check-failed", "b: a spec change to a Deployment that never becomes ready; the health check timed out", u)
		failing(t, u, gen, "HealthCheckFailed")
		if n := readyObservations(e.scrape(), "other"); n != 0 {
			t.Errorf("%d ready observations of a change that never converged", n)
		}
	})

	run("c broken manifest", func(t *testing.T) {
		from := h.len()
		_, gen := spec(t, "./broken")
		h.waitFor(t, from, time.Minute, "Ready=False BuildFailed", func(u *unstructured.Unstructured) bool {
			return conditionOf(u, "Ready")["reason"] == "BuildFailed" && u.GetGeneration() == gen
		})
		u := h.settled(t)
		fluxFixture(t, record, version, "build-failed", "c: a spec change to a path whose manifest is not YAML; kustomize build failed", u)
		failing(t, u, gen, "BuildFailed")
		// The health check of b is no longer the latest word: Healthy stays
		// as b left it, at b's generation (the build failed before any check).
		if c := conditionOf(u, "Healthy"); c != nil {
			t.Logf("Healthy after a build failure: %v/%v at generation %v", c["status"], c["reason"], c["observedGeneration"])
		}
		if v := sumFamily(e.scrape(), "kube_convergence_rollouts_total", map[string]string{"kind": fluxKind, "outcome": "superseded"}); v != 1 {
			t.Errorf("superseded episodes = %v, want 1 (b's, by c's spec write)", v)
		}
	})

	run("d spec change and new revision", func(t *testing.T) {
		from := h.len()
		changed, gen := spec(t, "./good")
		ready := h.waitFor(t, from, time.Minute, "Ready=True again", func(u *unstructured.Unstructured) bool {
			return conditionOf(u, "Ready")["status"] == "True" && observedGen(u) == gen
		})
		u := h.settled(t)
		wantCondition(t, u, "Ready", "True", "ReconciliationSucceeded", gen)
		wantCondition(t, u, "Healthy", "True", "Succeeded", gen)
		fluxFixture(t, record, version, "recovered", "d: a spec change back to a path that applies and passes its health check, after b and c failed", u)
		eventually(t, 15*time.Second, "the change converged", func() (bool, string) {
			n := readyObservations(e.scrape(), "other")
			return n == 1, fmt.Sprint(n)
		})
		mfs := e.scrape()
		sum, _ := histogram(mfs, "kube_convergence_rollout_duration_seconds", map[string]string{"kind": fluxKind, "namespace": fluxNS, "stage": "ready", "change": "other"})
		if want := ready.at.Sub(changed).Seconds(); !within(sum, want, 0.5) {
			t.Errorf("ready stage of the change: %.3f s, want %.3f s (+-0.5 s, the test's watch)", sum, want)
		} else {
			t.Logf("ready stage of the change: %.3f s measured, %.3f s by the test's watch", sum, want)
		}
		if s := stallsOf(mfs, "app"); len(s) > 0 {
			t.Errorf("stalled after converging: %v", s)
		}
		converged := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"kind": fluxKind})

		// A new source revision is not a spec change: the generation stays,
		// the controller applies it (three replicas) and says so in
		// lastAppliedRevision only. The exporter, which judges generations,
		// opens no episode and reports no stall.
		from = h.len()
		art2, err := f.PublishGitRepository(ctx, fluxNS, "repo", fluxSource(3))
		if err != nil {
			t.Fatal(err)
		}
		published := time.Now()
		unknown := false
		applied := h.waitFor(t, from, time.Minute, "the new revision applied", func(u *unstructured.Unstructured) bool {
			unknown = unknown || conditionOf(u, "Ready")["status"] == "Unknown"
			rev, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
			return rev == art2.Revision && conditionOf(u, "Ready")["status"] == "True"
		})
		t.Logf("new revision applied %v after it was published; Ready went Unknown on the way: %v", applied.at.Sub(published).Round(time.Millisecond), unknown)
		u = h.settled(t)
		if u.GetGeneration() != gen || observedGen(u) != gen {
			t.Errorf("generation %d, observedGeneration %d after a new revision; want both %d", u.GetGeneration(), observedGen(u), gen)
		}
		wantStatusString(t, u, "lastAttemptedRevision", art2.Revision)
		wantCondition(t, u, "Ready", "True", "ReconciliationSucceeded", gen)
		fluxFixture(t, record, version, "new-revision", "d: a new source revision (the Deployment scaled to 3) applied without a spec change", u)
		dep, err := client.AppsV1().Deployments(fluxNS).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := dep.Spec.Replicas; r == nil || *r != 3 {
			t.Errorf("Deployment web replicas = %v, want 3 from the new revision", r)
		}
		mfs = e.scrape()
		if v := sumFamily(mfs, "kube_convergence_rollouts_total", map[string]string{"kind": fluxKind}); v != converged {
			t.Errorf("rollouts_total went from %v to %v on a new revision without a spec change", converged, v)
		}
		if s := stallsOf(mfs, "app"); len(s) > 0 {
			t.Errorf("stalled on a new revision: %v", s)
		}
	})

	// The controller's own /metrics, which Prometheus scrapes through
	// f.MetricsTarget(): controller-runtime's reconcile and workqueue
	// families for the kustomization controller.
	q := `workqueue_adds_total{job="kustomize-controller",name="kustomization"} > 0 and on() up{job="kustomize-controller"} == 1`
	if _, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) == 1 }, 10*time.Second); err != nil {
		t.Errorf("Prometheus scraping f.MetricsTarget(): %v", err)
	}

	// Every reconcile ends in a RequeueAfter (the interval on success, the
	// retry interval on failure), which client-go's delaying queue counts as
	// a retry: retries equal adds minus the adds of watch events.
	mfs := controllerMetrics(f.MetricsAddr())
	for _, m := range []string{"controller_runtime_reconcile_total", "workqueue_adds_total", "workqueue_retries_total"} {
		match := map[string]string{"controller": "kustomization"}
		if strings.HasPrefix(m, "workqueue_") {
			match = map[string]string{"name": "kustomization"}
		}
		if mfs[m] == nil {
			t.Errorf("%s missing from kustomize-controller's /metrics", m)
		}
		t.Logf("kustomize-controller %s %v = %v", m, match, sumFamily(mfs, m, match))
	}
	for _, r := range []string{"success", "error", "requeue", "requeue_after"} {
		t.Logf("kustomize-controller controller_runtime_reconcile_total{result=%q} = %v", r,
			sumFamily(mfs, "controller_runtime_reconcile_total", map[string]string{"controller": "kustomization", "result": r}))
	}
}

// fluxVersion is the kustomize-controller version tools/flux pins.
func fluxVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "tools", "flux", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/fluxcd/kustomize-controller (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no kustomize-controller version in tools/flux/go.mod")
	}
	return string(m[1])
}

// seenObject is one state of an object as the test's watch received it.
type seenObject struct {
	at  time.Time
	obj *unstructured.Unstructured
}

// objectHistory is every state of one object the test's watch received.
type objectHistory struct {
	mu     sync.Mutex
	events []seenObject
}

// watchObject records every added or modified state of name until ctx ends,
// watching again (from the current state) if the API server closes the watch.
func watchObject(ctx context.Context, t *testing.T, ri dynamic.ResourceInterface, name string) *objectHistory {
	h := &objectHistory{}
	w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					h.mu.Lock()
					h.events = append(h.events, seenObject{at: time.Now(), obj: u})
					h.mu.Unlock()
				}
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name}); err != nil {
				return
			}
		}
	}()
	return h
}

func (h *objectHistory) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// waitFor returns the first state at index from or later for which cond
// holds, or fails the test after timeout with the last state seen.
func (h *objectHistory) waitFor(t *testing.T, from int, timeout time.Duration, what string, cond func(*unstructured.Unstructured) bool) seenObject {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h.mu.Lock()
		events := h.events[min(from, len(h.events)):]
		h.mu.Unlock()
		for _, ev := range events {
			if cond(ev.obj) {
				return ev
			}
		}
		from += len(events)
		if time.Now().After(deadline) {
			var last any
			if len(events) > 0 {
				last = events[len(events)-1].obj.Object["status"]
			}
			t.Fatalf("timed out after %v waiting for %s; last status: %v", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled returns the newest state once no other arrived for a second:
// kustomize-controller writes a result in more than one request (its
// conditions, then the rest of the status such as history), and a watch
// sees each.
func (h *objectHistory) settled(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	const quiet = time.Second
	deadline := time.Now().Add(15 * time.Second)
	for {
		h.mu.Lock()
		last := h.events[len(h.events)-1]
		h.mu.Unlock()
		if time.Since(last.at) >= quiet {
			return last.obj
		}
		if time.Now().After(deadline) {
			t.Fatalf("the object did not settle for %v within 15 s", quiet)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// poll is eventually without failing: it reports whether cond held within
// timeout, so one wrong exporter answer does not hide the facts after it.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func conditionOf(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

func observedGen(u *unstructured.Unstructured) int64 {
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return og
}

func wantCondition(t *testing.T, u *unstructured.Unstructured, typ, status, reason string, gen int64) {
	t.Helper()
	c := conditionOf(u, typ)
	og, _ := c["observedGeneration"].(int64)
	if c == nil || c["status"] != status || c["reason"] != reason || og != gen {
		t.Errorf("condition %s = %v; want status %s, reason %s, observedGeneration %d", typ, c, status, reason, gen)
	}
}

func wantStatusString(t *testing.T, u *unstructured.Unstructured, field, want string) {
	t.Helper()
	if got, _, _ := unstructured.NestedString(u.Object, "status", field); got != want {
		t.Errorf("status.%s = %q, want %q", field, got, want)
	}
}

// stallsOf lists the exporter's stalls of the Kustomization name as
// "stage/reason".
func stallsOf(mfs map[string]*dto.MetricFamily, name string) []string {
	var out []string
	if mf := mfs["kube_convergence_rollout_stalled_seconds"]; mf != nil {
		for _, m := range mf.Metric {
			if labelsMatch(m, map[string]string{"kind": fluxKind, "namespace": fluxNS, "name": name}) {
				l := map[string]string{}
				for _, p := range m.Label {
					l[p.GetName()] = p.GetValue()
				}
				out = append(out, l["stage"]+"/"+l["reason"])
			}
		}
	}
	return out
}

func readyObservations(mfs map[string]*dto.MetricFamily, change string) uint64 {
	_, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", map[string]string{"kind": fluxKind, "namespace": fluxNS, "stage": "ready", "change": change})
	return n
}

// controllerMetrics reads the controller's /metrics.
func controllerMetrics(addr string) map[string]*dto.MetricFamily {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil
	}
	return mfs
}

// Fixture normalisation: what varies from run to run (times, durations in
// messages, identities) is replaced, so that a re-record shows only real
// changes of shape or value.
var (
	fixedTime     = "2026-01-01T00:00:00Z"
	durationInMsg = regexp.MustCompile(`\b(in|after) [0-9][0-9.]*(ns|µs|ms|s|m)\b`)
	// The controller's temp dir of one reconcile, named in build errors.
	tmpInMsg = regexp.MustCompile(`/\S*/kustomization-[0-9]+/`)
)

// fluxFixture writes (record) or checks the fixture of one case. The check
// compares shapes: the set of field paths, and every condition's type,
// status, reason and observedGeneration relative to the generation.
func fluxFixture(t *testing.T, record bool, version, name, what string, u *unstructured.Unstructured) {
	t.Helper()
	obj := normalise(u)
	path := filepath.Join(fluxFixtures, "kustomization-"+name+".yaml")
	if record {
		body, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		header := fmt.Sprintf("# Recorded from kustomize-controller %s in the sandbox by e2e %s, %s.\n"+
			"# Case %s.\n"+
			"# Normalised: times are %s, durations are <d>, the controller's temp dir is <tmp>; uid, resourceVersion, creationTimestamp and managedFields are dropped.\n"+
			"# Re-record: %s=1 go test -count=1 -run TestFluxKustomization ./e2e/ (docs/flux.md).\n",
			version, t.Name(), time.Now().UTC().Format("2006-01-02"), what, fixedTime, recordEnv)
		if err := os.MkdirAll(fluxFixtures, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append([]byte(header), body...), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", path)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("fixture %s: %v (record it: %s=1)", path, err, recordEnv)
	}
	if !strings.Contains(firstLine(b), "kustomize-controller "+version+" ") {
		t.Errorf("fixture %s was not recorded from kustomize-controller %s: %q (re-record: %s=1)", path, version, firstLine(b), recordEnv)
	}
	var fixture map[string]any
	if err := yaml.Unmarshal(b, &fixture); err != nil {
		t.Fatalf("fixture %s: %v", path, err)
	}
	if got, want := shape(obj), shape(fixture); !slices.Equal(got, want) {
		t.Errorf("fixture %s is stale (re-record: %s=1):\n-fixture +live\n%s", path, recordEnv, diffLines(want, got))
	}
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

func normalise(u *unstructured.Unstructured) map[string]any {
	obj := u.DeepCopy().Object
	meta, _ := obj["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "managedFields", "creationTimestamp"} {
		delete(meta, k)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if _, err := time.Parse(time.RFC3339, x); err == nil {
				return fixedTime
			}
			return tmpInMsg.ReplaceAllString(durationInMsg.ReplaceAllString(x, "$1 <d>"), "<tmp>/")
		}
		return v
	}
	if st, ok := obj["status"].(map[string]any); ok {
		walk(st)
		// A history entry's duration varies run to run.
		if hist, ok := st["history"].([]any); ok {
			for _, e := range hist {
				if m, ok := e.(map[string]any); ok {
					if _, ok := m["lastReconciledDuration"]; ok {
						m["lastReconciledDuration"] = "<d>"
					}
				}
			}
		}
	}
	return obj
}

// shape lists an object's field paths (list items by index, conditions by
// type) and each condition's status, reason and whether its
// observedGeneration equals the object's generation.
func shape(obj map[string]any) []string {
	meta, _ := obj["metadata"].(map[string]any)
	gen := fmt.Sprint(meta["generation"])
	set := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(prefix+"."+k, e)
			}
		case []any:
			for i, e := range x {
				p := fmt.Sprintf("%s[%d]", prefix, i)
				if m, ok := e.(map[string]any); ok && prefix == ".status.conditions" {
					p = fmt.Sprintf("%s[%v]", prefix, m["type"])
					set[fmt.Sprintf("%s %v/%v observedGeneration==generation:%v", p, m["status"], m["reason"], fmt.Sprint(m["observedGeneration"]) == gen)] = true
				}
				walk(p, e)
			}
		default:
			set[prefix] = true
		}
	}
	walk("", obj)
	st, _ := obj["status"].(map[string]any)
	set[fmt.Sprintf("status.observedGeneration==generation:%v", fmt.Sprint(st["observedGeneration"]) == gen)] = true
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func diffLines(want, got []string) string {
	var b strings.Builder
	w := bufio.NewWriter(&b)
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(w, "-%s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(w, "+%s\n", l)
		}
	}
	_ = w.Flush()
	return b.String()
}
