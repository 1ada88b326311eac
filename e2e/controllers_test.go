package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/internal/testctl"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// healthyChurn runs, in ns until ctx ends, what a healthy cluster's
// kube-controller-manager does all day: a CronJob every minute, a Job every
// 20 s (finished ones removed by the TTL controller after 30 s), a
// 100-replica Deployment created and rolled to a new image, and a Service
// whose 3-pod Deployment is scaled between 3 and 5 every 15 s
// (EndpointSlice churn). It returns once the 100 replicas are available
// and their rolling update has started; wait() returns when the
// background writers have stopped.
func healthyChurn(ctx context.Context, t *testing.T, ns string) (wait func()) {
	t.Helper()
	c := client
	delays := demo.Delays(podCreateDelay, podReadyDelay)
	jobTemplate := func() batchv1.JobSpec {
		tmpl := demo.PodTemplate("job", delays)
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return batchv1.JobSpec{Template: tmpl, TTLSecondsAfterFinished: ptr.To[int32](30), BackoffLimit: ptr.To[int32](0)}
	}
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: jobTemplate()},
			SuccessfulJobsHistoryLimit: ptr.To[int32](2)},
	}
	if _, err := c.BatchV1().CronJobs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{demo.Deployment(ns, "big", 100, delays), demo.Deployment(ns, "scaled", 3, delays)} {
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "scaled"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "100 replicas available", func() (bool, string) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 100, fmt.Sprintf("%+v", d.Status)
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/big:v1"
		_, err = c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("job-%d", i)}, Spec: jobTemplate()}
			if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("job %d: %v", i, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Second):
			}
		}
	})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(15 * time.Second):
			}
			n := int32(3 + 2*(i%2))
			scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
			if _, err := c.AppsV1().Deployments(ns).UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("scale: %v", err)
			}
		}
	})
	return wg.Wait
}

