package calibration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/internal/testctl"
)

const (
	healthyNS = "healthy"
	outageNS  = "outage"
	quotaNS   = "outage-quota"
	// The exporter's stall threshold: short, so that outages stall within
	// the suite, and harsh for the healthy cluster (nothing healthy may
	// look stuck past it).
	stallThreshold = 90 * time.Second
	// Prometheus scrapes and evaluates every 15 s, as the clusters do.
	interval = 15 * time.Second
)

// The operators' CRDs, read from their modules at the versions the
// presets and fixtures name.
var operatorCRDs = []struct{ module, version, path string }{
	{"github.com/cert-manager/cert-manager", "v1.21.1", "deploy/crds/cert-manager.io_certificates.yaml"},
	{"github.com/cert-manager/cert-manager", "v1.21.1", "deploy/crds/cert-manager.io_issuers.yaml"},
	{"github.com/cert-manager/cert-manager", "v1.21.1", "deploy/crds/cert-manager.io_clusterissuers.yaml"},
	{"github.com/kedacore/keda/v2", "v2.20.2", "config/crd/bases/keda.sh_scaledobjects.yaml"},
	{"github.com/fluxcd/helm-controller", "v1.6.3", "config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml"},
}

const exporterConfig = `resources:
  - {group: cert-manager.io, resource: certificates}
  - {group: cert-manager.io, resource: issuers}
  - {group: cert-manager.io, resource: clusterissuers}
  - {group: keda.sh, resource: scaledobjects}
  - {group: helm.toolkit.fluxcd.io, resource: helmreleases}
  - {group: source.toolkit.fluxcd.io, resource: gitrepositories}
  - {group: kustomize.toolkit.fluxcd.io, resource: kustomizations}
`

// world is what the suite runs against.
type world struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	dyn    dynamic.Interface
	gvr    map[string]schema.GroupVersionResource // by fixture file
	ctl    *testctl.Controller
}

// testController is the queue name of the test's client-go controller;
// its WorkqueueStuck threshold is set the way a user sets one (a rule file
// of their own recording name:workqueue_stuck_threshold_seconds:override).
const (
	testController = "kce-calibration-testctl"
	holdThreshold  = 60 * time.Second
)

func duration(t *testing.T) time.Duration {
	d := 3 * time.Minute
	if v := os.Getenv("KCE_CALIBRATION_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("KCE_CALIBRATION_DURATION: %v", err)
		}
	}
	return d
}

