package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/listwatch"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

var webInfoFamily = metric.Family{
	Name: "kube_convergence_web_info", Type: metric.Gauge,
	Help:   "Always 1; external_url is --web.external-url, so dashboards and rule annotations can link to the exporter.",
	Labels: []string{"external_url"},
}

var shardInfoFamily = metric.Family{
	Name: "kube_convergence_shard_info", Type: metric.Gauge,
	Help:   "Always 1; shard is --shard.index of total_shards (--shard.total) namespace shards.",
	Labels: []string{"shard", "total_shards"},
}

// buildInfo is the family client_golang's version collector builds, with
// a help of one sentence: the same name and constant labels, read from
// prometheus/common/version (set by the Makefile's -ldflags).
func buildInfo() metric.Family {
	return metric.Family{
		Name: "kube_convergence_build_info", Type: metric.Gauge,
		Help: "Always 1, labeled with the version, revision, branch, Go version, OS, architecture and build tags of the exporter.",
		ConstLabels: prometheus.Labels{
			"version":   version.Version,
			"revision":  version.GetRevision(),
			"branch":    version.Branch,
			"goversion": version.GoVersion,
			"goos":      version.GoOS,
			"goarch":    version.GoArch,
			"tags":      version.GetTags(),
		},
	}
}

// RegisterOptions configure Register.
type RegisterOptions struct {
	// ExternalURL is --web.external-url.
	ExternalURL string
	// Watch enables the list/watch metrics (collector "watch").
	Watch bool
	// ShardIndex and ShardTotal are --shard.index and --shard.total
	// (ShardTotal 0: 1, unsharded).
	ShardIndex, ShardTotal int
}

// Register registers the exporter's info metrics and, with o.Watch, the
// list/watch metrics on reg; it returns the wrapper that instruments every
// informer's list and watch (nil without o.Watch). Collector and
// self-observability metrics are registered by New.
func Register(reg prometheus.Registerer, o RegisterOptions) (informers.Wrapper, error) {
	webInfo := webInfoFamily.NewGaugeVec()
	webInfo.WithLabelValues(o.ExternalURL).Set(1)
	shardInfo := shardInfoFamily.NewGaugeVec()
	shardInfo.WithLabelValues(strconv.Itoa(o.ShardIndex), strconv.Itoa(max(o.ShardTotal, 1))).Set(1)
	build := buildInfo()
	if err := metric.Register(reg, metric.Declare(build.NewGaugeFunc(func() float64 { return 1 }), build), metric.Declare(webInfo, webInfoFamily), metric.Declare(shardInfo, shardInfoFamily)); err != nil {
		return nil, fmt.Errorf("register info metrics: %w", err)
	}
	if !o.Watch {
		// The list/watch layer also stamps every object with its receive
		// time and list-cycle mark, which all trackers read: keep it, with
		// its metrics unregistered.
		return listwatch.NewMetrics(nil).Wrap, nil
	}
	return listwatch.NewMetrics(reg).Wrap, nil
}

// HandlerOptions configure the HTTP endpoints.
type HandlerOptions struct {
	TelemetryPath string
	Gatherer      prometheus.Gatherer
	Registerer    prometheus.Registerer // for promhttp's own scrape metrics
	// Liveness answers /healthz: false only when the process is wedged.
	Liveness func() (bool, string)
	// Readiness answers /readyz.
	Readiness func() (bool, string)
	Logger    *slog.Logger
	// Timelines serves /api/v1/timelines and /timelines when its Source
	// (the timeline store) is set.
	Timelines timelineweb.Options
	// Pprof serves net/http/pprof under PprofPath (--web.enable-pprof).
	Pprof bool
	// MaxRequests is --web.max-requests: the requests /metrics serves at
	// once (one more gets 503), and apart the timeline API and page
	// (Timelines.MaxRequests, set from it). 0: no bound.
	MaxRequests int
}

// DefaultMaxRequests is --web.max-requests' default, node_exporter's.
const DefaultMaxRequests = 40

// MaxHeaderBytes bounds the request line and headers of the main and probe
// listeners (net/http's default is 1 MiB): a timeline query is at most
// 4 KiB (timelineweb.MaxQueryBytes), a bearer token or basic auth a few.
const MaxHeaderBytes = 64 << 10

