// Command kce-scale is `make scale`: the exporter and, when KSM_BIN names a
// kube-state-metrics binary, kube-state-metrics side by side on one
// sandbox, through N pods created and converged and a template change of
// every Deployment (docs/scale.md). It prints a markdown table of their CPU,
// memory and /metrics figures, and of the exporter's Ready times against a
// truth writer's, and writes it to SCALE_OUT.
//
// A program and not an e2e test: the e2e package's TestMain starts its own
// sandbox (audit log, 2 s slice batching) and a shared exporter, which
// would run beside the measured processes and share their 2 cores; this
// starts only what it measures.
//
// Environment: SCALE_PODS (default 20000), KSM_BIN (optional; the project
// never builds kube-state-metrics), SCALE_OUT (default scale-result.md),
// KCE_BIN_DIR (the component binaries, default .bin), KCE_EXPORTER (the
// exporter binary, default $KCE_BIN_DIR/kube-convergence-exporter),
// SCALE_PROFILES (a directory: CPU profiles of both processes through the
// churn and a heap profile after it, docs/performance.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// The controller-manager's and scheduler's client limits for the run: the
// defaults (20 and 50 QPS) create and bind pods more slowly than the run
// takes at 20,000 pods.
var componentClientFlags = []string{"--kube-api-qps=3000", "--kube-api-burst=6000"}

// scrapes is the length of each /metrics latency series; scrapeInterval
// the period at which both processes are scraped meanwhile, as by a
// Prometheus (and from which the run reads their progress).
const (
	scrapes        = 20
	scrapeInterval = 15 * time.Second
)

func main() {
	run := run
	if len(os.Args) > 1 && os.Args[1] == "cardinality" {
		run = runCardinality
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kce-scale:", err)
		os.Exit(1)
	}
}

type config struct {
	pods     int
	ksmBin   string
	out      string
	binDir   string
	exporter string
	profiles string // SCALE_PROFILES: where to write the profiles; "" for none
}

func configFromEnv() (config, error) {
	c := config{pods: 20000, ksmBin: os.Getenv("KSM_BIN"), out: os.Getenv("SCALE_OUT"), binDir: os.Getenv("KCE_BIN_DIR"), profiles: os.Getenv("SCALE_PROFILES")}
	if v := os.Getenv("SCALE_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("SCALE_PODS: want a number of pods such as 20000, got %q", v)
		}
		c.pods = n
	}
	if c.out == "" {
		c.out = "scale-result.md"
	}
	if c.binDir == "" {
		c.binDir = ".bin"
	}
	c.exporter = os.Getenv("KCE_EXPORTER")
	if c.exporter == "" {
		c.exporter = filepath.Join(c.binDir, "kube-convergence-exporter")
	}
	if _, err := os.Stat(c.exporter); err != nil {
		return c, fmt.Errorf("the exporter binary (run make build): %w", err)
	}
	if c.ksmBin != "" {
		fi, err := os.Stat(c.ksmBin)
		if err != nil {
			return c, fmt.Errorf("KSM_BIN: want the path of a kube-state-metrics binary: %w", err)
		}
		if fi.IsDir() {
			return c, fmt.Errorf("KSM_BIN: want the path of a kube-state-metrics binary, got the directory %q", c.ksmBin)
		}
	}
	return c, nil
}

// figures are one target's numbers.
type figures struct {
	p0, p1, p2            point
	cpuCreate, cpuChurn   float64
	peakSampled           uint64
	samples               int
	midLat, convLat       []float64
	size, lines           int
	midFrom, midTo        float64 // rollouts converged in the API around the mid-churn series
	heapForcedGC, present bool
	// restart: a new process started with the N pods present: its peak
	// (VmHWM: the initial list included) and, after a forced GC once it
	// has listed them, its RSS; how long until then.
	restart     point
	restartPeak uint64
	restartTook time.Duration
}

type progress struct {
	mu              sync.Mutex
	converged       float64 // exporter: kube_convergence_rollouts_total{outcome="converged"}
	truthReady      float64 // exporter: ready observations in the truth namespaces
	ksmPods         int     // kube-state-metrics: kube_pod_info series
	ksmReady        int     // kube-state-metrics: pods with kube_pod_status_ready{condition="true"} 1
	exporterScraped bool
	ksmScraped      bool
}

