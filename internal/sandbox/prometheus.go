package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// Dir holds the config, the TSDB and the log. Default: a fresh temp dir,
	// removed by Stop.
	Dir string
	// BinDir holds the prometheus binary; default as Options.BinDir.
	BinDir string
	// ScrapeInterval and EvaluationInterval default to 1 s, so a test sees a
	// new sample or a rule result within about a second.
	ScrapeInterval, EvaluationInterval time.Duration
	// Targets are scraped, one job each.
	Targets []ScrapeTarget
	// RuleFiles are loaded as they are (paths are made absolute).
	RuleFiles []string
	// AlertmanagerURL, e.g. Alertmanager.URL(), receives firing alerts.
	AlertmanagerURL string
	// ExtraArgs are appended to the command line, e.g.
	// "--enable-feature=promql-experimental-functions".
	ExtraArgs []string
}

// ScrapeTarget is one scrape job with one static target.
type ScrapeTarget struct {
	Job string
	// Addr is the static target, host:port. It may be empty when Extra
	// holds a service discovery config (file_sd_configs) instead.
	Addr        string
	MetricsPath string // default /metrics
	Scheme      string // default http
	// Extra holds further scrape_config fields, written as given, e.g.
	// {"scrape_native_histograms": true, "always_scrape_classic_histograms": true},
	// or "honor_labels" and "relabel_configs".
	Extra map[string]any
	// Labels are the static target's labels, the way service discovery
	// attaches them: __meta_kubernetes_namespace and the like, for
	// relabel_configs in Extra to turn into target labels.
	Labels map[string]string
}

// Prometheus is a running Prometheus server on loopback.
type Prometheus struct {
	url    string
	dir    string
	ownDir bool
	sp     *spawner
	proc   *process
	client *http.Client

	stopOnce sync.Once
	stopErr  error
}

// StartPrometheus starts Prometheus on a free loopback port with its TSDB in
// Dir and waits until /-/ready answers.
func StartPrometheus(ctx context.Context, o PrometheusOptions) (_ *Prometheus, err error) {
	bin, dir, ownDir, err := prepareService("prometheus", o.BinDir, o.Dir, "kce-prometheus-")
	if err != nil {
		return nil, err
	}
	p := &Prometheus{dir: dir, ownDir: ownDir, sp: newSpawner(), client: &http.Client{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop())
		}
	}()
	cfgPath := filepath.Join(dir, "prometheus.json")
	cfg, err := prometheusConfig(o)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("prometheus: writing config: %w", err)
	}
	p.proc, p.url, err = launchService(ctx, p.sp, "prometheus", bin, filepath.Join(dir, "prometheus.log"), func(addr string) []string {
		return append([]string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr,
			// The scrape manager applies discovered targets at most every
			// 5 s by default, so a fresh server's first scrape came 6.5 s
			// after start here; 1 s brings it to about 2 s.
			"--scrape.discovery-reload-interval=1s",
			// A rule can fire before the notifier has discovered
			// Alertmanager; the alert is then dropped and, by default, sent
			// again only after 1 m (seen: 61 s to the webhook). Resending
			// every evaluation is cheap on loopback; Alertmanager
			// deduplicates.
			"--rules.alert.resend-delay=" + model.Duration(cmp.Or(o.EvaluationInterval, time.Second)).String(),
		}, o.ExtraArgs...)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// prometheusConfig renders the configuration as JSON, which Prometheus's
// YAML parser reads, so that no value needs YAML quoting.
func prometheusConfig(o PrometheusOptions) ([]byte, error) {
	scrape := cmp.Or(o.ScrapeInterval, time.Second)
	eval := cmp.Or(o.EvaluationInterval, time.Second)
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval": model.Duration(scrape).String(),
			// Prometheus rejects a scrape timeout longer than the interval,
			// and its default timeout is 10 s.
			"scrape_timeout":      model.Duration(scrape).String(),
			"evaluation_interval": model.Duration(eval).String(),
		},
	}
	var jobs []map[string]any
	for _, t := range o.Targets {
		_, sd := t.Extra["file_sd_configs"]
		if t.Job == "" || (t.Addr == "" && !sd) {
			return nil, fmt.Errorf("prometheus: scrape target needs Job and Addr (or file_sd_configs in Extra): %+v", t)
		}
		job := map[string]any{}
		for k, v := range t.Extra {
			job[k] = v
		}
		job["job_name"] = t.Job
		job["metrics_path"] = cmp.Or(t.MetricsPath, "/metrics")
		job["scheme"] = cmp.Or(t.Scheme, "http")
		if t.Addr != "" {
			job["static_configs"] = []staticConfig{{Targets: []string{t.Addr}, Labels: t.Labels}}
		}
		jobs = append(jobs, job)
	}
	cfg["scrape_configs"] = jobs
	var rules []string
	for _, f := range o.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("prometheus: rule file %s: %w", f, err)
		}
		rules = append(rules, abs)
	}
	cfg["rule_files"] = rules
	if o.AlertmanagerURL != "" {
		u, err := url.Parse(o.AlertmanagerURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("prometheus: bad AlertmanagerURL %q", o.AlertmanagerURL)
		}
		cfg["alerting"] = map[string]any{
			"alertmanagers": []map[string]any{{
				"scheme":         cmp.Or(u.Scheme, "http"),
				"path_prefix":    cmp.Or(u.Path, "/"),
				"static_configs": []staticConfig{{Targets: []string{u.Host}}},
			}},
		}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("prometheus: rendering config: %w", err)
	}
	return b, nil
}

