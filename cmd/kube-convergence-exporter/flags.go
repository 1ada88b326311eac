package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/serve"
)

// validate checks the serve flags that kingpin's types cannot: it runs
// right after parsing, so a bad value exits 2 like an unknown flag, before
// anything connects or listens.
func (f *serveFlags) validate() error {
	var errs []error
	if err := serve.ValidateTelemetryPath(f.telemetryPath); err != nil {
		errs = append(errs, fmt.Errorf("--web.telemetry-path: %w", err))
	}
	if f.stallThreshold <= 0 {
		errs = append(errs, fmt.Errorf("--stall.threshold: must be a positive duration such as 5m, got %v (an unconverged object counts as stalled once it is older than this)", f.stallThreshold))
	}
	if f.syncTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--resources.sync-timeout: must be a positive duration such as 2m, got %v", f.syncTimeout))
	}
	if f.livenessTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--web.liveness-timeout: must be a positive duration such as 5m, got %v", f.livenessTimeout))
	}
	if f.probeAddress != "" {
		if err := f.validateProbeAddress(); err != nil {
			errs = append(errs, fmt.Errorf("--web.probe-address: %w", err))
		}
	}
	if f.tlRetained < 1 {
		errs = append(errs, fmt.Errorf("--timelines.retained: must be at least 1, got %d (closed episodes kept for the timeline API)", f.tlRetained))
	}
	if f.tlPerObject < 1 {
		errs = append(errs, fmt.Errorf("--timelines.retained-per-object: must be at least 1, got %d (closed episodes of one object kept for the timeline API)", f.tlPerObject))
	}
	if f.tlMaxBytes < minTimelineBytes {
		errs = append(errs, fmt.Errorf("--timelines.max-bytes: must be at least %s, got %s (the memory of the timeline store)", minTimelineBytes, f.tlMaxBytes))
	}
	if f.maxRequests < 0 {
		errs = append(errs, fmt.Errorf("--web.max-requests: must not be negative, got %d (0: no limit)", f.maxRequests))
	}
	if f.tlMaxEntries < 2 {
		errs = append(errs, fmt.Errorf("--timelines.max-entries: must be at least 2, got %d (an episode keeps its first and its last entries: the write and the close)", f.tlMaxEntries))
	}
	if err := f.scope().Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := namespaceList(f.nsInclude); err != nil {
		errs = append(errs, fmt.Errorf("--kube.namespaces: %w", err))
	}
	if _, err := namespaceList(f.nsExclude); err != nil {
		errs = append(errs, fmt.Errorf("--kube.namespaces-exclude: %w", err))
	}
	if f.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--web.shutdown-timeout: must not be negative, got %v", f.shutdownTimeout))
	}
	if err := validateMemLimitRatio(f.memLimitRatio); err != nil {
		errs = append(errs, fmt.Errorf("--auto-gomemlimit.ratio: %w", err))
	}
	return errors.Join(errs...)
}

// minTimelineBytes is the smallest --timelines.max-bytes: room for a few
// hundred episodes.
const minTimelineBytes = units.MiB

// bytesFlag is a size flag (64MiB) whose parse error names the flag:
// kingpin's own BytesVar says only "units: invalid ...".
type bytesFlag struct {
	name string
	v    *units.Base2Bytes
}

func (b *bytesFlag) Set(s string) error {
	n, err := units.ParseBase2Bytes(s)
	if err != nil {
		return fmt.Errorf("--%s: %q is not a size such as 64MiB (units B, KiB, MiB, GiB)", b.name, s)
	}
	*b.v = n
	return nil
}

func (b *bytesFlag) String() string { return b.v.String() }

// scope is the part of the cluster the flags give this process (validate
// has checked them).
func (f *serveFlags) scope() informers.Scope {
	include, _ := namespaceList(f.nsInclude)
	exclude, _ := namespaceList(f.nsExclude)
	return informers.Scope{Index: f.shardIndex, Total: f.shardTotal, Include: include, Exclude: exclude}
}

// namespaceList parses a comma-separated list of namespace names; empty
// is none. A name is checked as the API server checks it (an RFC 1123
// label), so a typo is caught at start rather than matching nothing.
func namespaceList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for i, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("empty namespace name at position %d of %q", i+1, s)
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", name, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// checkShardConfig rejects sharding with a namespace label policy other
// than keep: under drop or allowlist, series of namespaces of different
// shards fold into one label value ("" or "other") and the shards would
// export colliding series with partial values.
func checkShardConfig(total int, cfg *config.Config, file string) error {
	if total > 1 && cfg.NamespaceLabel.Mode != config.NamespaceKeep {
		return fmt.Errorf("--shard.total=%d needs namespaceLabel.mode %q, but config file %s sets namespaceLabel.mode %q: the shards' series would collide (the namespaces of several shards fold into one label value)", total, config.NamespaceKeep, file, cfg.NamespaceLabel.Mode)
	}
	return nil
}

// validateProbeAddress rejects a probe address that is not host:port or
// that would share a port with the main listener (the second bind would
// fail with "address already in use", or, with distinct hosts of one port,
// the probes would be unreachable from the pod network).
func (f *serveFlags) validateProbeAddress() error {
	host, port, err := net.SplitHostPort(f.probeAddress)
	if err != nil {
		return fmt.Errorf("want host:port such as :10330, got %q: %w", f.probeAddress, err)
	}
	if port == "" {
		return fmt.Errorf("want host:port such as :10330, got %q (no port)", f.probeAddress)
	}
	if f.web == nil || f.web.WebListenAddresses == nil {
		return nil
	}
	for _, main := range *f.web.WebListenAddresses {
		mh, mp, err := net.SplitHostPort(main)
		if err != nil || mp != port || port == "0" {
			continue
		}
		if mh == host || slices.Contains([]string{"", "0.0.0.0", "::"}, mh) || slices.Contains([]string{"", "0.0.0.0", "::"}, host) {
			return fmt.Errorf("%q uses the port of --web.listen-address=%s; the probes need a port of their own", f.probeAddress, main)
		}
	}
	return nil
}

// usageTemplate is kingpin's default template plus the flags of the default
// command (serve) in the top-level help: `kube-convergence-exporter --help`
// is how people look for flags, and serve runs without naming it.
var usageTemplate = kingpin.DefaultUsageTemplate +
	"{{if not .Context.SelectedCommand}}{{range .App.Commands}}{{if .Default}}" +
	"Flags of {{.FullCommand}} (the default command: also accepted without naming it):\n" +
	"{{.Flags|FlagsToTwoColumns|FormatTwoColumns}}\n" +
	"{{end}}{{end}}{{end}}"
