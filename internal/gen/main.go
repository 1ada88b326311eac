// Command gen writes the repository's generated artefacts (the ClusterRole,
// the metric reference, the SLO rules, the Grafana dashboards). Each generator
// renders one file from code; the outputs are committed, and `-check` (run
// by the tests and CI) fails when a committed copy is stale.
//
//	go run ./internal/gen                   # write every file that changed
//	go run ./internal/gen -check            # report stale files, exit 1 if any
//	go run ./internal/gen clusterrole       # only the named generators
//
// Paths are relative to the repository root: -root, or else the nearest
// directory at or above the working directory whose go.mod declares this
// module (so it works from any subdirectory, and not from tools/*, which are
// separate modules).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/dashboards"
	"github.com/kube-convergence/kube-convergence-exporter/internal/gen/manifests"
	"github.com/kube-convergence/kube-convergence-exporter/rules"
)

// modulePath identifies the repository root by its go.mod.
const modulePath = "github.com/kube-convergence/kube-convergence-exporter"

// generator renders one file.
type generator struct {
	name   string                            // selects it on the command line
	path   string                            // output, slash-separated, relative to the root
	render func(root string) ([]byte, error) // the file's whole content; root for generators that edit a region of a file
}

// generators lists every generator in the order they run. Add new ones here;
// the staleness test covers every entry.
func generators() []generator {
	gs := []generator{
		{
			name:   "clusterrole",
			path:   manifests.ClusterRolePath,
			render: func(string) ([]byte, error) { return manifests.ClusterRole(all.Resources()) },
		},
		{
			name:   "metrics",
			path:   "README.md",
			render: func(root string) ([]byte, error) { return readmeWithMetrics(filepath.Join(root, "README.md")) },
		},
		{
			// The bundled SLOs' recording rules and burn-rate alerts, from
			// rules/slos.yaml (embedded in package rules).
			name:   "slo-rules",
			path:   rules.SLORulesPath,
			render: func(string) ([]byte, error) { return rules.SLORules() },
		},
		{
			// The hand-written alerts and the SLO rules as one
			// prometheus-operator object for its kustomize component.
			name:   "prometheusrule",
			path:   manifests.PrometheusRulePath,
			render: func(string) ([]byte, error) { return rules.PrometheusRule() },
		},
	}
	// One file per Grafana dashboard, then all of them as the sidecar's
	// ConfigMap of the grafana-dashboards component.
	for _, d := range dashboards.All() {
		gs = append(gs, generator{
			name:   "dashboard-" + strings.TrimPrefix(d.UID, "kce-"),
			path:   d.Path(),
			render: func(string) ([]byte, error) { return d.JSON() },
		})
	}
	gs = append(gs, generator{
		name:   "grafana-dashboards",
		path:   manifests.DashboardsConfigMapPath,
		render: func(string) ([]byte, error) { return dashboards.ConfigMap() },
	}, generator{
		// Exemplar links are data source configuration, not dashboard JSON.
		name:   "grafana-datasource",
		path:   dashboards.DatasourcePath,
		render: func(string) ([]byte, error) { return dashboards.Datasource() },
	})
	return append(gs, chartCopies(gs)...)
}

// chartCopies copies the kustomize files the Helm chart is built from into
// the chart. A source that is itself generated is rendered, not read, so
// one run of the generator leaves both fresh.
func chartCopies(gs []generator) []generator {
	byPath := map[string]generator{}
	for _, g := range gs {
		byPath[g.path] = g
	}
	var out []generator
	for _, src := range manifests.ChartSources {
		out = append(out, generator{
			name: "chart-" + strings.TrimSuffix(path.Base(src), ".yaml"),
			path: manifests.ChartCopyPath(src),
			render: func(root string) ([]byte, error) {
				var content []byte
				var err error
				if g, ok := byPath[src]; ok {
					content, err = g.render(root)
				} else {
					content, err = os.ReadFile(filepath.Join(root, filepath.FromSlash(src)))
				}
				if err != nil {
					return nil, err
				}
				return manifests.ChartCopy(src, content), nil
			},
		})
	}
	return out
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run returns 0 when every selected file is written or up to date, 1 when
// -check found stale files, 2 on bad usage or an error.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("gen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./internal/gen [-root dir] [-check] [generator...]\n\ngenerators:\n")
		for _, g := range generators() {
			fmt.Fprintf(stderr, "  %-26s %s\n", g.name, g.path)
		}
		fmt.Fprintln(stderr, "\nflags:")
		flags.PrintDefaults()
	}
	root := flags.String("root", "", "repository root (default: the nearest directory at or above the working directory whose go.mod declares "+modulePath+")")
	check := flags.Bool("check", false, "write nothing; list stale files and exit 1 if there are any")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	selected, err := selectGenerators(generators(), flags.Args())
	if err != nil {
		fmt.Fprintf(stderr, "gen: %v\n", err)
		return 2
	}
	if *root == "" {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintf(stderr, "gen: %v\n", err)
			return 2
		}
		if *root, err = findRoot(wd); err != nil {
			fmt.Fprintf(stderr, "gen: %v (pass -root)\n", err)
			return 2
		}
	}

	stale := 0
	for _, g := range selected {
		want, err := g.render(*root)
		if err != nil {
			fmt.Fprintf(stderr, "gen: %s: %v\n", g.name, err)
			return 2
		}
		path := filepath.Join(*root, filepath.FromSlash(g.path))
		have, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "gen: %s: %v\n", g.name, err)
			return 2
		}
		switch {
		case err == nil && bytes.Equal(have, want):
			// Unchanged: leave the file (and its mtime) alone.
		case *check:
			stale++
			fmt.Fprintf(stdout, "stale: %s (generator %s): run make generate\n", g.path, g.name)
		default:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				fmt.Fprintf(stderr, "gen: %s: %v\n", g.name, err)
				return 2
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				fmt.Fprintf(stderr, "gen: %s: %v\n", g.name, err)
				return 2
			}
			fmt.Fprintf(stdout, "wrote %s\n", g.path)
		}
	}
	if stale > 0 {
		return 1
	}
	return 0
}

// selectGenerators returns the generators named in names, in list order, or
// all of them when names is empty.
func selectGenerators(gs []generator, names []string) ([]generator, error) {
	if len(names) == 0 {
		return gs, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []generator
	for _, g := range gs {
		if want[g.name] {
			out = append(out, g)
			delete(want, g.name)
		}
	}
	for _, n := range names {
		if want[n] {
			return nil, fmt.Errorf("unknown generator %q (see -h)", n)
		}
	}
	return out, nil
}

// findRoot walks up from dir to the directory whose go.mod declares
// modulePath.
func findRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if mod, err := moduleOf(filepath.Join(dir, "go.mod")); err == nil && mod == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s at or above the working directory", modulePath)
		}
		dir = parent
	}
}

// moduleOf returns the module path declared in a go.mod file.
func moduleOf(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