// URL is Prometheus's base URL, http://127.0.0.1:PORT.
func (p *Prometheus) URL() string { return p.url }

// Dir is the directory that holds config, data and log.
func (p *Prometheus) Dir() string { return p.dir }

// Stop stops Prometheus by its pid (SIGTERM, SIGKILL after 10 s) and removes
// Dir if StartPrometheus created it. It is idempotent.
func (p *Prometheus) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = stopService("prometheus", p.proc, p.sp, p.dir, p.ownDir) })
	return p.stopErr
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

func (p *Prometheus) api(ctx context.Context, path string, params url.Values) (queryData, error) {
	var qd queryData
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+path, strings.NewReader(params.Encode()))
	if err != nil {
		return qd, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.client.Do(req)
	if err != nil {
		return qd, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return qd, fmt.Errorf("reading %s: %w", path, err)
	}
	var ar apiResponse
	if err := json.Unmarshal(b, &ar); err != nil {
		return qd, fmt.Errorf("%s: %s: decoding %.200q: %w", path, resp.Status, b, err)
	}
	if ar.Status != "success" {
		return qd, fmt.Errorf("%s: %s: %s: %s", path, resp.Status, ar.ErrorType, ar.Error)
	}
	if err := json.Unmarshal(ar.Data, &qd); err != nil {
		return qd, fmt.Errorf("%s: decoding data: %w", path, err)
	}
	return qd, nil
}

// Query runs an instant query at the current time. A scalar result comes
// back as a one-sample vector without labels.
func (p *Prometheus) Query(ctx context.Context, q string) (model.Vector, error) {
	qd, err := p.api(ctx, "/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, fmt.Errorf("prometheus: query %q: %w", q, err)
	}
	switch qd.ResultType {
	case "vector":
		var v model.Vector
		if err := json.Unmarshal(qd.Result, &v); err != nil {
			return nil, fmt.Errorf("prometheus: query %q: decoding vector: %w", q, err)
		}
		return v, nil
	case "scalar":
		var s model.Scalar
		if err := json.Unmarshal(qd.Result, &s); err != nil {
			return nil, fmt.Errorf("prometheus: query %q: decoding scalar: %w", q, err)
		}
		return model.Vector{{Metric: model.Metric{}, Value: s.Value, Timestamp: s.Timestamp}}, nil
	}
	return nil, fmt.Errorf("prometheus: query %q: result type %q is not a vector", q, qd.ResultType)
}

