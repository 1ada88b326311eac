package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
	"github.com/kube-convergence/kube-convergence-exporter/slo/report"
)

// Exit codes of `report`.
const (
	reportOK       = 0
	reportError    = 1
	reportUsage    = 2
	reportBreached = 3
	// reportUnanswered: with --fail-on-breach, an SLO without data or
	// events, or with a partial answer: a gate cannot pass what was not
	// measured.
	reportUnanswered = 4
)

// addReportCommand adds `report` (docs/report.md).
func addReportCommand(app *kingpin.Application) (dispatch func(cmd string, stdout, stderr io.Writer) (handled bool, exitCode int)) {
	cmd := app.Command("report", "Burn-rate report of the SLOs of an SLO file, from the raw series in any Prometheus-compatible API (Prometheus, Thanos, Mimir): attainment, error budget, burn rates, worst namespaces and kinds, months, gaps (docs/report.md). Exit 0; 1 on an error; 2 on bad usage; 3 with --fail-on-breach when an SLO is below its objective; 4 with --fail-on-breach when none is but one has no data, no events or a partial answer.")
	promURL := cmd.Flag("prometheus.url", "Base URL of the query API, e.g. http://prometheus:9090 or Mimir's http://mimir/prometheus.").Required().String()
	file := cmd.Flag("file", "The SLO file (as for slo validate); --file=- reads standard input.").Short('f').Required().String()
	window := cmd.Flag("window", "The report window, e.g. 7d; default: each SLO's period.").Default("").String()
	at := cmd.Flag("at", "End of the window: RFC 3339 or Unix seconds; default: now.").Default("").String()
	format := cmd.Flag("format", "Output format: text, markdown, json (docs/report.schema.json) or html (one self-contained file).").Default(report.FormatText).Enum(report.Formats()...)
	out := cmd.Flag("output", "Write the report to this file (through a temporary file renamed into place) instead of standard output.").Short('o').Default("").String()
	httpConfig := cmd.Flag("http.config.file", "HTTP client configuration for the API, promtool's format: bearer token (file), basic auth, TLS CA, insecure_skip_verify, http_headers (e.g. Mimir's X-Scope-OrgID).").Default("").String()
	timezone := cmd.Flag("timezone", "IANA time zone of the calendar months and the times shown.").Default("UTC").String()
	// 5m: a 30-day SLO takes a few dozen queries, each over at most
	// 10,000 steps (under a second each on the e2e Prometheus).
	timeout := cmd.Flag("timeout", "Bound on the whole run, every query included.").Default("5m").Duration()
	failOnBreach := cmd.Flag("fail-on-breach", "Exit 3 when any SLO's attainment is below its objective; else 4 when any SLO has no data, no events, or a partial answer (API warnings).").Bool()
	allowNoData := cmd.Flag("allow-no-data", "With --fail-on-breach, pass SLOs without data or events (a partial answer still exits 4).").Bool()
	scrapeInterval := cmd.Flag("scrape-interval", "The scrape interval gaps are judged against (a gap: no sample for more than two intervals); default: the targets API's scrapeInterval for the SLI's job, else the samples' spacing.").Default("0s").Duration()

	return func(c string, stdout, stderr io.Writer) (bool, int) {
		if c != cmd.FullCommand() {
			return false, 0
		}
		usage := func(format string, args ...any) (bool, int) {
			fmt.Fprintf(stderr, "kube-convergence-exporter: report: "+format+" (see --help)\n", args...)
			return true, reportUsage
		}
		if *file == "" {
			return usage("--file is empty; for standard input write --file=- or -f-")
		}
		u, err := url.Parse(*promURL)
		if err != nil {
			// url.Parse's error quotes the URL, password and all.
			return usage("--prometheus.url: not a URL; want an http or https URL")
		}
		// The source as shown everywhere (header, JSON, HTML title,
		// errors): a password in the URL is sent as basic auth by
		// net/http, never printed.
		source := u.Redacted()
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usage("--prometheus.url %q: want an http or https URL", source)
		}
		var w time.Duration
		if *window != "" {
			if w, err = slo.ParseDuration(*window); err != nil || w < 2*time.Minute {
				return usage("--window %q: want a duration of at least 2m, such as 7d or 30d", *window)
			}
		}
		loc, err := time.LoadLocation(*timezone)
		if err != nil {
			return usage("--timezone %q: want an IANA time zone such as UTC or Europe/Berlin: %v", *timezone, err)
		}
		end := time.Now()
		if *at != "" {
			if end, err = parseTime(*at); err != nil {
				return usage("--at %q: %v", *at, err)
			}
		}
		if *scrapeInterval < 0 {
			return usage("--scrape-interval %s: want a positive duration such as 1m", *scrapeInterval)
		}
		// What the API says (its warnings, its errors, the retries' causes)
		// is the server's text, a warning of the SLO file the user's:
		// escaped as a whole (terminalText), so that no terminal control
		// in it reaches the terminal.
		logf := func(format string, args ...any) {
			fmt.Fprintf(stderr, "kube-convergence-exporter: report: %s\n", terminalText(fmt.Sprintf(format, args...)))
		}
		// Fail as slo validate does, except for what concerns only the
		// rules: a report needs no alert windows (report.LoadFile).
		f, fileWarnings, err := report.LoadFile(*file, os.Stdin)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return true, reportError
		}
		for _, w := range fileWarnings {
			logf("warning: %s", w)
		}
		client, err := apiClient(u, *httpConfig)
		if err != nil {
			fmt.Fprintln(stderr, "kube-convergence-exporter: report:", err)
			return true, reportError
		}
		if *timeout <= 0 {
			return usage("--timeout %s: want a positive duration such as 5m", *timeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		qc := report.NewClient(client, logf)
		r, err := report.Build(ctx, v1.NewAPI(qc), f, report.Options{
			At: end, Window: w, Location: loc, Source: source,
			ScrapeInterval: *scrapeInterval, Targets: report.TargetsFrom(qc), FileWarnings: fileWarnings,
		})
		if r != nil {
			// Before the error, too: a partial response may explain it.
			for _, w := range r.Warnings {
				logf("API warning: %s", w)
			}
		}
		if err != nil {
			logf("%v", err)
			return true, reportError
		}
		if err := writeReport(r, *format, *out, stdout); err != nil {
			fmt.Fprintln(stderr, "kube-convergence-exporter: report:", err)
			return true, reportError
		}
		if *failOnBreach && r.Breached() {
			for i := range r.SLOs {
				if s := &r.SLOs[i]; s.Status == report.StatusBreached {
					fmt.Fprintf(stderr, "kube-convergence-exporter: report: %s: attainment %.4f%% below the objective %g%%\n", s.ID, 100**s.Attainment, 100*s.Objective)
				}
			}
			return true, reportBreached
		}
		if *failOnBreach {
			if why := r.Unanswered(*allowNoData); len(why) > 0 {
				hint := "--allow-no-data passes no data and no events"
				if *allowNoData {
					hint = "--allow-no-data never passes a partial answer"
				}
				for _, w := range why {
					logf("%s: not measured, so not passed by --fail-on-breach (%s)", w, hint)
				}
				return true, reportUnanswered
			}
		}
		return true, reportOK
	}
}

