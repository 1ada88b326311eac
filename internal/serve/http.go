package serve

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/listwatch"
)

// RegisterOptions configure Register.
type RegisterOptions struct {
	// ExternalURL is --web.external-url.
	ExternalURL string
	// Watch enables the list/watch metrics (collector "watch").
	Watch bool
}

// Register registers the exporter's info metrics and, with o.Watch, the
// list/watch metrics on reg; it returns the wrapper that instruments every
// informer's list and watch (nil without o.Watch). Collector and
// self-observability metrics are registered by New.
func Register(reg prometheus.Registerer, o RegisterOptions) (informers.Wrapper, error) {
	webInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_convergence_web_info",
		Help: "Always 1; external_url is --web.external-url, so dashboards and rule annotations can link to the exporter.",
	}, []string{"external_url"})
	webInfo.WithLabelValues(o.ExternalURL).Set(1)
	for _, c := range []prometheus.Collector{versioncollector.NewCollector("kube_convergence"), webInfo} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register info metrics: %w", err)
		}
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
	Readiness     func() (bool, string)
	Logger        *slog.Logger
}

// Handler serves the landing page, the metrics, /healthz and /readyz.
func Handler(o HandlerOptions) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle(o.TelemetryPath, promhttp.InstrumentMetricHandler(o.Registerer, promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(o.Logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		// Exposes promhttp_metric_handler_errors_total, which the bundled
		// KubeConvergenceExporterScrapeErrors alert reads.
		Registry:          o.Registerer,
		EnableOpenMetrics: true, // exemplars are only exposed in OpenMetrics and protobuf
	})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, body := o.Readiness()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, body)
	})
	if o.TelemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "kube-convergence-exporter",
			Description: "Convergence and health SLOs of Kubernetes controllers: how long a spec write takes to become a converged workload serving traffic, stage by stage, and the health of the watch machinery under it.",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: o.TelemetryPath, Text: "Metrics"},
				{Address: "/healthz", Text: "Health (alive)"},
				{Address: "/readyz", Text: "Readiness (informers synced, collectors disabled by RBAC)"},
			},
		})
		if err != nil {
			return nil, fmt.Errorf("landing page: %w", err)
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}