func run() (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	sh, err := newShape(cfg.pods)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	say := func(f string, a ...any) {
		fmt.Printf("%s "+f+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
	}
	began := time.Now()
	loadBefore := loadAverage()
	say("scale run: %d pods in %d Deployments (%d truth) behind %d Services in %d namespaces, %d kwok nodes; load average %s",
		sh.pods, sh.deployments, sh.truthDeployments, sh.deployments, sh.namespaces, sh.nodes, loadBefore)

	scratch, err := os.MkdirTemp("", "kce-scale-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (the exporter's and kube-state-metrics' logs are in %s)", err, scratch)
		}
	}()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		BinDir:                 cfg.binDir,
		Stages:                 sandbox.StagesGeneral,
		ExtraStages:            []string{demo.StageRunningNotReady},
		ControllerManagerFlags: componentClientFlags,
		SchedulerFlags:         componentClientFlags,
		Logf:                   func(f string, a ...any) { say(f, a...) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = sb.Stop() }()
	rc := sb.AdminConfig()
	rc.QPS, rc.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := parallel(ctx, sh.nodes, 8, func(i int) error { return sb.CreateNode(ctx, fmt.Sprintf("kwok-scale-%02d", i)) }); err != nil {
		return err
	}
	say("%d kwok nodes Ready (room for %d pods each)", sh.nodes, podsPerNode)

	exp, ksm, err := startTargets(ctx, cfg, sb, scratch)
	defer exp.stop()
	defer ksm.stop()
	if err != nil {
		return err
	}
	targets := []*target{exp}
	if ksm != nil {
		targets = append(targets, ksm)
	}
	figs := map[*target]*figures{}
	for _, t := range targets {
		f := &figures{present: true, heapForcedGC: t.heapGCURL != ""}
		figs[t] = f
		if f.p0, err = t.measure(ctx); err != nil {
			return err
		}
		t.sampler = startSampler(t.pid())
	}
	say("at 0 pods: %s", memLine(targets, figs, func(f *figures) point { return f.p0 }))

	// Both processes scraped every 15 s, as by a Prometheus; the run reads
	// their progress from these scrapes.
	prog := &progress{}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	_, truthNS := sh.namespaceNames()
	go scrapeLoop(runCtx, exp, ksm, truthNS, prog)

	writer, err := startTruthWriter(runCtx, client, logger, 4)
	if err != nil {
		return err
	}
	seen := &readyTimes{base: exp.metricsURL[:len(exp.metricsURL)-len("/metrics")], namespaces: truthNS, at: map[string]time.Time{}}
	go seen.run(runCtx)

	// Phase 1: create and converge.
	cpu0 := cpuAll(targets)
	createStart := time.Now()
	if err := create(ctx, client, sh); err != nil {
		return err
	}
	say("created %d namespaces, %d Services, %d Deployments in %s", sh.namespaces, sh.deployments, sh.deployments, duration(time.Since(createStart)))
	if err := waitConverged(ctx, client, sh, prog, ksm != nil, 1, targets, say); err != nil {
		return err
	}
	createTook := time.Since(createStart)
	cpu1 := cpuAll(targets)
	say("phase 1: %d pods converged in %s", sh.pods, duration(createTook))
	for _, t := range targets {
		f := figs[t]
		f.cpuCreate = cpu1[t] - cpu0[t]
		if f.p1, err = t.measure(ctx); err != nil {
			return err
		}
	}
	say("at %d pods: %s", sh.pods, memLine(targets, figs, func(f *figures) point { return f.p1 }))

	// Phase 2: a template change of every Deployment.
	churnStart := time.Now()
	cpu2 := cpuAll(targets)
	var profs []*profiler
	if cfg.profiles != "" {
		for _, t := range targets {
			if t.pprofBase == "" {
				say("%s serves no /debug/pprof/: no profiles of it", t.name)
				continue
			}
			p, err := startProfiler(ctx, filepath.Join(cfg.profiles, t.name), t.pprofBase, 20*time.Second)
			if err != nil {
				return err
			}
			profs = append(profs, p)
		}
	}
	if err := rollAll(ctx, client, sh); err != nil {
		return err
	}
	say("changed the template of %d Deployments in %s", sh.deployments, duration(time.Since(churnStart)))
	// Mid-churn: once a tenth of the rollouts converged in the API, while
	// the rest are in flight.
	tenth := max(sh.deployments/10, 1)
	if err := waitFor(ctx, sh.phaseTimeout(), "a tenth of the rollouts converged", func() (bool, string, error) {
		n, err := convergedInAPI(ctx, client)
		return n >= tenth, fmt.Sprintf("%d of %d", n, tenth), errors.Join(err, exp.exited())
	}, time.Second, say); err != nil {
		return err
	}
	for _, t := range targets {
		f := figs[t]
		n, err := convergedInAPI(ctx, client)
		if err != nil {
			return err
		}
		f.midFrom = float64(n)
		if f.midLat, _, _, err = t.series(ctx, scrapes); err != nil {
			return err
		}
		if n, err = convergedInAPI(ctx, client); err != nil {
			return err
		}
		f.midTo = float64(n)
	}
	if err := waitConverged(ctx, client, sh, prog, ksm != nil, 2, targets, say); err != nil {
		return err
	}
	churnTook := time.Since(churnStart)
	cpu3 := cpuAll(targets)
	say("phase 2: %d rollouts converged in %s", sh.deployments, duration(churnTook))
	for _, p := range profs {
		files, err := p.finish(ctx)
		if err != nil {
			return fmt.Errorf("profiles: %w", err)
		}
		say("profiles: %s", strings.Join(files, " "))
	}
	for _, t := range targets {
		f := figs[t]
		f.cpuChurn = cpu3[t] - cpu2[t]
		if f.convLat, f.size, f.lines, err = t.series(ctx, scrapes); err != nil {
			return err
		}
		if f.p2, err = t.measure(ctx); err != nil {
			return err
		}
		f.peakSampled, f.samples = t.sampler.finish()
		m, err := readMemory(t.pid())
		if err != nil {
			return err
		}
		f.p2.mem.hwm = m.hwm
	}

	// Accuracy: every truth pod's Ready write against the exporter's
	// receive time, once the timelines show them all and its startup
	// histogram counts them (or a minute passed). The progress scrape runs
	// every 15 s and not while a measured series holds the target: read
	// afresh here, or the pods made Ready in the last seconds of phase 2
	// (those written twice, say) are missing from a stale count.
	wrote := 2 * sh.truthDeployments * replicas
	var written map[string]acceptance
	var failed, rewritten int
	_ = waitFor(ctx, time.Minute, "the exporter's timelines show every truth pod Ready", func() (bool, string, error) {
		seen.poll(ctx)
		scrapeProgress(ctx, exp, ksm, truthNS, prog)
		written, failed, rewritten = writer.results()
		at, _, _ := seen.snapshot()
		_, _, _, missing := readyErrors(written, at)
		prog.mu.Lock()
		observed := prog.truthReady
		prog.mu.Unlock()
		return len(written) >= wrote && missing == 0 && observed >= float64(wrote),
			fmt.Sprintf("%d written of %d, %d not in the timelines, %v ready startups counted", len(written), wrote, missing, observed), nil
	}, 2*time.Second, say)
	cancelRun()
	at, polls, pollErrs := seen.snapshot()
	late, early, roundTrip, missing := readyErrors(written, at)
	prog.mu.Lock()
	truthObserved, finalConverged := prog.truthReady, prog.converged
	prog.mu.Unlock()

	var checks []string
	if len(written) != wrote || failed > 0 {
		checks = append(checks, fmt.Sprintf("the truth writer made %d pods Ready (%d writes failed), want %d", len(written), failed, wrote))
	}
	if missing > 0 {
		checks = append(checks, fmt.Sprintf("%d truth pods Ready in the API have no ready entry in the exporter's timelines", missing))
	}
	if truthObserved != float64(wrote) {
		checks = append(checks, fmt.Sprintf("the exporter observed %v ready startups in the truth namespaces, the writer made %d pods Ready", truthObserved, wrote))
	}
	if finalConverged != float64(2*sh.deployments) {
		checks = append(checks, fmt.Sprintf("the exporter counted %v converged rollouts, the API shows %d", finalConverged, 2*sh.deployments))
	}

	res := result{
		cfg: cfg, sh: sh, began: began, loadBefore: loadBefore, loadAfter: loadAverage(),
		createTook: createTook, churnTook: churnTook, total: time.Since(began),
		exp: figs[exp], late: late, early: early, roundTrip: roundTrip, polls: polls, pollErrs: pollErrs,
		matched: len(late), written: len(written), rewritten: rewritten, checks: checks,
		exporterVersion: version(cfg.exporter, "--version"),
	}
	if ksm != nil {
		res.ksm = figs[ksm]
		res.ksmVersion = version(cfg.ksmBin, "version")
	} else {
		res.ksm = &figures{}
	}
	if err := restartAll(ctx, cfg, sb, scratch, targets, figs, sh.pods, say); err != nil {
		return fmt.Errorf("restart with %d pods present: %w", sh.pods, err)
	}
	text := res.markdown()
	fmt.Println()
	fmt.Print(text)
	if err := os.WriteFile(cfg.out, []byte(text), 0o644); err != nil {
		return err
	}
	say("wrote %s", cfg.out)
	if len(checks) > 0 {
		return fmt.Errorf("%d checks failed: %s", len(checks), strings.Join(checks, "; "))
	}
	_ = os.RemoveAll(scratch)
	return nil
}