// kcmMetrics scrapes the sandbox's kube-controller-manager /metrics (HTTPS,
// self-signed, the admin token).
func kcmMetrics(ctx context.Context, t *testing.T) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+sb.ControllerManagerAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sb.AdminConfig().BearerToken)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the sandbox's self-signed KCM on loopback
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("KCM /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// queueCounters reads workqueue_retries_total and workqueue_adds_total
// per queue from an exposition.
func queueCounters(t *testing.T, text string) (retries, adds map[string]float64) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range mfs[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	return read("workqueue_retries_total"), read("workqueue_adds_total")
}

// TestRecordKCMWorkqueueSample scrapes the sandbox's kube-controller-manager
// before and after 5 minutes of healthyChurn and writes the workqueue
// families of the second scrape, with the first one's counters as a
// comment, to rules/testdata/kcm-workqueue.prom: the shape the promtool
// tests of the controller rules follow. Opt-in: KCE_RECORD=kcm go test
// -count=1 -p 1 -run TestRecordKCMWorkqueueSample ./e2e/
func TestRecordKCMWorkqueueSample(t *testing.T) {
	if os.Getenv("KCE_RECORD") != "kcm" {
		t.Skip("records the sandbox's KCM metrics: KCE_RECORD=kcm")
	}
	const churn = 5 * time.Minute
	ns := "kcm-sample"
	newNamespace(t, client, ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The test controller beside KCM, with client-go's default controller
	// rate limiter: one ConfigMap failing for good, one healthy.
	ctl, err := testctl.Start(ctx, sb.AdminConfig(), testctl.Options{Name: "kce-sample-testctl", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctl.Stop() }()
	ctl.FailForGood("doomed")
	createManaged(ctx, t, ns, "doomed", ctl.Name())
	createManaged(ctx, t, ns, "healthy", ctl.Name())
	before := kcmMetrics(ctx, t)
	start := time.Now()
	wait := healthyChurn(ctx, t, ns)
	select {
	case <-time.After(churn - time.Since(start)):
	case <-ctx.Done():
	}
	after := kcmMetrics(ctx, t)
	elapsed := time.Since(start)
	cancel()
	wait()
	r0, a0 := queueCounters(t, before)
	r1, a1 := queueCounters(t, after)
	var names []string
	for n := range r1 {
		names = append(names, n)
	}
	sort.Strings(names)
	var out strings.Builder
	fmt.Fprintf(&out, "# kube-controller-manager v1.37.2 (the sandbox: --endpointslice-updates-batch-period=%s), scraped %s\n", sliceBatchPeriod, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&out, "# after %s of e2e healthyChurn (a CronJob every minute, a Job every 20 s with a 30 s TTL,\n", elapsed.Round(time.Second))
	fmt.Fprintf(&out, "# a 100-replica rolling update, a 3-5 pod Deployment behind a Service scaled every 15 s);\n")
	fmt.Fprintf(&out, "# recorded by KCE_RECORD=kcm go test -run TestRecordKCMWorkqueueSample ./e2e/ (histogram buckets left out).\n")
	warnings, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	kcmWarnings := 0
	for i := range warnings.Items {
		if e := &warnings.Items[i]; e.DeprecatedSource.Component != ctl.Name() && e.ReportingController != ctl.Name() {
			kcmWarnings++
		}
	}
	fmt.Fprintf(&out, "# Warning Events in the namespace at the end, the test controller's aside: %d.\n", kcmWarnings)
	fmt.Fprintf(&out, "# Increase over the churn, per queue with adds: retries / adds (ratio).\n")
	for _, n := range names {
		dr, da := r1[n]-r0[n], a1[n]-a0[n]
		if da == 0 && dr == 0 {
			continue
		}
		ratio := "-"
		if da > 0 {
			ratio = fmt.Sprintf("%.2f", dr/da)
		}
		fmt.Fprintf(&out, "#   %-40s retries %6.0f adds %6.0f ratio %s\n", n, dr, da, ratio)
		t.Logf("%-40s retries %6.0f adds %6.0f ratio %s", n, dr, da, ratio)
	}
	sc := bufio.NewScanner(strings.NewReader(after))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Histogram buckets left out (about 1,100 lines): the rules read
		// the counters and gauges.
		if strings.Contains(line, "_bucket{") {
			continue
		}
		if strings.HasPrefix(line, "workqueue_") || strings.HasPrefix(line, "# HELP workqueue_") || strings.HasPrefix(line, "# TYPE workqueue_") {
			out.WriteString(line + "\n")
		}
	}
	path := filepath.Join("..", "rules", "testdata", "kcm-workqueue.prom")
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	st := ctl.Stats("doomed")
	var tc strings.Builder
	fmt.Fprintf(&tc, "# internal/testctl (client-go v0.37.2 workqueue, default controller rate limiter), scraped %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&tc, "# beside the KCM sample (kcm-workqueue.prom), same run: ConfigMap doomed failing every sync from the start\n")
	fmt.Fprintf(&tc, "# (%d failures, the last %s after the first), ConfigMap healthy synced once.\n",
		st.Failures, st.LastFailure.Sub(st.FirstFailure).Round(time.Millisecond))
	fmt.Fprintf(&tc, "# Recorded by KCE_RECORD=kcm go test -run TestRecordKCMWorkqueueSample ./e2e/ (histogram buckets left out).\n")
	text, err := ctl.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc = bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "workqueue_") && !strings.Contains(line, "_bucket{") {
			tc.WriteString(line + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join("..", "rules", "testdata", "testctl-workqueue.prom"), []byte(tc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// controllerRules writes the bundled controller rules into dir with the
// ControllerRetrying threshold shortened from 900 s to retryingAfter (the
// expression is otherwise the bundled one, which the function checks), and
// a rule file of the user's kind that sets the test controller's queue's
// WorkqueueStuck threshold (the override the bundled rules read). It
// returns the files and the two alerts' expressions as loaded.
func controllerRules(t *testing.T, dir string, retryingAfter time.Duration, queue string, stuckAfter time.Duration) (files []string, retrying, stuck string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "rules", "kube-convergence-controllers.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf slo.RuleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	for gi := range rf.Groups {
		for ri := range rf.Groups[gi].Rules {
			r := &rf.Groups[gi].Rules[ri]
			switch r.Alert {
			case "KubeConvergenceControllerRetrying":
				if !strings.HasSuffix(r.Expr, "> 900") || r.For != "" {
					t.Fatalf("ControllerRetrying: expr %q for %q: the bundled rule changed, update the test", r.Expr, r.For)
				}
				r.Expr = strings.TrimSuffix(r.Expr, "900") + fmt.Sprint(retryingAfter.Seconds())
				retrying = r.Expr
			case "KubeConvergenceWorkqueueStuck":
				stuck = r.Expr
			}
		}
	}
	if retrying == "" || stuck == "" {
		t.Fatal("the controller alerts are not in the bundled file")
	}
	y, err := rf.YAML("Bundled kube-convergence-controllers.rules.yml, ControllerRetrying after " + retryingAfter.String() + " (e2e/controllers_test.go).")
	if err != nil {
		t.Fatal(err)
	}
	files = []string{filepath.Join(dir, "kube-convergence-controllers.rules.yml"), filepath.Join(dir, "thresholds.rules.yml")}
	if err := os.WriteFile(files[0], y, 0o644); err != nil {
		t.Fatal(err)
	}
	override := fmt.Sprintf(`groups:
  - name: my-workqueue-thresholds
    rules:
      - record: name:workqueue_stuck_threshold_seconds:override
        expr: label_replace(vector(%v), "name", %q, "", "")
`, stuckAfter.Seconds(), queue)
	if err := os.WriteFile(files[1], []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}
	return files, retrying, stuck
}

// TestControllerAlertsOnTheSandbox: the controller alerts against real
// controllers. A real Prometheus (scrape 5 s, evaluation 15 s) scrapes the
// sandbox's kube-controller-manager, the test controller (client-go
// workqueue and legacy recorder, default rate limiter) and a fresh
// exporter, with the bundled controller rules (ControllerRetrying's 900 s
// shortened to 30 s) and a user's threshold file holding the test
// controller's queue at 20 s.
//
//   - healthy: 4 minutes of healthyChurn, the test controller syncing 5
//     ConfigMaps, one failing 3 times and recovering, one held 5 s: from
//     two minutes after the first scrape, both alerts' expressions are
//     empty over the range (for cannot hide them); the old Retrying
//     expression is logged on KCM's queues for comparison;
//   - failing for good: one ConfigMap fails every sync: Retrying's
//     expression names the controller, SyncFailed and ConfigMap; the old
//     rule's 0.1 retries/s never holds on the queue (client-go's back-off);
//   - held: one sync holds its worker 90 s: WorkqueueStuck's expression
//     names the job and queue once the hold passes 20 s.
func TestControllerAlertsOnTheSandbox(t *testing.T) {
	if os.Getenv("KCE_SOAK") == "" {
		t.Skip("e2e/calibration covers it in make test (KCM's queues silent, the test controller failing and held); this run, with ControllerRetrying shortened to 30 s, is make soak's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		queue         = "kce-e2e-testctl"
		retryingAfter = 30 * time.Second
		stuckAfter    = 20 * time.Second
	)
	ns := "controller-alerts"
	newNamespace(t, client, ns)
	ctl, err := testctl.Start(ctx, sb.AdminConfig(), testctl.Options{Name: queue, Namespace: ns, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctl.Stop(); err != nil {
			t.Error(err)
		}
	})
	exp := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""))
	exp.waitReady(60 * time.Second)
	files, retrying, stuck := controllerRules(t, t.TempDir(), retryingAfter, queue, stuckAfter)
	prom := startPrometheus(ctx, t, sandbox.PrometheusOptions{
		ScrapeInterval: 5 * time.Second, EvaluationInterval: 15 * time.Second,
		Targets: []sandbox.ScrapeTarget{
			{Job: "kube-convergence-exporter", Addr: strings.TrimPrefix(exp.url, "http://")},
			kcmTarget(),
			{Job: queue, Addr: ctl.MetricsAddr()},
		},
		RuleFiles: files,
	})
	if _, err := prom.WaitFor(ctx, `count(up == 1) == 3`, func(v model.Vector) bool { return len(v) == 1 }, time.Minute); err != nil {
		t.Fatal(err)
	}
	firstScrape := time.Now()

	t.Run("healthy", func(t *testing.T) {
		churnCtx, stopChurn := context.WithCancel(ctx)
		wait := healthyChurn(churnCtx, t, ns)
		for i := range 5 {
			name := fmt.Sprintf("cm-%d", i)
			switch i {
			case 1:
				ctl.FailTimes(name, 3)
			case 2:
				ctl.Hold(name, 5*time.Second)
			}
			createManaged(ctx, t, ns, name, queue)
		}
		until := firstScrape.Add(4 * time.Minute)
		for time.Now().Before(until) && ctx.Err() == nil {
			// Keep the test controller busy: a data change every 10 s.
			touchManaged(ctx, t, ns, "cm-0")
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
		stopChurn()
		wait()
		if st := ctl.Stats("cm-1"); st.Failures != 3 || st.LastSuccess.IsZero() {
			t.Errorf("cm-1: %+v, want 3 failures and a success", st)
		}
		from, to := firstScrape.Add(2*time.Minute), time.Now()
		for name, q := range map[string]string{"ControllerRetrying": retrying, "WorkqueueStuck": stuck} {
			m, err := prom.QueryRange(ctx, q, from, to, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range m {
				// In the whole e2e run, an object another test left failing
				// is no part of this healthy churn: only Warning Events of
				// this namespace count against it.
				if name == "ControllerRetrying" && !warnedHere(ctx, t, ns, s.Metric) {
					t.Logf("%s true for %s, whose Warning Events are outside %s: not this test's churn", name, s.Metric, ns)
					continue
				}
				t.Errorf("%s true on a healthy cluster: %s (%d of the range's steps)", name, s.Metric, len(s.Values))
			}
		}
		// The old rule, for the record: retries per add over 0.5 and over
		// 0.1 retries/s, on KCM's healthy queues.
		old := `sum by (job, name) (rate(workqueue_retries_total[5m])) / (sum by (job, name) (rate(workqueue_adds_total[5m])) > 0) > 0.5
and on (job, name) sum by (job, name) (rate(workqueue_retries_total[5m])) > 0.1`
		if m, err := prom.QueryRange(ctx, old, from, to, 15*time.Second); err == nil {
			for _, s := range m {
				t.Logf("old ControllerRetrying expression true on the healthy cluster: %s (%d of the range's steps)", s.Metric, len(s.Values))
			}
		}
		if n, err := prom.RuleEvaluationFailures(ctx); err != nil || n != 0 {
			t.Errorf("rule evaluation failures %v (err %v), want 0", n, err)
		}
	})

	t.Run("failing for good", func(t *testing.T) {
		ctl.FailForGood("doomed")
		createManaged(ctx, t, ns, "doomed", queue)
		start := time.Now()
		v, err := prom.WaitFor(ctx, retrying, func(v model.Vector) bool {
			for _, s := range v {
				if s.Metric["controller"] == queue && s.Metric["reason"] == testctl.ReasonSyncFailed && s.Metric["kind"] == "ConfigMap" {
					return true
				}
			}
			return false
		}, 3*time.Minute)
		if err != nil {
			t.Fatalf("%v (controller: %+v)", err, ctl.Stats("doomed"))
		}
		st := ctl.Stats("doomed")
		t.Logf("ControllerRetrying (after %s) true %s after the first failure: %v; controller %+v", retryingAfter, time.Since(st.FirstFailure).Round(time.Second), v, st)
		if time.Since(start) > 2*time.Minute {
			t.Errorf("took %s", time.Since(start))
		}
		// The old rule's rate threshold: client-go's back-off spaces the
		// retries of one item far below 0.1/s once it has failed a few times.
		rate, err := prom.Query(ctx, fmt.Sprintf(`sum(rate(workqueue_retries_total{job=%q}[5m]))`, queue))
		if err != nil || len(rate) != 1 || float64(rate[0].Value) >= 0.1 {
			t.Errorf("retries/s of the queue %v (%v), want below the old rule's 0.1", rate, err)
		}
	})

	t.Run("held", func(t *testing.T) {
		ctl.Hold("held", 90*time.Second)
		createManaged(ctx, t, ns, "held", queue)
		v, err := prom.WaitFor(ctx, stuck, func(v model.Vector) bool {
			for _, s := range v {
				if s.Metric["job"] == queue && s.Metric["name"] == queue {
					return true
				}
			}
			return false
		}, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("WorkqueueStuck (threshold %s) true: %v", stuckAfter, v)
	})
}

// warnedHere says whether a Warning Event of ns matches the controller and
// reason of a ControllerRetrying series.
func warnedHere(ctx context.Context, t *testing.T, ns string, m model.Metric) bool {
	t.Helper()
	evs, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning,reason=" + string(m["reason"])})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs.Items {
		e := &evs.Items[i]
		if e.ReportingController == string(m["controller"]) || e.DeprecatedSource.Component == string(m["controller"]) {
			return true
		}
	}
	return false
}

func createManaged(ctx context.Context, t *testing.T, ns, name, controller string) {
	t.Helper()
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, testctl.ConfigMap(ns, name, controller), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func touchManaged(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["v"] = time.Now().Format(time.RFC3339Nano)
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}); err != nil && ctx.Err() == nil {
		t.Error(err)
	}
}