// Paths of the probes, on the main listener and on the probe listener.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// PprofPath is where --web.enable-pprof serves net/http/pprof.
const PprofPath = "/debug/pprof/"

// LandingStylePath serves the landing page's stylesheet (landingPage).
const LandingStylePath = "/landing.css"

// ContentSecurityPolicy is sent on every response: the exporter serves
// nothing that needs another origin, an inline script or an inline style,
// so a string from the cluster that slipped through escaping could still
// neither run nor load anything. No origin may frame a page
// (frame-ancestors, clickjacking), no <base> may redirect its relative
// links, and no form may submit anywhere: the exporter has none (the
// timelines page filters with links).
const ContentSecurityPolicy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// FrameOptions is the X-Frame-Options of every response: no page of the
// exporter may be framed (frame-ancestors' older twin, for browsers
// without CSP level 2).
const FrameOptions = "DENY"

// ValidateTelemetryPath checks --web.telemetry-path. http.ServeMux panics
// on an empty pattern, on one without a leading "/" and on a second
// registration of /healthz or /readyz, so a bad value must be caught before
// Handler: the process would otherwise exit with a goroutine dump.
func ValidateTelemetryPath(p string) error {
	const want = "want an absolute path such as /metrics"
	switch {
	case p == "":
		return fmt.Errorf("empty; %s", want)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is not absolute; %s", p, want)
	case p == "/":
		return fmt.Errorf(`"/" is the landing page; %s`, want)
	case p == HealthzPath || p == ReadyzPath:
		return fmt.Errorf("%q is the %s probe; %s", p, probeName(p), want)
	case p == LandingStylePath || timelineweb.Reserved(p) || strings.HasPrefix(p+"/", PprofPath):
		return fmt.Errorf("%q is taken by the landing page, the timelines or pprof; %s", p, want)
	case strings.IndexFunc(p, func(r rune) bool { return !pathChar(r) }) >= 0:
		// ServeMux reads "{...}" as a wildcard, a space as a method
		// separator and "%" as an escape; none belongs in a scrape path.
		return fmt.Errorf("%q may only contain letters, digits and / - . _ ~", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not a clean path (no trailing /, //, . or ..); %s", p, want)
	}
	return nil
}

func pathChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/-._~", r)
}

func probeName(p string) string {
	if p == HealthzPath {
		return "liveness"
	}
	return "readiness"
}

// Handler serves the landing page, the metrics, /healthz, /readyz,
// with o.Timelines.Source the timelines API and page, and with o.Pprof
// net/http/pprof.
func Handler(o HandlerOptions) (http.Handler, error) {
	if err := ValidateTelemetryPath(o.TelemetryPath); err != nil {
		return nil, fmt.Errorf("telemetry path: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(o.TelemetryPath, promhttp.InstrumentMetricHandler(o.Registerer, promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(o.Logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		// Exposes promhttp_metric_handler_errors_total, which the bundled
		// KubeConvergenceExporterScrapeErrors alert reads.
		Registry:            o.Registerer,
		EnableOpenMetrics:   true, // exemplars are only exposed in OpenMetrics and protobuf
		MaxRequestsInFlight: o.MaxRequests,
	})))
	addProbes(mux, o)
	links := []web.LandingLinks{{Address: o.TelemetryPath, Text: "Metrics"}}
	if o.Timelines.Source != nil {
		o.Timelines.MaxRequests = o.MaxRequests
		timelineweb.Register(mux, o.Timelines)
		links = append(links, web.LandingLinks{Address: timelineweb.PagePath, Text: "Timelines (the slowest and stalled rollouts, stage by stage, with their evidence; JSON at " + timelineweb.APIPath + ")"})
	}
	links = append(links,
		web.LandingLinks{Address: HealthzPath, Text: "Liveness (fails only when informer events stay unhandled)"},
		web.LandingLinks{Address: ReadyzPath, Text: "Readiness (informers synced, collectors disabled by RBAC)"},
	)
	profiling := "false"
	if o.Pprof {
		addPprof(mux)
		profiling = "true"
	}
	// The links carry the path of the external URL, as the timelines
	// page's do: a reverse proxy that strips it serves the exporter.
	prefix := timelineweb.PathPrefix(o.Timelines.ExternalURL)
	page, css, err := landingPage(prefix, web.LandingConfig{
		RoutePrefix: prefix + "/",
		// Links to /debug/pprof only when it is served.
		Profiling:   profiling,
		Name:        "kube-convergence-exporter",
		Description: "Convergence and health SLOs of Kubernetes controllers: how long a spec write takes to become a converged workload serving traffic, stage by stage, and the health of the watch machinery under it.",
		Version:     version.Info(),
		Links:       links,
	})
	if err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}
	mux.Handle("/", page)
	mux.HandleFunc("GET "+LandingStylePath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(css)
	})
	return withCSP(mux), nil
}