// QueryRange runs a range query.
func (p *Prometheus) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	params := url.Values{
		"query": {q},
		"start": {strconv.FormatFloat(float64(start.UnixNano())/1e9, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixNano())/1e9, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	qd, err := p.api(ctx, "/api/v1/query_range", params)
	if err != nil {
		return nil, fmt.Errorf("prometheus: query_range %q: %w", q, err)
	}
	if qd.ResultType != "matrix" {
		return nil, fmt.Errorf("prometheus: query_range %q: result type %q is not a matrix", q, qd.ResultType)
	}
	var m model.Matrix
	if err := json.Unmarshal(qd.Result, &m); err != nil {
		return nil, fmt.Errorf("prometheus: query_range %q: decoding matrix: %w", q, err)
	}
	return m, nil
}

// WaitFor runs q every 250 ms until ok accepts the result or timeout
// passes. The timeout error shows the last result (or query error).
func (p *Prometheus) WaitFor(ctx context.Context, q string, ok func(model.Vector) bool, timeout time.Duration) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A quarter of the default 1 s scrape and evaluation interval.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var (
		last    model.Vector
		lastErr error
	)
	for {
		v, err := p.Query(ctx, q)
		if err == nil && ok(v) {
			return v, nil
		}
		if err == nil || ctx.Err() == nil {
			last, lastErr = v, err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("prometheus: %q not as wanted within %s; last error: %w", q, timeout, lastErr)
			}
			return last, fmt.Errorf("prometheus: %q not as wanted within %s; last result: %v", q, timeout, last)
		case <-tick.C:
		}
	}
}

// RuleEvaluationFailures returns the sum of
// prometheus_rule_evaluation_failures_total over all rule groups, read
// from Prometheus's own /metrics, so it needs no self-scrape. A rule that
// fails to evaluate (for example a many-to-many match) shows up here and
// nowhere else.
func (p *Prometheus) RuleEvaluationFailures(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("prometheus: reading own metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("prometheus: reading own metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("prometheus: parsing own metrics: %w", err)
	}
	var sum float64
	if mf := families["prometheus_rule_evaluation_failures_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}

// prepareService resolves a service's binary and scratch directory.
func prepareService(name, binDir, dir, tempPrefix string) (bin, absDir string, ownDir bool, err error) {
	if binDir == "" {
		if binDir, err = findBinDir(); err != nil {
			return "", "", false, fmt.Errorf("%s: %w", name, err)
		}
	}
	if bin, err = binary(binDir, name); err != nil {
		return "", "", false, fmt.Errorf("%s: %w", name, err)
	}
	if dir == "" {
		if absDir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return "", "", false, fmt.Errorf("%s: creating scratch dir: %w", name, err)
		}
		return bin, absDir, true, nil
	}
	if absDir, err = filepath.Abs(dir); err != nil {
		return "", "", false, fmt.Errorf("%s: %w", name, err)
	}
	if err := os.MkdirAll(absDir, 0o755); err != nil {
		return "", "", false, fmt.Errorf("%s: creating scratch dir: %w", name, err)
	}
	return bin, absDir, false, nil
}

// launchService starts a single-port HTTP service on a free loopback port,
// retrying on a fresh port if it lost a port race, and waits for /-/ready
// (both Prometheus and Alertmanager serve it).
func launchService(ctx context.Context, sp *spawner, name, bin, logPath string, args func(addr string) []string) (*process, string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		base := "http://" + addr
		proc, err := launch(ctx, sp, launchSpec{
			name:    name,
			bin:     bin,
			args:    args(addr),
			logPath: logPath,
			ready: func(ctx context.Context) error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/-/ready", nil)
				if err != nil {
					return err
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("GET /-/ready: %s", resp.Status)
				}
				return nil
			},
		})
		if err == nil {
			return proc, base, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, "", err
		}
	}
}

// stopService stops a service process, its spawner, and removes its dir if
// owned.
func stopService(name string, proc *process, sp *spawner, dir string, ownDir bool) error {
	var errs []error
	if proc != nil {
		errs = append(errs, proc.stop(stopGrace))
	}
	sp.close()
	if ownDir {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: stop: %w", name, err)
	}
	return nil
}

// APIServerTarget is a scrape job "apiserver" for the sandbox's API server,
// authenticated with the admin token (its serving certificate is
// self-signed, so it is not verified): the API server's own metrics, such
// as apiserver_admission_webhook_*, which the bundled webhook alerts read.
func (s *Sandbox) APIServerTarget() ScrapeTarget {
	return ScrapeTarget{
		Job: "apiserver", Addr: strings.TrimPrefix(s.APIServerURL(), "https://"), Scheme: "https",
		Extra: map[string]any{
			"tls_config":    map[string]any{"insecure_skip_verify": true},
			"authorization": map[string]any{"type": "Bearer", "credentials": s.AdminConfig().BearerToken},
		},
	}
}
