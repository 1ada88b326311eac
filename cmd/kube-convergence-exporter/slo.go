package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-convergence/kube-convergence-exporter/dashboards"
	"github.com/kube-convergence/kube-convergence-exporter/rules"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// Output formats of `slo generate`.
const (
	formatPrometheus     = "prometheus"
	formatPrometheusRule = "prometheusrule"
)

// addSLOCommands adds `slo validate` and `slo generate` to app. dispatch
// runs the command app.Parse selected when it is one of them (handled), and
// returns its exit code: 0 done, 1 the file is invalid or unreadable.
func addSLOCommands(app *kingpin.Application) (dispatch func(cmd string, stdout, stderr io.Writer) (handled bool, exitCode int)) {
	sloCmd := app.Command("slo", "SLO files (this project's YAML or OpenSLO v1): validate them, generate Prometheus rules (docs/slo.md).")

	validate := sloCmd.Command("validate", "Check an SLO file against the exporter's metrics and bucket layouts, and that its rules can be generated (alerts that can fire, no series recorded twice). Errors print as file:line: message; notes (alert pairs dropped for the period) go to standard output.")
	validateFile := validate.Flag("file", "The SLO file; --file=- reads standard input.").Short('f').Required().String()

	generate := sloCmd.Command("generate", "Print the recording rules and burn-rate alerts of an SLO file.")
	generateFile := generate.Flag("file", "The SLO file; --file=- reads standard input.").Short('f').Required().String()
	format := generate.Flag("format", "prometheus: a rule file for rule_files; prometheusrule: a prometheus-operator PrometheusRule object.").
		Default(formatPrometheus).Enum(formatPrometheus, formatPrometheusRule)
	objName := generate.Flag("prometheusrule.name", "metadata.name of the PrometheusRule (--format=prometheusrule).").Default("kube-convergence-slos").String()
	objNamespace := generate.Flag("prometheusrule.namespace", "metadata.namespace of the PrometheusRule (--format=prometheusrule); empty leaves it to kubectl or kustomize.").Default("").String()
	objLabels := generate.Flag("label", "A metadata label k=v of the PrometheusRule (--format=prometheusrule), repeatable: the label your Prometheus's ruleSelector selects on (kube-prometheus-stack: release=<its release name>).").StringMap()
	selector := generate.Flag("selector", "Label matchers, without braces, selecting the exporter's scrape targets in up and in its own metrics (the no-events tickets and --exporter-alerts read them).").Default(slo.DefaultSelector).String()
	groupBy := generate.Flag("group-by", "A label every sum keeps and every join matches on, repeatable: --group-by=cluster for a central ruler (Thanos, Mimir) that evaluates the rules of several clusters; the SLI queries of ratio and goodMinutes SLOs must keep it.").Strings()
	dashboardsDir := generate.Flag("dashboards", "Also write a Grafana dashboard of the file's SLOs (SLI against objective, budget remaining, burn rate per window) into this directory, as <uid>.json, and link it from the alerts (dashboard_url /d/<uid>).").String()
	exporterAlerts := generate.Flag("exporter-alerts", "Also generate the exporter's own alerts (absent, down, scrape errors) for --selector; the bundled rules have them, so leave this off for a file installed next to them.").Bool()
	bundledRules := generate.Flag("bundled-rules", "Also write the bundled hand-written rule files (rules/kube-convergence-{alerts,controllers,webhooks}.rules.yml, built into this binary) into this directory, with the --group-by labels added to every aggregation's by (...), every join's on (...) and the selectors of their annotations' queries: with --group-by=cluster, the whole bundled rule set for a central ruler, next to `slo generate -f rules/slos.yaml --exporter-alerts --group-by=cluster`.").String()

	return func(cmd string, stdout, stderr io.Writer) (bool, int) {
		// kingpin reads "-f -" as an empty value (a lone "-" is not taken
		// as the flag's argument); say how to write standard input.
		if (cmd == validate.FullCommand() && *validateFile == "") || (cmd == generate.FullCommand() && *generateFile == "") {
			fmt.Fprintln(stderr, "kube-convergence-exporter: --file is empty; for standard input write --file=- or -f- (see --help)")
			return true, 2
		}
		switch cmd {
		case validate.FullCommand():
			f, err := slo.Load(*validateFile, os.Stdin)
			if err == nil {
				_, err = slo.Generate(f)
			}
			if err != nil {
				fmt.Fprintln(stderr, err)
				return true, 1
			}
			for _, n := range f.Notes() {
				fmt.Fprintln(stdout, "note:", n)
			}
			fmt.Fprintf(stdout, "%s: %d SLO(s) valid\n", f.Name, len(f.SLOs))
			return true, 0
		case generate.FullCommand():
			for k := range *objLabels {
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					fmt.Fprintf(stderr, "kube-convergence-exporter: --label %s: %s\n", k, strings.Join(errs, "; "))
					return true, 2
				}
			}
			opts := slo.Options{Selector: *selector, ExporterAlerts: *exporterAlerts, GroupBy: *groupBy}
			out, err := generateRules(*generateFile, *format, slo.ObjectMeta{Name: *objName, Namespace: *objNamespace, Labels: *objLabels}, opts, *dashboardsDir, stderr)
			if err == nil && *bundledRules != "" {
				err = writeBundledRules(*bundledRules, *groupBy, *format, slo.ObjectMeta{Name: *objName, Namespace: *objNamespace, Labels: *objLabels}, stderr)
			}
			if err != nil {
				fmt.Fprintln(stderr, err)
				return true, 1
			}
			if _, err := stdout.Write(out); err != nil {
				fmt.Fprintln(stderr, err)
				return true, 1
			}
			return true, 0
		}
		return false, 0
	}
}

