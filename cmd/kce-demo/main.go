// Command kce-demo is `make demo`: a local control plane (etcd,
// kube-apiserver, controller-manager, scheduler, kwok), a workload whose
// rollouts converge, stall and fail, the exporter, Prometheus with the
// bundled rules and Alertmanager. It prints where to look and a live
// summary; Ctrl-C stops everything it started.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kce-demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	say := func(f string, a ...any) { fmt.Printf(f+"\n", a...) }

	say("Starting the sandbox: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok...")
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Stages:      sandbox.StagesGeneral,
		ExtraStages: []string{demo.StageRunningNotReady, demo.StageReadyToStartContainers},
		// Endpoints lag their pods by up to the batch period: visible in
		// the endpoint propagation and removal metrics.
		ControllerManagerFlags: []string{"--endpointslice-updates-batch-period=" + demo.SliceBatchPeriod.String()},
		Logf:                   func(f string, a ...any) { say("  "+f, a...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the sandbox...")
		_ = sb.Stop()
	}()
	client, err := kubernetes.NewForConfig(sb.AdminConfig())
	if err != nil {
		return err
	}
	for _, n := range []string{"kwok-node-0", "kwok-node-1"} {
		if err := sb.CreateNode(ctx, n); err != nil {
			return err
		}
	}

	addr := listenAddr("127.0.0.1:10329")
	bin := filepath.Join(binDir(), "kube-convergence-exporter")
	logPath := filepath.Join(sb.Dir(), "exporter.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The exporter tracks the demo's custom resource (Backups) too, and
	// probes the demo's slow admission webhook.
	cfgPath := filepath.Join(sb.Dir(), "kce.yaml")
	if err := os.WriteFile(cfgPath, []byte(demo.BackupsConfig+demo.WebhookConfig), 0o600); err != nil {
		return err
	}
	exp := exec.CommandContext(context.WithoutCancel(ctx), bin, "--kubeconfig="+sb.Kubeconfig(""), "--web.listen-address="+addr,
		"--stall.threshold=30s", "--web.external-url=http://"+addr+"/", "--config.file="+cfgPath)
	exp.Stdout, exp.Stderr = logFile, logFile
	exp.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// From a thread that outlives the demo: Pdeathsig fires when the forking
	// thread exits, which any sandbox spawner closing could cause.
	if err := sandbox.StartCmd(exp); err != nil {
		return fmt.Errorf("start exporter %s (run make build): %w", bin, err)
	}
	defer func() {
		_ = exp.Process.Signal(syscall.SIGTERM)
		_ = exp.Wait()
	}()
	if err := waitHTTP(ctx, "http://"+addr+"/readyz", time.Minute); err != nil {
		return fmt.Errorf("exporter not ready (log: %s): %w", logPath, err)
	}

	receiver, err := sandbox.NewWebhookReceiver()
	if err != nil {
		return err
	}
	defer receiver.Close()
	am, err := sandbox.StartAlertmanager(ctx, sandbox.AlertmanagerOptions{WebhookURL: receiver.URL(), GroupWait: 5 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = am.Stop() }()
	rules, _ := filepath.Glob(filepath.Join(repoRoot(), "rules", "*.rules.yml"))
	prom, err := sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{
		ScrapeInterval: 5 * time.Second, EvaluationInterval: 5 * time.Second,
		Targets: []sandbox.ScrapeTarget{{Job: "kube-convergence-exporter", Addr: addr,
			// The bundled rules read classic `le` buckets: keep them when
			// native histograms are scraped too.
			Extra: map[string]any{"scrape_native_histograms": true, "always_scrape_classic_histograms": true}},
			// The webhook latency alerts read the API server's own metrics.
			sb.APIServerTarget()},
		RuleFiles:       rules,
		AlertmanagerURL: am.URL(),
		// Count a series' first increment (see README, scrape configuration).
		ExtraArgs: []string{"--enable-feature=created-timestamp-zero-ingestion"},
	})
	if err != nil {
		return err
	}
	defer func() { _ = prom.Stop() }()

	say("Installing the demo workload (namespaces %s, %s)...", demo.Namespace, demo.QuotaNamespace)
	if err := demo.Install(ctx, client); err != nil {
		return err
	}
	go demo.Churn(ctx, client, logger)
	dyn, err := dynamic.NewForConfig(sb.AdminConfig())
	if err != nil {
		return err
	}
	say("Installing the demo custom resource (backups.%s) and its controller...", demo.BackupGroup)
	if err := demo.InstallBackups(ctx, dyn); err != nil {
		return err
	}
	go demo.RunBackupController(ctx, dyn, logger)

	say("Installing the demo admission webhook (%s, slow for %v every %v)...", demo.SlowWebhookName, demo.SlowWebhookPeriod, 2*demo.SlowWebhookPeriod)
	hook, err := demo.InstallSlowWebhook(ctx, client)
	if err != nil {
		return err
	}
	defer func() { _ = hook.Close() }()
	go demo.RunSlowWebhookTimer(ctx, hook, logger)

	say(`
kube-convergence-exporter demo is running. Where to look:

  Exporter      http://%[1]s/           (landing page)
                http://%[1]s/metrics    (the metrics)
                http://%[1]s/readyz     (readiness, per collector)
                http://%[1]s/timelines  (each rollout's evidence: writes, pods, events, stages; slowest and stalled first)
                http://%[1]s/timelines/deploy/demo-quota/over-quota  (a quota-blocked rollout)
                curl -s 'http://%[1]s/api/v1/timelines?state=stalled'
  Prometheus    %[2]s   (HTTP API; the web UI needs assets that Go alone does not build)
                curl -s '%[2]s/api/v1/query' --data-urlencode 'query=histogram_quantile(0.9, sum by (le, kind, stage) (rate(kube_convergence_rollout_duration_seconds_bucket[5m])))'
                curl -s '%[2]s/api/v1/query' --data-urlencode 'query=kube_convergence_rollout_stalled_seconds'
                curl -s '%[2]s/api/v1/query' --data-urlencode 'query=histogram_quantile(0.9, sum by (le, stage) (rate(kube_convergence_pod_startup_seconds_bucket[5m])))'
                curl -s '%[2]s/api/v1/query' --data-urlencode 'query=kube_convergence_pods_not_ready > 0'
                curl -s '%[2]s/api/v1/alerts'
  Alertmanager  %[3]s/api/v2/alerts
  Kubernetes    KUBECONFIG=%[4]s  (%[5]s/kubectl get deploy -A)
  Logs          %[6]s

Rollouts converge quickly (demo/web), slowly (demo/slow), never (demo/never-ready: pods never Ready)
and are blocked by a quota (demo-quota/over-quota); demo/db (StatefulSet) and demo/agent (DaemonSet)
roll too. Backups (a custom resource, kind Backup.demo.kce.io) are reconciled by a small controller of the
demo's: observed after %[8]v, Ready %[9]v later; demo/broken gives up (Stalled=True, reported at once).
demo/sandbox pods report PodReadyToStartContainers. Every Service's endpoints lag its pods
by up to %[7]v (the controller-manager batches slice updates); demo/web-canary's selector moves.
Admission webhook %[10]s answers in 0.1 s for %[11]v, then in 6 s (timeout 10 s) for as long: the
exporter's admission probe demo-configmap times it, KubeConvergenceWebhookNearTimeout follows.
The demo rolls its Deployments back to back, so kube-controller-manager rewrites their status over 60
times in 5 minutes: each write is progress, so KubeConvergenceControllerHotLoop stays silent.
Stalls show after 30 s. Press Ctrl-C to stop everything.
`, addr, prom.URL(), am.URL(), sb.Kubeconfig(""), binDir(), sb.Dir(), demo.SliceBatchPeriod, demo.BackupObserveDelay, demo.BackupReadyDelay,
		demo.SlowWebhookName, demo.SlowWebhookPeriod)

	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			say("\nCtrl-C: stopping the exporter, Prometheus, Alertmanager and the sandbox...")
			return nil
		case <-t.C:
			summary(ctx, say, "http://"+addr+"/metrics", receiver)
		}
	}
}

