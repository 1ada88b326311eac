// Command kube-convergence-exporter exports the convergence and health SLOs
// of Kubernetes controllers as Prometheus metrics. This file holds flags and
// wiring only; the work is in collectors/ and internal/.
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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	webflag "github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	kcecollectors "github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/admissionprobes"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/resources"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/serve"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracing"
)

// DefaultListenAddress: the 9100-9999 range of Prometheus' default port
// allocation list is fully allocated (since 2023), so the port is taken above
// it; see the README.
const DefaultListenAddress = ":10329"

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

// DefaultLivenessTimeout is the default of --web.liveness-timeout.
const DefaultLivenessTimeout = 5 * time.Minute

type serveFlags struct {
	web             *web.FlagConfig
	telemetryPath   string
	probeAddress    string
	livenessTimeout time.Duration
	disableExporter bool
	externalURL     string
	shutdownTimeout time.Duration
	enablePprof     bool
	memLimitRatio   float64
	kubeconfig      string
	qps             float32
	burst           int
	configFile      string
	stallThreshold  time.Duration
	syncTimeout     time.Duration
	tlRetained      int
	tlPerObject     int
	tlMaxEntries    int
	tlMaxBytes      units.Base2Bytes
	maxRequests     int
	shardIndex      int
	shardTotal      int
	nsInclude       string
	nsExclude       string
	log             promslog.Config
}

// runMain parses args and runs the chosen subcommand; it returns the exit code.
func runMain(args []string, stdout, stderr io.Writer) int {
	return runMainAt(args, stdout, stderr, time.Now)
}