// generateRules renders the rules of the SLO file at path. Notes go to
// stderr so that stdout stays a clean rule file.
func generateRules(path, format string, meta slo.ObjectMeta, opts slo.Options, dashboardsDir string, stderr io.Writer) ([]byte, error) {
	f, err := slo.Load(path, os.Stdin)
	if err != nil {
		return nil, err
	}
	if dashboardsDir != "" {
		d, b, err := dashboards.ForSLOFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dashboardsDir, 0o755); err != nil {
			return nil, fmt.Errorf("--dashboards: %w", err)
		}
		p := filepath.Join(dashboardsDir, d.File())
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("--dashboards: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %s (dashboard uid %s)\n", p, d.UID)
		opts.DashboardURL = "/d/" + d.UID
	}
	for _, n := range f.Notes() {
		fmt.Fprintln(stderr, "note:", n)
	}
	rf, err := slo.GenerateWith(f, opts)
	if err != nil {
		return nil, err
	}
	header := slo.GeneratedHeader(f.Name, opts)
	out, err := rf.YAML(header)
	if err != nil || format == formatPrometheus {
		return out, err
	}
	return slo.PrometheusRule(header, meta, out)
}

// writeBundledRules writes the bundled hand-written rule files into dir,
// rewritten for the labels by (rules.WithGroupBy; unchanged without any),
// as rule files or, with --format=prometheusrule, as one PrometheusRule
// each, named after the file (kube-convergence-webhooks for
// kube-convergence-webhooks.rules.yml) with the namespace and labels of
// the SLO rules' object.
func writeBundledRules(dir string, by []string, format string, meta slo.ObjectMeta, stderr io.Writer) error {
	files, err := rules.HandWritten()
	if err != nil {
		return err
	}
	if len(by) > 0 {
		if files, err = rules.WithGroupBy(files, by); err != nil {
			return fmt.Errorf("--bundled-rules: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--bundled-rules: %w", err)
	}
	for _, f := range files {
		name, b := f.Name, f.Data
		if format == formatPrometheusRule {
			base := strings.TrimSuffix(f.Name, ".rules.yml")
			m := meta
			m.Name = base
			header := "Source: the bundled rules/" + f.Name
			if len(by) > 0 {
				header += ", with the labels " + strings.Join(by, ", ") + " kept by every aggregation and join"
			}
			if b, err = slo.PrometheusRule(header+".", m, b); err != nil {
				return fmt.Errorf("--bundled-rules: %s: %w", f.Name, err)
			}
			name = base + ".yaml"
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("--bundled-rules: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	return nil
}