// summary prints open and stalled rollouts and the alerts received.
func summary(ctx context.Context, say func(string, ...any), metricsURL string, receiver *sandbox.WebhookReceiver) {
	resp, err := get(ctx, metricsURL)
	if err != nil {
		say("summary: %v", err)
		return
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		say("summary: %v", err)
		return
	}
	var lines []string
	sum := func(name, label string) map[string]float64 {
		out := map[string]float64{}
		if mf := mfs[name]; mf != nil {
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == label {
						out[l.GetValue()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	lines = append(lines, fmt.Sprintf("%s  rollouts ended by outcome %v, in progress %v",
		time.Now().Format("15:04:05"), sum("kube_convergence_rollouts_total", "outcome"), sum("kube_convergence_rollouts_in_progress", "kind")))
	notReady := map[string]float64{}
	for r, v := range sum("kube_convergence_pods_not_ready", "reason") {
		if v > 0 {
			notReady[r] = v
		}
	}
	mean := func(name string) string {
		var s float64
		var c uint64
		if mf := mfs[name]; mf != nil {
			for _, m := range mf.Metric {
				s += m.GetHistogram().GetSampleSum()
				c += m.GetHistogram().GetSampleCount()
			}
		}
		if c == 0 {
			return "none yet"
		}
		return fmt.Sprintf("%d, mean %.2fs", c, s/float64(c))
	}
	lines = append(lines, fmt.Sprintf("    pods not ready by reason %v; endpoint propagations %s; removals %s",
		notReady, mean("kube_convergence_endpoint_propagation_seconds"), mean("kube_convergence_endpoint_removal_seconds")))
	if mf := mfs["kube_convergence_rollout_stalled_seconds"]; mf != nil {
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			lines = append(lines, fmt.Sprintf("    stalled %s %s/%s for %.0fs at stage %s: %s", l["kind"], l["namespace"], l["name"], m.GetGauge().GetValue(), l["stage"], l["reason"]))
		}
	}
	names := map[string]bool{}
	for _, a := range receiver.Alerts() {
		if a.Status == "firing" {
			names[a.Labels["alertname"]] = true
		}
	}
	if len(names) > 0 {
		var ns []string
		for n := range names {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		lines = append(lines, "    alerts received by the webhook: "+strings.Join(ns, ", "))
	}
	say("%s", strings.Join(lines, "\n"))
}

func listenAddr(preferred string) string {
	if l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", preferred); err == nil {
		_ = l.Close()
		return preferred
	}
	port, err := sandbox.FreePort()
	if err != nil {
		return preferred
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := get(ctx, url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

func binDir() string {
	if d := os.Getenv("KCE_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), ".bin")
}

func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if b, _ := os.ReadFile(filepath.Join(d, "go.mod")); strings.Contains(string(b), "module github.com/kube-convergence/kube-convergence-exporter\n") {
				return d
			}
		}
	}
	return dir
}