// TestCalibration: the healthy cluster, then the outages, on one
// Prometheus (see the package comment).
func TestCalibration(t *testing.T) {
	run := duration(t)
	soak := os.Getenv("KCE_SOAK") != ""
	ctx, cancel := context.WithTimeout(context.Background(), run+35*time.Minute)
	defer cancel()
	w := &world{t: t, ctx: ctx, gvr: map[string]schema.GroupVersionResource{}}
	var err error
	if w.client, err = kubernetes.NewForConfig(sb.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	if w.dyn, err = dynamic.NewForConfig(sb.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := sb.CreateNode(ctx, fmt.Sprintf("kwok-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{healthyNS, outageNS, quotaNS} {
		if _, err := w.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range operatorCRDs {
		gvr := applyCRD(ctx, t, w.dyn, moduleFile(t, c.module, c.version, c.path))
		w.gvr[gvr.Resource] = gvr
	}
	w.healthyObjects()
	// The test controller, client-go's real workqueue and recorder; its
	// rate limiter caps the back-off at 10 s (the default's 1000 s would
	// make an object failing for good take 22 minutes to page).
	w.ctl, err = testctl.Start(ctx, sb.AdminConfig(), testctl.Options{
		Name: testController, Namespace: healthyNS,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.ctl.Stop() })
	for i := range 10 {
		cm := testctl.ConfigMap(healthyNS, fmt.Sprintf("managed-%d", i), testController)
		if _, err := w.client.CoreV1().ConfigMaps(healthyNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg := filepath.Join(t.TempDir(), "kce.yaml")
	if err := os.WriteFile(cfg, []byte(exporterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--stall.threshold="+stallThreshold.String())
	e.waitReady(90 * time.Second)
	prom := startPrometheus(ctx, t, e, w.ctl)
	firstScrape := waitFirstScrape(ctx, t, prom)
	t.Logf("first scrape of the exporter at %s", firstScrape.Format(time.RFC3339))

	// The healthy run: churn until the end, one exporter restart.
	checkFrom := firstScrape.Add(2 * time.Minute)
	restartAt := firstScrape.Add(max(run/2, 2*time.Minute+15*time.Second))
	end := firstScrape.Add(run)
	churnCtx, stopChurn := context.WithDeadline(ctx, end)
	var wg sync.WaitGroup
	w.churn(churnCtx, &wg)
	sleepUntil(ctx, restartAt)
	restartBetweenScrapes(ctx, t, prom, e)
	wg.Wait()
	stopChurn()
	// Let the last writes converge before the end of the checked range.
	settle := time.Now().Add(45 * time.Second)
	sleepUntil(ctx, settle)
	healthyEnd := time.Now()

	t.Run("healthy cluster pages nobody", func(t *testing.T) {
		checkSilent(ctx, t, prom, checkFrom, healthyEnd)
		// After the restart, no stalled series for a healthy object.
		v, err := prom.Query(ctx, `kube_convergence_rollout_stalled_seconds or kube_convergence_pod_stalled_seconds`)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > 0 {
			t.Errorf("stalled series on the healthy cluster after the restart:\n%s", v)
		}
		code, body, err := e.get("/metrics")
		if err != nil || code != 200 {
			t.Fatalf("scrape: %d %v", code, err)
		}
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "kube_convergence_rollout_stalled_seconds{") {
				t.Errorf("exporter exposes a stalled rollout of the healthy cluster: %s", l)
			}
		}
		if n, err := prom.RuleEvaluationFailures(ctx); err != nil || n > 0 {
			t.Errorf("rule evaluation failures: %v %v", n, err)
		}
	})

	t.Run("real outages page", func(t *testing.T) {
		w.outages(t, prom, soak)
	})
}

func sleepUntil(ctx context.Context, at time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(at)):
	}
}

func startPrometheus(ctx context.Context, t *testing.T, e *exporterProc, ctl *testctl.Controller) *sandbox.Prometheus {
	t.Helper()
	rules, err := filepath.Glob("../../rules/*.rules.yml")
	if err != nil || len(rules) < 4 {
		t.Fatalf("rule files: %v %v", rules, err)
	}
	// The user's own thresholds, beside the bundled files.
	mine := filepath.Join(t.TempDir(), "my-thresholds.rules.yml")
	if err := os.WriteFile(mine, fmt.Appendf(nil, `groups:
  - name: my-workqueue-thresholds
    rules:
      - record: name:workqueue_stuck_threshold_seconds:override
        expr: label_replace(vector(%v), "name", %q, "", "")
`, holdThreshold.Seconds(), testController), 0o600); err != nil {
		t.Fatal(err)
	}
	rules = append(rules, mine)
	prom, err := sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{
		ScrapeInterval: interval, EvaluationInterval: interval,
		Targets: []sandbox.ScrapeTarget{
			{
				Job: "kube-convergence-exporter", Addr: e.addr,
				Extra: map[string]any{"scrape_native_histograms": true, "always_scrape_classic_histograms": true},
			},
			{
				Job: "kube-controller-manager", Addr: sb.ControllerManagerAddr(), Scheme: "https",
				Extra: map[string]any{
					"authorization": map[string]any{"credentials": sb.AdminConfig().BearerToken},
					"tls_config":    map[string]any{"insecure_skip_verify": true},
				},
			},
			flux.MetricsTarget(),
			{Job: testController, Addr: ctl.MetricsAddr()},
		},
		RuleFiles: rules,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Stop() })
	return prom
}

// waitFirstScrape returns the time of the exporter's first scrape.
func waitFirstScrape(ctx context.Context, t *testing.T, prom *sandbox.Prometheus) time.Time {
	t.Helper()
	v, err := prom.WaitFor(ctx, `timestamp(up{job="kube-convergence-exporter"} == 1)`, func(v model.Vector) bool { return len(v) == 1 }, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(int64(v[0].Value), 0)
}

// restartBetweenScrapes restarts the exporter right after a scrape, so
// that the next one finds it up: a restart is part of a healthy life, and
// the alerts must not fire for it, but a scrape that fails is a real
// failure that they should see.
func restartBetweenScrapes(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, e *exporterProc) {
	t.Helper()
	last := func() time.Time {
		v, err := prom.Query(ctx, `timestamp(up{job="kube-convergence-exporter"})`)
		if err != nil || len(v) != 1 {
			return time.Time{}
		}
		return time.Unix(int64(v[0].Value), 0)
	}
	before := last()
	eventually(t, 2*interval, "a fresh scrape", func() (bool, string) { return last().After(before), "" })
	began := time.Now()
	e.stop()
	e.start()
	e.waitReady(60 * time.Second)
	t.Logf("exporter restarted and ready in %v", time.Since(began).Round(time.Millisecond))
}

// churn starts the healthy cluster's writes, each until ctx ends.
func (w *world) churn(ctx context.Context, wg *sync.WaitGroup) {
	every := func(d time.Duration, f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(d)
			defer tick.Stop()
			for i := 0; ; i++ {
				f(i)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	deps := w.client.AppsV1().Deployments(healthyNS)
	logErr := func(what string, err error) {
		if err != nil && ctx.Err() == nil {
			w.t.Logf("churn: %s: %v", what, err)
		}
	}
	// An autoscaler writing /scale every 15 s (HPA's sync period).
	every(15*time.Second, func(i int) {
		s, err := deps.GetScale(ctx, "web-01", metav1.GetOptions{})
		if err != nil {
			logErr("get scale", err)
			return
		}
		s.Spec.Replicas = 2 + int32(i%2)
		_, err = deps.UpdateScale(ctx, "web-01", s, metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler"})
		logErr("scale", err)
	})
	// Rolling updates: a template change every 20 s, round robin, the
	// 100-replica Deployment first.
	every(20*time.Second, func(i int) {
		name := fmt.Sprintf("web-%02d", i%20)
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kce.test/revision":"%d"}}}}}`, i+1)
		_, err := deps.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "ci-deploy"})
		logErr("rollout "+name, err)
	})
	// GitOps annotations (bump a Deployment's generation, no rollout).
	every(10*time.Second, func(i int) {
		name := fmt.Sprintf("web-%02d", 1+i%19)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"deploy.kce.test/synced-at":"%d"}}}`, time.Now().UnixNano())
		_, err := deps.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "argocd-controller"})
		logErr("annotate "+name, err)
	})
	// Jobs, besides the CronJob's.
	every(20*time.Second, func(i int) {
		_, err := w.client.BatchV1().Jobs(healthyNS).Create(ctx, job(fmt.Sprintf("batch-%d", i)), metav1.CreateOptions{})
		logErr("job", err)
	})
	// The test controller's objects change; now and then a sync fails
	// twice and recovers (a conflict, a webhook timeout).
	every(5*time.Second, func(i int) {
		name := fmt.Sprintf("managed-%d", i%10)
		if i%12 == 5 {
			w.ctl.FailTimes(name, 2)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := w.client.CoreV1().ConfigMaps(healthyNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data["v"] = fmt.Sprint(i)
			_, err = w.client.CoreV1().ConfigMaps(healthyNS).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl"})
			return err
		})
		logErr("configmap "+name, err)
	})
	// Operators at work: a spec write to a custom resource, and its
	// operator's status for the new generation a moment later.
	every(15*time.Second, func(i int) {
		w.operatorWrite(ctx, i, logErr)
	})
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](60),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "run", Image: "registry.invalid/batch:1"}},
					NodeSelector:  map[string]string{"type": "kwok"},
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
}

// healthyObjects makes the healthy cluster: 20 Deployments (one of 100
// replicas) with Services, a CronJob every minute, two Kustomizations the
// real kustomize-controller reconciles every 30 s, and 100 custom
// resources of the presets' operators, written with the status shapes of
// their sources (testdata/operators).
func (w *world) healthyObjects() {
	t, ctx := w.t, w.ctx
	for i := range 20 {
		replicas := int32(2)
		if i == 0 {
			replicas = 100
		}
		name := fmt.Sprintf("web-%02d", i)
		d := demo.Deployment(healthyNS, name, replicas, nil)
		if _, err := w.client.AppsV1().Deployments(healthyNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if _, err := w.client.CoreV1().Services(healthyNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *", SuccessfulJobsHistoryLimit: ptr.To[int32](2),
			JobTemplate: batchv1.JobTemplateSpec{Spec: job("").Spec},
		},
	}
	if _, err := w.client.BatchV1().CronJobs(healthyNS).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Flux: a source, two Kustomizations from it.
	if _, err := flux.PublishGitRepository(ctx, healthyNS, "apps", fluxTree()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"apps", "infra"} {
		w.kustomization(healthyNS, n, "./good")
	}
	// 100 custom resources, ready, as their operators leave them.
	crs := []struct {
		file, resource string
		namespaced     bool
		n              int
	}{
		{"cert-manager/certificate.yaml", "certificates", true, 40},
		{"cert-manager/clusterissuer.yaml", "issuers", true, 10},
		{"cert-manager/clusterissuer.yaml", "clusterissuers", false, 5},
		{"keda/scaledobject.yaml", "scaledobjects", true, 15},
		{"flux/helmrelease.yaml", "helmreleases", true, 15},
	}
	for _, c := range crs {
		f := fixture(t, c.file, 0)
		for i := range c.n {
			ns := ""
			if c.namespaced {
				ns = healthyNS
			}
			name := fmt.Sprintf("%s-%02d", strings.TrimSuffix(c.resource, "s"), i)
			obj := asNew(f, ns, name)
			if c.resource == "issuers" {
				obj.SetKind("Issuer")
			}
			w.createWithStatus(c.resource, obj, f)
		}
	}
	for i := range 13 {
		if _, err := flux.PublishGitRepository(ctx, healthyNS, fmt.Sprintf("source-%02d", i), map[string]string{"README.md": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Everything converged before the exporter starts: its initial list
	// finds settled objects (an exporter restart is checked later).
	eventually(t, 3*time.Minute, "the healthy Deployments rolled out", func() (bool, string) {
		list, err := w.client.AppsV1().Deployments(healthyNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range list.Items {
			d := &list.Items[i]
			if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas != *d.Spec.Replicas {
				return false, d.Name
			}
		}
		return len(list.Items) >= 20, fmt.Sprint(len(list.Items), " Deployments")
	})
	eventually(t, 2*time.Minute, "the Kustomizations ready", func() (bool, string) {
		for _, n := range []string{"apps", "infra"} {
			u, err := w.dyn.Resource(sandbox.KustomizationResource).Namespace(healthyNS).Get(ctx, n, metav1.GetOptions{})
			if err != nil || !conditionTrue(u, "Ready") {
				return false, n
			}
		}
		return true, ""
	})
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// fluxTree is the source the Kustomizations apply: a Deployment that gets
// ready (./good), one that never does (./unready: no node matches).
func fluxTree() map[string]string {
	deployment := func(name, extra string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:%[2]s
      tolerations: [{operator: Exists}]
      containers:
      - {name: app, image: registry.invalid/app:1}
`, name, extra)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\n"
	return map[string]string{
		"good/kustomization.yaml":    k,
		"good/deployment.yaml":       deployment("flux-app", "\n      nodeSelector: {type: kwok}"),
		"unready/kustomization.yaml": k,
		"unready/deployment.yaml":    deployment("flux-unready", "\n      nodeSelector: {kce.test/no-such-node: \"true\"}"),
	}
}

// kustomization creates a Kustomization of ./path from the GitRepository
// apps of namespace ns, applied into ns, reconciled every 30 s with a
// health check (wait).
func (w *world) kustomization(ns, name, path string) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"interval": "30s", "timeout": "30s", "retryInterval": "30s",
			"path": path, "prune": true, "wait": true, "targetNamespace": ns,
			"nameSuffix": "-" + name,
			"sourceRef":  map[string]any{"kind": "GitRepository", "name": "apps", "namespace": healthyNS},
		},
	}}
	if _, err := w.dyn.Resource(sandbox.KustomizationResource).Namespace(ns).Create(w.ctx, obj, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// createWithStatus creates obj and writes the fixture's status for its
// generation, as its operator would.
func (w *world) createWithStatus(resource string, obj, f *unstructured.Unstructured) {
	ri := w.resource(resource, obj.GetNamespace())
	u, err := ri.Create(w.ctx, obj, metav1.CreateOptions{FieldManager: "kubectl"})
	if err != nil {
		w.t.Fatalf("%s %s: %v", resource, obj.GetName(), err)
	}
	u.Object["status"] = statusAt(f, u.GetGeneration())
	if _, err := ri.UpdateStatus(w.ctx, u, metav1.UpdateOptions{FieldManager: operatorOf(resource)}); err != nil {
		w.t.Fatalf("%s %s status: %v", resource, obj.GetName(), err)
	}
}

func operatorOf(resource string) string {
	switch resource {
	case "scaledobjects":
		return "keda"
	case "helmreleases":
		return "helm-controller"
	}
	return "cert-manager-certificates-readiness"
}

func (w *world) resource(resource, ns string) dynamic.ResourceInterface {
	r := w.dyn.Resource(w.gvr[resource])
	if ns == "" {
		return r
	}
	return r.Namespace(ns)
}

// operatorWrite is one custom-resource spec write, and its operator's
// status for the new generation a second later.
func (w *world) operatorWrite(ctx context.Context, i int, logErr func(string, error)) {
	type target struct{ file, resource, name, patch string }
	targets := []target{
		{"cert-manager/certificate.yaml", "certificates", fmt.Sprintf("certificate-%02d", i%40), fmt.Sprintf(`{"spec":{"dnsNames":["www%d.example.com"]}}`, i)},
		{"flux/helmrelease.yaml", "helmreleases", fmt.Sprintf("helmrelease-%02d", i%15), fmt.Sprintf(`{"spec":{"values":{"replicaCount":%d}}}`, 1+i%3)},
		{"keda/scaledobject.yaml", "scaledobjects", fmt.Sprintf("scaledobject-%02d", i%15), fmt.Sprintf(`{"spec":{"maxReplicaCount":%d}}`, 10+i%5)},
	}
	tg := targets[i%len(targets)]
	ri := w.resource(tg.resource, healthyNS)
	u, err := ri.Patch(ctx, tg.name, types.MergePatchType, []byte(tg.patch), metav1.PatchOptions{FieldManager: "kubectl"})
	if err != nil {
		logErr("spec "+tg.name, err)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Second):
	}
	u.Object["status"] = statusAt(fixture(w.t, tg.file, 0), u.GetGeneration())
	_, err = ri.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: operatorOf(tg.resource)})
	logErr("status "+tg.name, err)
}

