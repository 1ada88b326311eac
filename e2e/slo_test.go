package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// startRulesPrometheus runs a real Prometheus that scrapes the shared
// exporter the way the README says (native histograms on, classic buckets
// kept) and evaluates the bundled rule files unmodified.
//
// The stuck-rollout alert waits 10 minutes for progress and 15 of `for`;
// shortenedRules cuts both to 10 s and leaves every expression as bundled.
func startRulesPrometheus(ctx context.Context, t *testing.T, e *exporterProc, alertmanager string, extraArgs ...string) *sandbox.Prometheus {
	t.Helper()
	ruleFiles := shortenedRules(t, t.TempDir())
	prom, err := sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{
		Targets: []sandbox.ScrapeTarget{{
			// The job name the bundled alerts select on (ServiceMonitor:
			// the Service's name).
			Job:   "kube-convergence-exporter",
			Addr:  strings.TrimPrefix(e.url, "http://"),
			Extra: map[string]any{"scrape_native_histograms": true, "always_scrape_classic_histograms": true},
		}, kcmTarget()},
		RuleFiles:       ruleFiles,
		AlertmanagerURL: alertmanager,
		ExtraArgs:       extraArgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	return prom
}

// kcmTarget scrapes the sandbox's kube-controller-manager (its workqueue
// metrics, for rules/kube-convergence-controllers.rules.yml): HTTPS with a
// self-signed certificate, the admin token (authorised by the API server
// through delegated authorization).
func kcmTarget() sandbox.ScrapeTarget {
	return sandbox.ScrapeTarget{
		Job:    "kube-controller-manager",
		Addr:   sb.ControllerManagerAddr(),
		Scheme: "https",
		Extra: map[string]any{
			"authorization": map[string]any{"credentials": sb.AdminConfig().BearerToken},
			"tls_config":    map[string]any{"insecure_skip_verify": true},
		},
	}
}

// The SLO issue's end-to-end acceptance, on the shared exporter (started
// with --stall.threshold=15s): a real Prometheus 3 evaluates the bundled
// rules without a single evaluation error; a Deployment that never becomes
// Ready fires KubeConvergenceRolloutStuck, which reaches the test's
// webhook through a real Alertmanager with its labels and annotations;
// and bundled SLIs return values for injected workloads, which proves the
// le="T.0" and threshold="T.0" matching on a Prometheus that rewrites le.
//
// About 6 minutes: the rollout SLO's threshold is 300 s, and the stuck
// rollout must cross it before its SLI can count it as bad.
func TestSLORulesOnRealPrometheus(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	receiver, err := sandbox.NewWebhookReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	am, err := sandbox.StartAlertmanager(ctx, sandbox.AlertmanagerOptions{WebhookURL: receiver.URL(), GroupWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := am.Stop(); err != nil {
			t.Error(err)
		}
	})
	// created-timestamp-zero-ingestion: the exporter creates a series at
	// its first event (a new namespace's histogram at its first
	// observation, a threshold counter at its first crossing), so without
	// the 0 Prometheus then writes at the series' creation time rate()
	// never sees that event. Seen here without it: the fast rollout's
	// observations and the stuck rollout's 300 s crossing both gave
	// slo:sli_bad:rate5m and slo:sli_total:rate5m 0. docs/slo.md, "New
	// series".
	prom := startRulesPrometheus(ctx, t, e, am.URL(), "--enable-feature=created-timestamp-zero-ingestion")
	if _, err := prom.WaitFor(ctx, `up{job="kube-convergence-exporter"} == 1`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// A fast Deployment: its rollout is observed at once and available in
	// well under 300 s, good events of two bundled SLIs.
	// rollout-available counts pod template changes only: each Deployment
	// is created, becomes available, and then gets a new template.
	fastNS := namespace(t, "slo-fast")
	if _, err := client.AppsV1().Deployments(fastNS).Create(ctx, demo.Deployment(fastNS, "fast", 2, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stuckNS := namespace(t, "slo-stuck")
	if _, err := client.AppsV1().Deployments(stuckNS).Create(ctx, demo.Deployment(stuckNS, "stuck", 2, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(ctx, t, fastNS, "fast")
	waitAvailable(ctx, t, stuckNS, "stuck")
	// A fast template change: a good event of rollout-available. A stuck
	// one: its new pods run and never pass readiness.
	newTemplate(ctx, t, fastNS, "fast", map[string]string{"kce.test/revision": "2"})
	created := time.Now()
	newTemplate(ctx, t, stuckNS, "stuck", demo.NeverReady)

	// The fast rollout's good events, as the bundled SLIs select them:
	// le="30.0" (observedGeneration lag) and le="300.0" (rollout
	// available). Per namespace first, so that other tests' rollouts on the
	// shared exporter cannot make this pass.
	for _, q := range []string{
		fmt.Sprintf(`increase(kube_convergence_rollout_duration_seconds_bucket{namespace=%q, stage="observed", change="template", le="30.0"}[5m]) > 0`, fastNS),
		fmt.Sprintf(`increase(kube_convergence_rollout_duration_seconds_bucket{namespace=%q, kind="Deployment", stage="available", change="template", le="300.0"}[5m]) > 0`, fastNS),
	} {
		if _, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) == 1 }, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Then the bundled records themselves: events counted, none bad (a
	// controller that took 30 s to observe a generation would be a bug in
	// the sandbox).
	waitSLI(ctx, t, prom, `slo:sli_total:rate5m{sloth_slo="observed-generation-lag"} > 0`)
	waitSLI(ctx, t, prom, `slo:sli_total:rate5m{sloth_slo="rollout-available"} > 0`)
	v := waitSLI(ctx, t, prom, `slo:sli_error:ratio_rate5m{sloth_slo="observed-generation-lag"}`)
	if v[0].Value != 0 {
		t.Errorf("observed-generation-lag error ratio over 5m = %v, want 0", v[0].Value)
	}
	t.Logf("fast rollout counted by the bundled SLIs (le=\"30.0\", le=\"300.0\") %v after its write", time.Since(created).Round(time.Second))

	// The stuck rollout: stalled at 15 s, KubeConvergenceRolloutStuck
	// (waits shortened to 10 s) pending, then Prometheus -> Alertmanager ->
	// webhook.
	alert, err := receiver.WaitFor(ctx, func(a sandbox.ReceivedAlert) bool {
		return a.Status == "firing" && a.Labels["alertname"] == "KubeConvergenceRolloutStuck" && a.Labels["namespace"] == stuckNS
	}, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KubeConvergenceRolloutStuck at the webhook %v after the write", time.Since(created).Round(time.Second))
	// No instance: the alert is the object's, whichever replica of the
	// exporter sees it (docs/runbooks.md, "Replicas and shards").
	wantLabels := map[string]string{
		"alertname": "KubeConvergenceRolloutStuck",
		"severity":  "warning",
		"job":       "kube-convergence-exporter",
		"kind":      "Deployment",
		"namespace": stuckNS,
		"name":      "stuck",
	}
	for k, want := range wantLabels {
		if alert.Labels[k] != want {
			t.Errorf("label %s = %q, want %q (all: %v)", k, alert.Labels[k], want, alert.Labels)
		}
	}
	if len(alert.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want exactly %v", alert.Labels, wantLabels)
	}
	if got, want := alert.Annotations["summary"], "Deployment "+stuckNS+"/stuck has reached no stage for 10 minutes"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got, want := alert.Annotations["runbook_url"], "https://github.com/kube-convergence/kube-convergence-exporter/blob/main/docs/runbooks.md#kubeconvergencerolloutstuck"; got != want {
		t.Errorf("runbook_url %q, want %q", got, want)
	}
	// Since when, before which stage and why: the stalled gauge's value
	// (the age of the write) and labels, read by the annotation's query.
	desc := alert.Annotations["description"]
	// Stage updated: the new ReplicaSet's pod never becomes ready, so the
	// rolling update (maxUnavailable 25% of 2: 0) cannot replace the old
	// pods.
	since := regexp.MustCompile(`^The rollout of Deployment ` + stuckNS + `/stuck was written (\d+m )?[\d.]+s ago and is stuck before stage updated \(reason readiness_failing\)\. Its containers run but never pass their readiness probe\.$`)
	if !since.MatchString(desc) {
		t.Errorf("description %q does not say since when, before which stage and why", desc)
	}
	if u := alert.Annotations["exporter_url"]; u != "" {
		t.Errorf("exporter_url %q, want none: the shared exporter has no --web.external-url", u)
	}

	// The stuck rollout burns the rollout SLO's budget while it is stuck:
	// at 300 s it crosses the threshold, and threshold="300.0" of its
	// counter joins le="300.0" of the histogram in the bundled SLI.
	q := fmt.Sprintf(`increase(kube_convergence_rollout_threshold_exceeded_total{namespace=%q, kind="Deployment", stage="available", change="template", threshold="300.0"}[5m]) > 0`, stuckNS)
	if _, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) == 1 }, 6*time.Minute-time.Since(created)); err != nil {
		t.Fatal(err)
	}
	v = waitSLI(ctx, t, prom, `slo:sli_error:ratio_rate5m{sloth_slo="rollout-available"} > 0`)
	t.Logf("stuck rollout counted as bad by the rollout-available SLI %v after its write, still stuck: error ratio over 5m %v", time.Since(created).Round(time.Second), v[0].Value)
	// The series exist at 0 from the episode's opening; none may have counted.
	if v, err := prom.Query(ctx, fmt.Sprintf(`sum(kube_convergence_rollouts_total{namespace=%q, change="template"}) > 0`, stuckNS)); err != nil || len(v) != 0 {
		t.Errorf("the stuck rollout has ended (%v, %v): the test wants it still stuck", v, err)
	}
	for _, name := range []string{"slo:period_burn_rate:ratio", "slo:period_error_budget_remaining:ratio", "slo:current_burn_rate:ratio"} {
		waitSLI(ctx, t, prom, name+`{sloth_slo="rollout-available"}`)
	}

	failures, err := prom.RuleEvaluationFailures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("prometheus_rule_evaluation_failures_total = %v over the run, want 0", failures)
	}

	// The report issue's live-data acceptance: `report` over the bundled
	// SLO file counts the stuck rollout's bad event from the raw series.
	checkLiveReport(ctx, t, prom, stuckNS, fastNS)
}

// waitSLI waits up to a minute for q to return one sample (the rule
// groups evaluate every second) and returns it.
func waitSLI(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, q string) model.Vector {
	t.Helper()
	v, err := prom.WaitFor(ctx, q, func(v model.Vector) bool { return len(v) == 1 }, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitAvailable waits until every replica of the Deployment is updated and
// available.
func waitAvailable(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, time.Minute, "deployment "+ns+"/"+name+" available", func() (bool, string) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return d.Spec.Replicas != nil && st.ObservedGeneration == d.Generation && st.UpdatedReplicas == *d.Spec.Replicas && st.AvailableReplicas == *d.Spec.Replicas,
			fmt.Sprintf("%+v", st)
	})
}

// newTemplate writes a new pod template: the annotations replace the old
// ones (a template change, change="template").
func newTemplate(ctx context.Context, t *testing.T, ns, name string, annotations map[string]string) {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Annotations = annotations
	if _, err := client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