// runMainAt is runMain with the clock of the commands that print times
// relative to now (explain), for tests.
func runMainAt(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	app := kingpin.New("kube-convergence-exporter", "Prometheus exporter for the convergence and health SLOs of Kubernetes controllers.")
	app.UsageTemplate(usageTemplate)
	app.Version(version.Print("kube-convergence-exporter"))
	app.HelpFlag.Short('h')
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	exitCode := -1
	app.Terminate(func(code int) { exitCode = code }) // --help, --version: return, do not os.Exit

	var f serveFlags
	serveCmd := app.Command("serve", "Watch the cluster and serve metrics (the default).").Default()
	f.web = webflag.AddFlags(serveCmd, DefaultListenAddress)
	serveCmd.Flag("web.telemetry-path", "Path under which to expose metrics: absolute, not /, /healthz or /readyz.").Default("/metrics").StringVar(&f.telemetryPath)
	serveCmd.Flag("web.probe-address", "Address of a plain-HTTP listener that serves only /healthz and /readyz, without the TLS and basic auth of --web.config.file, for the kubelet's probes (e.g. :10330). Empty: the probes are served on the main listener only.").Default("").StringVar(&f.probeAddress)
	serveCmd.Flag("web.liveness-timeout", "/healthz fails when an informer event has waited this long to be handled, or a collector's handler has been running this long (the process is wedged). A quiet cluster or an unreachable API server never fails it.").Default(DefaultLivenessTimeout.String()).DurationVar(&f.livenessTimeout)
	serveCmd.Flag("web.disable-exporter-metrics", "Exclude the exporter's own process and Go runtime metrics (process_*, go_*, promhttp_*).").BoolVar(&f.disableExporter)
	serveCmd.Flag("web.external-url", "URL under which the exporter is reachable by people (exposed as kube_convergence_web_info{external_url} for dashboard and alert links).").Default("").StringVar(&f.externalURL)
	serveCmd.Flag("web.shutdown-timeout", "How long to drain HTTP connections on SIGINT/SIGTERM.").Default("10s").DurationVar(&f.shutdownTimeout)
	serveCmd.Flag("web.enable-pprof", "Serve Go's net/http/pprof profiles under /debug/pprof/ on the main listener, behind the TLS and basic auth of --web.config.file like /metrics.").BoolVar(&f.enablePprof)
	serveCmd.Flag("auto-gomemlimit.ratio", "Set the Go runtime's memory limit to this fraction of the container's cgroup memory limit at start, so the garbage collector works harder before the OOM killer strikes; in [0, 1], 0 turns it off. GOMEMLIMIT in the environment wins.").Default(strconv.FormatFloat(DefaultMemLimitRatio, 'g', -1, 64)).Float64Var(&f.memLimitRatio)
	serveCmd.Flag("kubeconfig", "Path to a kubeconfig. Without it: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config.").Default("").StringVar(&f.kubeconfig)
	serveCmd.Flag("kube.qps", "Queries per second to the API server.").Default("20").Float32Var(&f.qps)
	serveCmd.Flag("kube.burst", "Burst of queries to the API server.").Default("40").IntVar(&f.burst)
	serveCmd.Flag("config.file", "Optional YAML file for per-collector settings (which collectors run, stall thresholds, label policy). Unknown keys are errors.").Default("").StringVar(&f.configFile)
	serveCmd.Flag("stall.threshold", "Age after which an unconverged object is reported as stalled (per-kind overrides in --config.file).").Default(config.DefaultStallThreshold.String()).DurationVar(&f.stallThreshold)
	serveCmd.Flag("resources.sync-timeout", "How long a tracked custom resource whose list fails (a conversion webhook down, a 5xx) keeps /readyz false before it is left out of readiness, until its list succeeds.").Default(resources.DefaultSyncTimeout.String()).DurationVar(&f.syncTimeout)
	serveCmd.Flag("timelines.retained", "Closed rollout and custom-resource episodes whose timelines are kept for /api/v1/timelines, besides the open ones; the oldest closed is evicted first (kube_convergence_timeline_episodes_evicted_total).").Default(strconv.Itoa(timeline.DefaultRetained)).IntVar(&f.tlRetained)
	serveCmd.Flag("timelines.retained-per-object", "Closed episodes of one object whose timelines are kept; when one more closes, that object's oldest goes, so one object rolled out every few seconds cannot push the others' out.").Default(strconv.Itoa(timeline.DefaultRetainedPerObject)).IntVar(&f.tlPerObject)
	serveCmd.Flag("timelines.max-bytes", "Memory the timeline store may hold, open and closed episodes together, as it counts it (kube_convergence_timeline_bytes): past it the oldest closed episodes go, then the largest open ones keep only their first and last entries. Units KiB, MiB, GiB.").Default(units.Base2Bytes(timeline.DefaultMaxBytes).String()).SetValue(&bytesFlag{"timelines.max-bytes", &f.tlMaxBytes})
	serveCmd.Flag("web.max-requests", "Concurrent requests served on /metrics, and apart on the timeline API and page, beyond which a request gets 503 at once; 0: no limit.").Default(strconv.Itoa(serve.DefaultMaxRequests)).IntVar(&f.maxRequests)
	serveCmd.Flag("timelines.max-entries", "Entries kept per episode timeline: the first and the last half; the ones in between are dropped and counted (kube_convergence_timeline_entries_dropped_total).").Default(strconv.Itoa(timeline.DefaultMaxEntries)).IntVar(&f.tlMaxEntries)
	serveCmd.Flag("shard.index", "This process's shard of the namespaces, from 0 (see --shard.total and docs/sharding.md).").Default("0").IntVar(&f.shardIndex)
	serveCmd.Flag("shard.total", "Number of shards the namespaces are split among: a namespace belongs to shard fnv32a(name) mod total; cluster-scoped subjects (webhook configurations, admission probes, cluster-scoped custom resources) to shard 0. 1: no sharding.").Default("1").IntVar(&f.shardTotal)
	serveCmd.Flag("kube.namespaces", "Comma-separated namespaces to read, each through watches of its own (one per namespace and resource: the API server sends nothing else; see docs/sharding.md). Empty: all.").Default("").StringVar(&f.nsInclude)
	serveCmd.Flag("kube.namespaces-exclude", "Comma-separated namespaces whose objects are dropped as they arrive (still sent by the API server and decoded; see docs/sharding.md). Empty: none.").Default("").StringVar(&f.nsExclude)
	promslogflag.AddFlags(app, &f.log)
	sloDispatch := addSLOCommands(app)
	rbacDispatch := addRBACCommand(app)
	reportDispatch := addReportCommand(app)
	explainDispatch := addExplainCommand(app, now)

	cmd, err := app.Parse(args)
	if exitCode >= 0 {
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stderr, "kube-convergence-exporter: %v (see --help)\n", err)
		return 2
	}
	if handled, code := sloDispatch(cmd, stdout, stderr); handled {
		return code
	}
	if handled, code := rbacDispatch(cmd, stdout, stderr); handled {
		return code
	}
	if handled, code := reportDispatch(cmd, stdout, stderr); handled {
		return code
	}
	if handled, code := explainDispatch(cmd, stdout, stderr); handled {
		return code
	}
	if err := f.validate(); err != nil {
		// One line per bad flag, like kingpin's own parse errors.
		msg := strings.ReplaceAll(err.Error(), "\n", "\nkube-convergence-exporter: ")
		fmt.Fprintf(stderr, "kube-convergence-exporter: %s (see --help)\n", msg)
		return 2
	}
	f.log.Writer = stderr
	logger := promslog.New(&f.log)
	if err := serveMain(f, logger); err != nil {
		logger.Error("exiting", "err", err)
		return 1
	}
	return 0
}