// alertRule is one alerting rule of the bundled files.
type alertRule struct{ file, name, expr string }

func bundledAlerts(t *testing.T) []alertRule {
	t.Helper()
	files, err := filepath.Glob("../../rules/*.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					out = append(out, alertRule{filepath.Base(f), r.Alert, r.Expr})
				}
			}
		}
	}
	return out
}

// checkSilent queries every bundled alert's expression as a range over
// [from, to] (so `for` cannot hide a moment it held) and ALERTS, pending
// included: all must be empty.
func checkSilent(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, from, to time.Time) {
	t.Helper()
	rules := bundledAlerts(t)
	if len(rules) < 20 {
		t.Fatalf("only %d alerting rules found", len(rules))
	}
	for _, r := range rules {
		m, err := prom.QueryRange(ctx, r.expr, from, to, interval)
		if err != nil {
			t.Errorf("%s %s: %v", r.file, r.name, err)
			continue
		}
		for _, s := range m {
			t.Errorf("%s: %s was true on the healthy cluster for %s at %d of %d steps (first %s)",
				r.file, r.name, s.Metric, len(s.Values), int(to.Sub(from)/interval)+1, s.Values[0].Timestamp.Time().Format(time.TimeOnly))
		}
	}
	m, err := prom.QueryRange(ctx, "ALERTS", from, to, interval)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m {
		t.Errorf("ALERTS on the healthy cluster: %s", s.Metric)
	}
	t.Logf("%d alerting rules queried over %v (%s to %s): all empty unless reported above", len(rules), to.Sub(from).Round(time.Second), from.Format(time.TimeOnly), to.Format(time.TimeOnly))
}