// parseTime reads RFC 3339 or Unix seconds (with a fraction), as
// Prometheus's API does.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	// Unix seconds of years 1 to 9999, the RFC 3339 range; ParseFloat
	// also reads NaN and Inf.
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= -62135596800 && f <= 253402300799 {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).Round(time.Millisecond), nil
	}
	return time.Time{}, errors.New("want RFC 3339 (2026-11-01T00:00:00Z) or Unix seconds")
}

// terminalText is msg for a terminal: as it is when every rune of it is
// printable, else web.Visible(msg). An error quotes its query with %q:
// escaping its backslashes again (Visible's \\, there so that an escape
// it writes is never ambiguous) is only worth it once there is an escape.
func terminalText(msg string) string {
	if utf8.ValidString(msg) && !strings.ContainsFunc(msg, func(r rune) bool { return !web.VisibleRune(r) }) {
		return msg
	}
	return web.Visible(msg)
}

// apiClient builds the API client; configFile is promtool's
// --http.config.file format (prometheus/common's HTTPClientConfig).
func apiClient(u *url.URL, configFile string) (api.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	if configFile != "" {
		c, _, err := config.LoadHTTPConfigFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("--http.config.file: %w", err)
		}
		cfg = *c
	}
	rt, err := config.NewRoundTripperFromConfig(cfg, "kube-convergence-exporter-report")
	if err != nil {
		return nil, fmt.Errorf("--http.config.file: %w", err)
	}
	c, err := api.NewClient(api.Config{Address: strings.TrimSuffix(u.String(), "/"), RoundTripper: rt})
	if err != nil {
		// A *url.Error quotes the URL: keep only its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("--prometheus.url %s: %w", u.Redacted(), err)
	}
	return c, nil
}

// writeReport renders to stdout, or to a temporary file in path's
// directory renamed to path once complete, so that a failed run never
// leaves a half report.
func writeReport(r *report.Report, format, path string, stdout io.Writer) (err error) {
	if path == "" {
		return report.Render(stdout, r, format)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := report.Render(tmp, r, format); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}