// addPprof serves net/http/pprof's index and profiles under PprofPath.
// They are registered on mux, not on http.DefaultServeMux (which importing
// net/http/pprof fills), so they sit behind the listener's
// --web.config.file TLS and basic auth like /metrics, and are absent
// without --web.enable-pprof. Index serves the named profiles (heap,
// allocs, goroutine, block, mutex, threadcreate); profile (CPU), trace,
// cmdline and symbol have handlers of their own.
func addPprof(mux *http.ServeMux) {
	mux.HandleFunc(PprofPath, pprof.Index)
	mux.HandleFunc(PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(PprofPath+"profile", pprof.Profile)
	mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(PprofPath+"trace", pprof.Trace)
}

// withCSP sets the Content-Security-Policy and X-Frame-Options of every
// response of h.
func withCSP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		w.Header().Set("X-Frame-Options", FrameOptions)
		h.ServeHTTP(w, r)
	})
}

// landingPage is exporter-toolkit's landing page with its inline <style>
// moved to a stylesheet of its own at prefix+LandingStylePath: the
// Content-Security-Policy blocks inline styles (the page would render
// unstyled, and browsers log a violation). The page is served at "/";
// prefix is the path its links carry (c.RoutePrefix).
func landingPage(prefix string, c web.LandingConfig) (http.Handler, []byte, error) {
	h, err := web.NewLandingPage(c)
	if err != nil {
		return nil, nil, err
	}
	// exporter-toolkit's handler answers at its route prefix only, which
	// it compares with the request's decoded path.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	req.URL.Path = c.RoutePrefix
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	const open, end = "<style>", "</style>"
	i := bytes.Index(rec.body.Bytes(), []byte(open))
	j := bytes.Index(rec.body.Bytes(), []byte(end))
	if i < 0 || j < i {
		return nil, nil, errors.New("exporter-toolkit's landing page has no <style> element to move")
	}
	body := rec.body.Bytes()
	css := bytes.Clone(body[i+len(open) : j])
	page := slices.Concat(body[:i], []byte(`<link rel="stylesheet" href="`+prefix+LandingStylePath+`">`), body[j+len(end):])
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	}), css, nil
}

// recorder keeps what a handler writes (the landing page, rendered once).
type recorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(int)             {}

// ProbeHandler serves only /healthz and /readyz, for --web.probe-address:
// the kubelet's HTTP probes can neither present client certificates nor
// basic-auth credentials, so when --web.config.file protects the main
// listener the probes need a listener of their own. Everything else is 404,
// so the probe port exposes no metrics; and its bodies say only the
// verdict (the main listener's name the API server, its error and each
// collector's state: cluster data, behind --web.config.file there).
func ProbeHandler(o HandlerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(HealthzPath, probe(verdictOnly(o.Liveness, "ok\n", "wedged: details on /healthz of the main listener\n")))
	mux.HandleFunc(ReadyzPath, probe(verdictOnly(o.Readiness, "ready\n", "not ready: details on /readyz of the main listener\n")))
	return withCSP(mux)
}

// verdictOnly is check with its body replaced by a constant.
func verdictOnly(check func() (bool, string), yes, no string) func() (bool, string) {
	return func() (bool, string) {
		if ok, _ := check(); ok {
			return true, yes
		}
		return false, no
	}
}

func addProbes(mux *http.ServeMux, o HandlerOptions) {
	mux.HandleFunc(HealthzPath, probe(o.Liveness))
	mux.HandleFunc(ReadyzPath, probe(o.Readiness))
}

func probe(check func() (bool, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ok, body := check()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, body)
	}
}