func serveMain(f serveFlags, logger *slog.Logger) error {
	// One logging pipeline: client-go logs through klog, exporter-toolkit
	// and our code through slog; route klog into the same handler.
	klog.SetSlogLogger(logger)
	setMemoryLimit(f.memLimitRatio, memlimit.FromCgroup, logger)

	cfg := config.Default()
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile); err != nil {
			return err
		}
		if err := checkShardConfig(f.shardTotal, cfg, f.configFile); err != nil {
			return err
		}
	}
	scope := f.scope()
	restCfg, source, err := kubeConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = f.qps, f.burst
	restCfg.UserAgent = "kube-convergence-exporter/" + version.Version
	// Protobuf for built-in types: one watch stream decodes about 24.7k
	// pods/s in protobuf against 7.9k in JSON at 10 KB per pod
	// (kubernetes/kubernetes#138841).
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client from %s: %w", source, err)
	}
	logger.Info("starting kube-convergence-exporter", "version", version.Info(), "build_context", version.BuildContext(), "kubeconfig", source, "api_server", restCfg.Host)

	reg := prometheus.NewRegistry()
	wrap, err := serve.Register(reg, serve.RegisterOptions{ExternalURL: f.externalURL, Watch: cfg.Enabled(config.Watch), ShardIndex: scope.Index, ShardTotal: scope.Total})
	if err != nil {
		return err
	}
	if !f.disableExporter {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}

	factory := informers.New(client, wrap, logger)
	factory.SetScope(scope)
	if scope.Sharded() {
		logger.Info("sharded: reporting on the namespaces of this shard", "shard", scope.Index, "total_shards", scope.Total, "cluster_scoped", scope.ClusterScoped())
	}
	if len(cfg.Resources) > 0 || len(cfg.AdmissionProbes) > 0 {
		// Custom resources are served as JSON only; the dynamic client
		// asks for JSON whatever restCfg says. Admission probes send their
		// inline manifests through it.
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			return fmt.Errorf("dynamic client from %s: %w", source, err)
		}
		factory.SetDynamic(dyn)
	}
	// One timeline store: fed by the collectors, read by the timeline API
	// and by the tracer (Warning Events as span events).
	timelines := timeline.NewStore(timeline.Config{Retained: f.tlRetained, RetainedPerObject: f.tlPerObject, MaxEntries: f.tlMaxEntries, MaxBytes: int64(f.tlMaxBytes)})
	collectorOpts := all.Options{Config: cfg, StallThreshold: f.stallThreshold, ResourceSyncTimeout: f.syncTimeout, Logger: logger, RESTConfig: restCfg, Timelines: timelines}
	var tracer *tracing.Tracer
	if cfg.Tracing.Enabled() {
		// Built before anything runs: bad TLS files fail the start.
		if tracer, err = tracing.New(context.Background(), tracing.Options{Config: cfg.Tracing, Version: version.Version, Logger: logger, Events: timelines}); err != nil {
			return fmt.Errorf("config file %s: %w", f.configFile, err)
		}
		collectorOpts.EpisodeSinks = append(collectorOpts.EpisodeSinks, tracer)
		collectorOpts.TraceIDs = tracer.ExemplarTraceID
		logger.Info("tracing rollout episodes", "endpoint", cfg.Tracing.Endpoint, "client_type", cfg.Tracing.Client())
	}
	var enabled []kcecollectors.Collector
	for _, c := range all.Collectors(collectorOpts) {
		if !cfg.Enabled(c.Name()) {
			continue
		}
		if c.Name() == admissionprobes.Name && !scope.ClusterScoped() {
			// Probes are cluster-scoped subjects: shard 0 sends them,
			// so that every probe is sent and counted once.
			logger.Info("admission probes run on shard 0 only", "shard", scope.Index)
			continue
		}
		enabled = append(enabled, c)
	}
	exp, err := serve.New(client, restCfg.Host, factory, enabled, reg, logger)
	if err != nil {
		return err
	}

	var promhttpReg prometheus.Registerer = reg
	if f.disableExporter {
		promhttpReg = prometheus.NewRegistry() // promhttp_* are exporter metrics too
	}
	handlerOpts := serve.HandlerOptions{
		TelemetryPath: f.telemetryPath,
		Gatherer:      reg,
		Registerer:    promhttpReg,
		Liveness:      func() (bool, string) { return exp.Liveness(time.Now(), f.livenessTimeout) },
		Readiness:     exp.Readiness,
		Logger:        logger,
		// The timeline store the collectors feed.
		Timelines:   timelineweb.Options{Source: timelines, Now: time.Now, ExternalURL: f.externalURL},
		Pprof:       f.enablePprof,
		MaxRequests: f.maxRequests,
	}
	for _, r := range cfg.Resources {
		handlerOpts.Timelines.CustomResources = append(handlerOpts.Timelines.CustomResources, r.String())
	}
	handler, err := serve.Handler(handlerOpts)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    serve.MaxHeaderBytes,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // a scrape of a large cluster must fit
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
	}

	var g run.Group
	g.Add(run.SignalHandler(context.Background(), os.Interrupt, syscall.SIGTERM))
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return exp.Run(ctx) }, func(error) { cancel() })
	}
	if tracer != nil {
		// Stopped with the rest; it flushes what is queued (bounded) first.
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return tracer.Run(ctx) }, func(error) { cancel() })
	}
	g.Add(func() error {
		if err := web.ListenAndServe(srv, f.web, logger); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("web server: %w", err)
		}
		return nil
	}, func(error) {
		ctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("HTTP drain did not finish in time", "timeout", f.shutdownTimeout, "err", err)
		}
	})
	if f.probeAddress != "" {
		// Bound here, before anything runs, so that a taken port fails the
		// start with a clear error instead of a half-running process.
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", f.probeAddress)
		if err != nil {
			return fmt.Errorf("--web.probe-address: %w", err)
		}
		probeSrv := &http.Server{
			Handler:           serve.ProbeHandler(handlerOpts),
			ReadHeaderTimeout: 5 * time.Second,
			MaxHeaderBytes:    serve.MaxHeaderBytes,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       60 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
		}
		g.Add(func() error {
			logger.Info("serving /healthz and /readyz over plain HTTP", "address", ln.Addr().String())
			if err := probeSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("probe server: %w", err)
			}
			return nil
		}, func(error) {
			ctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
			defer cancel()
			_ = probeSrv.Shutdown(ctx) // probes are short; nothing to drain worth a log line
		})
	}
	err = g.Run()
	// SignalError has a value receiver but is returned as a pointer: use
	// errors.As with a pointer target (the library's documented caveat).
	var sig *run.SignalError
	if errors.As(err, &sig) {
		logger.Info("shutting down", "signal", sig.Signal.String())
		return nil
	}
	return err
}

// kubeConfig resolves the client configuration the way client-go tools do:
// the flag, then $KUBECONFIG, then the in-cluster service account, then
// ~/.kube/config. It returns where the configuration came from.
func kubeConfig(path string) (*rest.Config, string, error) {
	load := func(rules *clientcmd.ClientConfigLoadingRules, source string) (*rest.Config, string, error) {
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %w", source, err)
		}
		return c, source, nil
	}
	if path != "" {
		return load(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, path)
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return load(clientcmd.NewDefaultClientConfigLoadingRules(), "$KUBECONFIG="+env)
	}
	if c, err := rest.InClusterConfig(); err == nil {
		return c, "in-cluster service account", nil
	} else if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	home := filepath.Join(clientcmd.RecommendedConfigDir, clientcmd.RecommendedFileName)
	return load(&clientcmd.ClientConfigLoadingRules{ExplicitPath: home}, home)
}
