package main

import (
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/gen/manifests"
)

const rbacHeader = `# ClusterRole printed by "kube-convergence-exporter rbac": list and watch on
# every resource the collectors enabled by the configuration read, the
# configured custom resources and their CRDs included. No get: the
# collectors read through their informers' caches. Admission probes, if
# configured, add a Role per probed namespace after it, and
# webhooks.apiServerMetrics a ClusterRole for the API server's /metrics.
`

// addRBACCommand adds `rbac`, which prints the ClusterRole the exporter
// needs with a configuration file (deploy/base holds the one for the
// default configuration).
func addRBACCommand(app *kingpin.Application) (dispatch func(cmd string, stdout, stderr io.Writer) (handled bool, exitCode int)) {
	cmd := app.Command("rbac", "Print the ClusterRole (list, watch) for the collectors enabled by --config.file and its custom resources, and the Roles its admission probes need.")
	file := cmd.Flag("config.file", "The exporter's configuration file; without it, the default configuration.").Default("").String()
	return func(c string, stdout, stderr io.Writer) (bool, int) {
		if c != cmd.FullCommand() {
			return false, 0
		}
		cfg := config.Default()
		if *file != "" {
			var err error
			if cfg, err = config.Load(*file); err != nil {
				fmt.Fprintln(stderr, err)
				return true, 1
			}
		}
		out, err := manifests.ClusterRoleWithHeader(all.ResourcesOf(cfg), rbacHeader)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return true, 1
		}
		roles, err := manifests.ProbeRoles(cfg.AdmissionProbes)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return true, 1
		}
		out = append(out, roles...)
		out = append(out, manifests.APIServerMetricsRole(cfg)...)
		if _, err := stdout.Write(out); err != nil {
			fmt.Fprintln(stderr, err)
			return true, 1
		}
		return true, 0
	}
}