func memLine(targets []*target, figs map[*target]*figures, pick func(*figures) point) string {
	var parts []string
	for _, t := range targets {
		p := pick(figs[t])
		parts = append(parts, fmt.Sprintf("%s RSS %s, heap in use %s", t.name, mib(p.mem.rss), mib(uint64(p.heapInuse))))
	}
	return strings.Join(parts, "; ")
}

func cpuAll(targets []*target) map[*target]float64 {
	out := map[*target]float64{}
	for _, t := range targets {
		out[t], _ = cpuSeconds(t.pid())
	}
	return out
}

func freeAddr() (string, error) {
	port, err := sandbox.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// startTargets starts the exporter (with --web.enable-pprof when the binary
// has it: a forced GC before each memory reading) and kube-state-metrics
// (all its default resources; its telemetry port serves pprof and its
// go_memstats), and waits until both answer.
func startTargets(ctx context.Context, cfg config, sb *sandbox.Sandbox, scratch string) (exp, ksm *target, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--kubeconfig=" + sb.Kubeconfig(""), "--web.listen-address=" + addr}
	pprof := hasFlag(cfg.exporter, "web.enable-pprof")
	if pprof {
		args = append(args, "--web.enable-pprof")
	}
	exp, err = startTarget("kube-convergence-exporter", cfg.exporter, args, filepath.Join(scratch, "exporter.log"))
	if err != nil {
		return nil, nil, err
	}
	exp.metricsURL = "http://" + addr + "/metrics"
	exp.memstatsURL = exp.metricsURL
	if pprof {
		exp.heapGCURL = "http://" + addr + "/debug/pprof/heap?gc=1"
		exp.pprofBase = "http://" + addr
	}
	if err := waitHTTP(ctx, "http://"+addr+"/readyz", exp); err != nil {
		return exp, nil, err
	}
	if cfg.ksmBin == "" {
		return exp, nil, nil
	}
	main, err := freeAddr()
	if err != nil {
		return exp, nil, err
	}
	tele, err := freeAddr()
	if err != nil {
		return exp, nil, err
	}
	mh, mp, _ := net.SplitHostPort(main)
	th, tp, _ := net.SplitHostPort(tele)
	ksm, err = startTarget("kube-state-metrics", cfg.ksmBin, []string{"--kubeconfig=" + sb.Kubeconfig(""),
		"--host=" + mh, "--port=" + mp, "--telemetry-host=" + th, "--telemetry-port=" + tp}, filepath.Join(scratch, "kube-state-metrics.log"))
	if err != nil {
		return exp, nil, err
	}
	ksm.metricsURL = "http://" + main + "/metrics"
	ksm.memstatsURL = "http://" + tele + "/metrics"
	ksm.heapGCURL = "http://" + tele + "/debug/pprof/heap?gc=1"
	ksm.pprofBase = "http://" + tele
	if err := waitHTTP(ctx, ksm.metricsURL, ksm); err != nil {
		return exp, ksm, err
	}
	return exp, ksm, nil
}

// restartAll stops the measured processes and starts new ones on the
// cluster as it is (N pods converged): the initial list's peak against the
// steady state, what a memory limit must allow at every restart. The
// exporter has listed everything once it is ready (its readiness waits
// for its informers' sync), kube-state-metrics once its kube_pod_info
// series number the pods.
func restartAll(ctx context.Context, cfg config, sb *sandbox.Sandbox, scratch string, old []*target, figs map[*target]*figures, pods int, say func(string, ...any)) error {
	for _, t := range old {
		t.stop()
	}
	dir := filepath.Join(scratch, "restart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	began := time.Now()
	exp, ksm, err := startTargets(ctx, cfg, sb, dir)
	defer func() {
		exp.stop()
		ksm.stop()
	}()
	if err != nil {
		return err
	}
	news := map[string]*target{exp.name: exp}
	if ksm != nil {
		news[ksm.name] = ksm
		if err := waitFor(ctx, 10*time.Minute, "kube-state-metrics listed every pod", func() (bool, string, error) {
			n := 0
			_, _, err := scrape(ctx, ksm.metricsURL, func(l string) {
				if strings.HasPrefix(l, "kube_pod_info{") {
					n++
				}
			})
			return n >= pods, fmt.Sprintf("%d of %d pods", n, pods), errors.Join(err, ksm.exited())
		}, time.Second, say); err != nil {
			return err
		}
	}
	took := time.Since(began)
	for _, t := range old {
		n := news[t.name]
		f := figs[t]
		p, err := n.measure(ctx)
		if err != nil {
			return err
		}
		m, err := readMemory(n.pid())
		if err != nil {
			return err
		}
		f.restart, f.restartPeak, f.restartTook = p, m.hwm, took
		say("restarted %s with %d pods present: peak RSS %s", t.name, pods, mib(m.hwm))
	}
	say("restarted, after a forced GC: %s", memLine(old, figs, func(f *figures) point { return f.restart }))
	return nil
}

func hasFlag(bin, flag string) bool {
	out, _ := exec.CommandContext(context.Background(), bin, "--help").CombinedOutput()
	return helpHas(string(out), flag)
}

// helpHas reports whether a kingpin --help lists the flag named name
// (without dashes): a boolean flag is listed as --[no-]name.
func helpHas(help, name string) bool {
	return strings.Contains(help, "--"+name) || strings.Contains(help, "--[no-]"+name)
}

func version(bin, arg string) string {
	out, err := exec.CommandContext(context.Background(), bin, arg).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

func waitHTTP(ctx context.Context, url string, t *target) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, _, err := scrape(ctx, url, nil)
		if err == nil {
			return nil
		}
		if e := t.exited(); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not answering %s: %w", t.name, url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func scrapeLoop(ctx context.Context, exp, ksm *target, truthNS []string, p *progress) {
	tick := time.NewTicker(scrapeInterval)
	defer tick.Stop()
	for {
		scrapeProgress(ctx, exp, ksm, truthNS, p)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scrapeProgress scrapes both processes once (unless a measured series
// holds one) and records what the run waits on.
func scrapeProgress(ctx context.Context, exp, ksm *target, truthNS []string, p *progress) {
	if exp.scrapeMu.TryLock() {
		var conv, truth float64
		_, _, err := scrape(ctx, exp.metricsURL, func(l string) {
			if v, ok := sample(l, "kube_convergence_rollouts_total", `outcome="converged"`); ok {
				conv += v
			}
			for _, ns := range truthNS {
				if v, ok := sample(l, "kube_convergence_pod_startup_seconds_count", `namespace="`+ns+`"`, `stage="ready"`); ok {
					truth += v
				}
			}
		})
		exp.scrapeMu.Unlock()
		if err == nil {
			p.mu.Lock()
			p.converged, p.truthReady, p.exporterScraped = conv, truth, true
			p.mu.Unlock()
		}
	}
	if ksm != nil && ksm.scrapeMu.TryLock() {
		var pods, ready int
		_, _, err := scrape(ctx, ksm.metricsURL, func(l string) {
			if _, ok := sample(l, "kube_pod_info"); ok {
				pods++
			}
			if v, ok := sample(l, "kube_pod_status_ready", `condition="true"`); ok && v == 1 {
				ready++
			}
		})
		ksm.scrapeMu.Unlock()
		if err == nil {
			p.mu.Lock()
			p.ksmPods, p.ksmReady, p.ksmScraped = pods, ready, true
			p.mu.Unlock()
		}
	}
}

// parallel runs fn(0..n-1) on workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, fn func(int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := fn(i); err != nil {
					errc <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

func create(ctx context.Context, c kubernetes.Interface, sh shape) error {
	regular, truth := sh.namespaceNames()
	nss := slices.Concat(regular, truth)
	if err := parallel(ctx, len(nss), 8, func(i int) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i]}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	refs := sh.deploymentRefs()
	return parallel(ctx, len(refs), 16, func(i int) error {
		r := refs[i]
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": r.name}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := c.CoreV1().Services(r.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("service %s/%s: %w", r.namespace, r.name, err)
		}
		ann := demo.Delays(podDelay, podDelay)
		if r.truth {
			ann = truthAnnotations()
		}
		d := demo.Deployment(r.namespace, r.name, replicas, ann)
		if r.truth {
			d.Spec.Template.Labels[truthLabel] = "true"
		}
		if _, err := c.AppsV1().Deployments(r.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("deployment %s/%s: %w", r.namespace, r.name, err)
		}
		return nil
	})
}

// rollAll changes every Deployment's pod template (an annotation): a full
// rolling update of every pod.
func rollAll(ctx context.Context, c kubernetes.Interface, sh shape) error {
	refs := sh.deploymentRefs()
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kce-scale/revision":"2"}}}}}`)
	return parallel(ctx, len(refs), 16, func(i int) error {
		r := refs[i]
		if _, err := c.AppsV1().Deployments(r.namespace).Patch(ctx, r.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("deployment %s/%s: %w", r.namespace, r.name, err)
		}
		return nil
	})
}

// convergedInAPI counts the Deployments converged in the API.
func convergedInAPI(ctx context.Context, c kubernetes.Interface) (int, error) {
	list, err := c.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if deploymentConverged(&list.Items[i]) {
			n++
		}
	}
	return n, nil
}

func deploymentConverged(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want
}

// waitConverged waits until every Deployment is converged in the API (its
// controller observed the template and every replica is updated and
// available, no old one left), the exporter counted phase × D converged
// rollouts, and kube-state-metrics (if running) shows exactly N pods, all
// Ready.
func waitConverged(ctx context.Context, c kubernetes.Interface, sh shape, p *progress, ksm bool, phase int, targets []*target, say func(string, ...any)) error {
	wantConverged := float64(phase * sh.deployments)
	return waitFor(ctx, sh.phaseTimeout(), fmt.Sprintf("phase %d converged", phase), func() (bool, string, error) {
		for _, t := range targets {
			if err := t.exited(); err != nil {
				return false, "", err
			}
		}
		n, err := convergedInAPI(ctx, c)
		if err != nil {
			return false, err.Error(), nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		state := fmt.Sprintf("API: %d of %d Deployments converged; exporter: %v of %v rollouts", n, sh.deployments, p.converged, wantConverged)
		ok := n == sh.deployments && p.exporterScraped && p.converged >= wantConverged
		if ksm {
			state += fmt.Sprintf("; kube-state-metrics: %d pods, %d Ready", p.ksmPods, p.ksmReady)
			ok = ok && p.ksmPods == sh.pods && p.ksmReady == sh.pods
		}
		return ok, state, nil
	}, 5*time.Second, say)
}

// waitFor polls cond every interval until it holds, it returns an error, or
// timeout passes; it prints the state every 30 s.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string, error), interval time.Duration, say func(string, ...any)) error {
	deadline := time.Now().Add(timeout)
	lastSaid := time.Now()
	for {
		ok, state, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Since(lastSaid) >= 30*time.Second {
			say("waiting for %s: %s", what, state)
			lastSaid = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, state)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), fmt.Errorf("waiting for %s: %s", what, state))
		case <-time.After(interval):
		}
	}
}
