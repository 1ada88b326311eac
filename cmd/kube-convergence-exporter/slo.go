package main

import (
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"

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

	validate := sloCmd.Command("validate", "Check an SLO file against the exporter's metrics and bucket layouts. Errors print as file:line: message; notes (alert pairs dropped for the period) go to standard output.")
	validateFile := validate.Flag("file", "The SLO file; --file=- reads standard input.").Short('f').Required().String()

	generate := sloCmd.Command("generate", "Print the recording rules and burn-rate alerts of an SLO file.")
	generateFile := generate.Flag("file", "The SLO file; --file=- reads standard input.").Short('f').Required().String()
	format := generate.Flag("format", "prometheus: a rule file for rule_files; prometheusrule: a prometheus-operator PrometheusRule object.").
		Default(formatPrometheus).Enum(formatPrometheus, formatPrometheusRule)
	objName := generate.Flag("prometheusrule.name", "metadata.name of the PrometheusRule (--format=prometheusrule).").Default("kube-convergence-slos").String()
	objNamespace := generate.Flag("prometheusrule.namespace", "metadata.namespace of the PrometheusRule (--format=prometheusrule); empty leaves it to kubectl or kustomize.").Default("").String()

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
			out, err := generateRules(*generateFile, *format, slo.ObjectMeta{Name: *objName, Namespace: *objNamespace}, stderr)
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
func generateRules(path, format string, meta slo.ObjectMeta, stderr io.Writer) ([]byte, error) {
	f, err := slo.Load(path, os.Stdin)
	if err != nil {
		return nil, err
	}
	for _, n := range f.Notes() {
		fmt.Fprintln(stderr, "note:", n)
	}
	rf, err := slo.Generate(f)
	if err != nil {
		return nil, err
	}
	out, err := rf.YAML(slo.GeneratedHeader(f.Name))
	if err != nil || format == formatPrometheus {
		return out, err
	}
	return slo.PrometheusRule(slo.GeneratedHeader(f.Name), meta, out)
}
