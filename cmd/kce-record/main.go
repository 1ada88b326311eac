// Command kce-record records what the exporter's informers would receive
// from a cluster, as a recording for the replay harness (internal/replay,
// docs/replay.md): every list and watch notification of the resources the
// collectors read, with its receive time and whether it came live or from
// a list cycle, one JSON line each, the objects as the API server sent
// them.
//
//	kce-record --kubeconfig=PATH [--config.file=FILE] [--namespace=NS]... [--output=FILE] [--duration=D]
//
// It stops at --duration, or at Ctrl-C, and then writes the end line.
//
// A command of its own, not a subcommand of the exporter: it writes whole
// objects (managedFields, annotations, Event notes) to a file, which the
// exporter never does and its RBAC and documentation do not promise; it
// stays out of the shipped binary and image, like kce-demo.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("kce-record", "Record what the exporter's informers would receive from a cluster, for the replay harness (docs/replay.md).")
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	kubeconfig := app.Flag("kubeconfig", "Kubeconfig of the cluster; default: $KUBECONFIG, then ~/.kube/config.").String()
	configFile := app.Flag("config.file", "The exporter's configuration file: the resources its enabled collectors read are recorded, custom resources included.").String()
	namespaces := app.Flag("namespace", "Record only the objects of this namespace (repeatable); cluster-scoped objects other than Namespaces are kept.").Strings()
	output := app.Flag("output", "File to write; default: standard output.").Short('o').String()
	duration := app.Flag("duration", "Stop after this long; default: at Ctrl-C.").Duration()
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintln(stderr, "kce-record:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if err := record(*kubeconfig, *configFile, *namespaces, *output, *duration, stdout, logger); err != nil {
		fmt.Fprintln(stderr, "kce-record:", err)
		return 1
	}
	return 0
}

func record(kubeconfig, configFile string, namespaces []string, output string, duration time.Duration, stdout io.Writer, logger *slog.Logger) error {
	cfg := config.Default()
	if configFile != "" {
		var err error
		if cfg, err = config.Load(configFile); err != nil {
			return err
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// As the exporter's client: protobuf for built-in types.
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	restCfg.UserAgent = "kce-record"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	resources, err := withVersions(client.Discovery(), all.ResourcesOf(cfg))
	if err != nil {
		return err
	}
	out := stdout
	if output != "" {
		f, err := os.Create(output)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	r, err := replay.NewRecorder(replay.RecordOptions{Client: client, Dynamic: dyn, Resources: resources, Namespaces: namespaces, Out: out})
	if err != nil {
		return err
	}
	if err := r.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if err := r.WaitForSync(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	logger.Info("recording", "resources", len(resources), "namespaces", namespaces, "output", output)
	<-ctx.Done()
	return r.Stop()
}

// withVersions gives every resource without a version (a custom resource
// configured without one) the version its group prefers, as the exporter
// watches it.
func withVersions(disco discovery.DiscoveryInterface, rs []informers.Resource) ([]informers.Resource, error) {
	out := make([]informers.Resource, 0, len(rs))
	var groups map[string]string
	for _, r := range rs {
		if r.Version == "" {
			if groups == nil {
				list, err := disco.ServerGroups()
				if err != nil {
					return nil, fmt.Errorf("discovery: %w", err)
				}
				groups = map[string]string{}
				for _, g := range list.Groups {
					groups[g.Name] = g.PreferredVersion.Version
				}
			}
			v, ok := groups[r.Group]
			if !ok {
				return nil, fmt.Errorf("%s: the API server serves no group %s", r, r.Group)
			}
			r.Version = v
		}
		out = append(out, r)
	}
	return out, nil
}