// exprOf is the bundled expression of alert name.
func exprOf(t *testing.T, name string) string {
	t.Helper()
	i := slices.IndexFunc(bundledAlerts(t), func(r alertRule) bool { return r.name == name })
	if i < 0 {
		t.Fatalf("no bundled alert %s", name)
	}
	return bundledAlerts(t)[i].expr
}

// waitExpr waits until the bundled expression of alert returns a series
// whose labels include want, and returns how long it took.
func waitExpr(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, alert string, want map[string]string, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	expr := exprOf(t, alert)
	_, err := prom.WaitFor(ctx, expr, func(v model.Vector) bool {
		for _, s := range v {
			if labelsInclude(s.Metric, want) {
				return true
			}
		}
		return false
	}, timeout)
	if err != nil {
		t.Errorf("%s never true for %v within %v: %v", alert, want, timeout, err)
		return 0
	}
	d := time.Since(began)
	t.Logf("%s true for %v after %v", alert, want, d.Round(time.Second))
	return d
}

func labelsInclude(m model.Metric, want map[string]string) bool {
	for k, v := range want {
		if string(m[model.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

// neverExpr checks that alert's expression had no series matching want
// over [from, to].
func neverExpr(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, alert string, want map[string]string, from, to time.Time) {
	t.Helper()
	m, err := prom.QueryRange(ctx, exprOf(t, alert), from, to, interval)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m {
		if labelsInclude(s.Metric, want) {
			t.Errorf("%s was true for %s", alert, s.Metric)
		}
	}
}

// outages injects each real outage and waits for its alert's expression.
func (w *world) outages(t *testing.T, prom *sandbox.Prometheus, soak bool) {
	ctx := w.ctx
	began := time.Now()
	// A Kustomization whose health check fails: the real
	// kustomize-controller applies a Deployment that never schedules.
	w.kustomization(outageNS, "unhealthy", "./unready")
	// A Deployment a ResourceQuota blocks.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	if _, err := w.client.CoreV1().ResourceQuotas(quotaNS).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the quota's status", func() (bool, string) {
		q, err := w.client.CoreV1().ResourceQuotas(quotaNS).Get(ctx, "pods", metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) > 0, ""
	})
	if _, err := w.client.AppsV1().Deployments(quotaNS).Create(ctx, demo.Deployment(quotaNS, "blocked", 3, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two writers fighting over one field of a Deployment, with
	// server-side apply and force, every 500 ms each.
	fightCtx, stopFight := context.WithCancel(ctx)
	defer stopFight()
	if _, err := w.client.AppsV1().Deployments(outageNS).Create(ctx, demo.Deployment(outageNS, "contested", 1, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, manager := range []string{"kce-fight-a", "kce-fight-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.fight(fightCtx, manager, fmt.Sprintf("owner-%d", i), 500*time.Millisecond)
		}()
	}
	defer wg.Wait()

	// The test controller: one object failing for good, one held in a
	// worker past its queue's threshold.
	for _, n := range []string{"broken", "slow"} {
		if _, err := w.client.CoreV1().ConfigMaps(healthyNS).Create(ctx, testctl.ConfigMap(healthyNS, n, testController), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.ctl.FailForGood("broken")
	w.ctl.Hold("slow", 3*holdThreshold)
	w.touch("slow")

	// The expressions that need no ten minutes.
	waitExpr(ctx, t, prom, "KubeConvergenceWorkqueueStuck", map[string]string{"job": testController, "name": testController}, holdThreshold+time.Minute)
	waitExpr(ctx, t, prom, "KubeConvergenceFieldOwnershipFlapping", map[string]string{"kind": "Deployment"}, 3*time.Minute)
	waitExpr(ctx, t, prom, "KubeConvergenceControllerHotLoop", map[string]string{"kind": "Deployment", "namespace": outageNS, "name": "contested"}, 4*time.Minute)
	stopFight()

	// The stalls, with their reasons, past the stall threshold: the
	// operand of KubeConvergenceRolloutStuck, never
	// KubeConvergenceObservedGenerationLag.
	stalled := func(kind, ns, name, stage string, reasons ...string) {
		_, err := prom.WaitFor(ctx, fmt.Sprintf(`kube_convergence_rollout_stalled_seconds{kind=%q, namespace=%q, name=%q}`, kind, ns, name), func(v model.Vector) bool {
			return len(v) == 1 && string(v[0].Metric["stage"]) == stage && slices.Contains(reasons, string(v[0].Metric["reason"]))
		}, stallThreshold+2*time.Minute)
		if err != nil {
			t.Errorf("%s %s/%s: not stalled before %s with reason %v: %v", kind, ns, name, stage, reasons, err)
		}
	}
	const kustomization = "Kustomization.kustomize.toolkit.fluxcd.io"
	stalled(kustomization, outageNS, "unhealthy", "ready", "condition_false", "stalled")
	stalled("Deployment", outageNS, "flux-unready-unhealthy", "available", "unschedulable")
	stalled("Deployment", quotaNS, "blocked", "updated", "replica_failure")
	neverExpr(ctx, t, prom, "KubeConvergenceObservedGenerationLag", map[string]string{"kind": kustomization}, began, time.Now())

	// ControllerRetrying's operand: the object failing, and for how long.
	if _, err := prom.WaitFor(ctx, fmt.Sprintf(`kube_convergence_controller_longest_failing_seconds{controller=%q, reason=%q, kind="ConfigMap"} > 60`, testController, testctl.ReasonSyncFailed),
		func(v model.Vector) bool { return len(v) == 1 }, 3*time.Minute); err != nil {
		t.Errorf("the object failing for good is not failing for a minute: %v", err)
	}
	if !soak {
		t.Logf("KubeConvergenceRolloutStuck (ten minutes without a stage) and KubeConvergenceControllerRetrying (15 minutes failing): make soak only")
		return
	}
	// make soak: the whole expressions. RolloutStuck: 10 minutes without
	// a stage past the stall threshold. ControllerRetrying: a run of
	// Warning Events longer than 900 s, from the first occurrence to the
	// last received; past the legacy recorder's burst of 25 its spam
	// filter writes one every 5 minutes, so the last one before a 900 s
	// run is written up to 5 minutes after it: about 20 minutes in all.
	for _, o := range []map[string]string{
		{"kind": kustomization, "namespace": outageNS, "name": "unhealthy"},
		{"kind": "Deployment", "namespace": quotaNS, "name": "blocked"},
	} {
		waitExpr(ctx, t, prom, "KubeConvergenceRolloutStuck", o, time.Until(began.Add(stallThreshold+12*time.Minute)))
	}
	waitExpr(ctx, t, prom, "KubeConvergenceControllerRetrying", map[string]string{"controller": testController, "reason": testctl.ReasonSyncFailed, "kind": "ConfigMap"},
		time.Until(began.Add(25*time.Minute)))
	neverExpr(ctx, t, prom, "KubeConvergenceObservedGenerationLag", map[string]string{"kind": kustomization}, began, time.Now())
}

// fight applies the annotation kce.test/owner=value to the Deployment
// outage/contested as manager, forcing, every d.
func (w *world) fight(ctx context.Context, manager, value string, d time.Duration) {
	patch := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"contested","annotations":{"kce.test/owner":%q}}}`, value)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		_, err := w.client.AppsV1().Deployments(outageNS).Patch(ctx, "contested", types.ApplyPatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)})
		if err != nil && ctx.Err() == nil {
			w.t.Logf("fight %s: %v", manager, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// touch changes ConfigMap name of the test controller, so that it syncs.
func (w *world) touch(name string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := w.client.CoreV1().ConfigMaps(healthyNS).Get(w.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["v"] = time.Now().Format(time.RFC3339Nano)
		_, err = w.client.CoreV1().ConfigMaps(healthyNS).Update(w.ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
}
