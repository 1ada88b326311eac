package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/units"
	"github.com/prometheus/exporter-toolkit/web"
)

// The serve flags are in the top-level help: serve is the default command,
// and kingpin's default template lists only the application's own flags.
func TestTopLevelHelpListsServeFlags(t *testing.T) {
	code, out, errs := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"Flags of serve (the default command: also accepted without naming it):",
		"--web.listen-address=:10329", "--web.config.file", "--web.telemetry-path=\"/metrics\"",
		"--web.probe-address=\"\"", "--web.liveness-timeout=5m0s", "--stall.threshold=5m0s", "--config.file",
		"--kubeconfig", "--log.level=info", "--timelines.retained=1000", "--timelines.max-entries=200",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	// The subcommand help is kingpin's own, without the section twice.
	_, out, _ = runCLI(t, "help", "slo", "generate")
	if strings.Contains(out, "Flags of serve") {
		t.Errorf("help slo generate lists the serve flags:\n%s", out)
	}
}

// Bad serve flags exit 2 with one line per flag, before anything connects
// or listens (no --kubeconfig is needed to see the error).
func TestServeFlagValidation(t *testing.T) {
	const p = "kube-convergence-exporter: "
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"telemetry path is the liveness probe", []string{"--web.telemetry-path=/healthz"},
			p + `--web.telemetry-path: "/healthz" is the liveness probe; want an absolute path such as /metrics (see --help)`},
		{"telemetry path is the readiness probe", []string{"serve", "--web.telemetry-path=/readyz"},
			p + `--web.telemetry-path: "/readyz" is the readiness probe; want an absolute path such as /metrics (see --help)`},
		{"telemetry path not absolute", []string{"--web.telemetry-path=metrics"},
			p + `--web.telemetry-path: "metrics" is not absolute; want an absolute path such as /metrics (see --help)`},
		{"telemetry path empty", []string{"--web.telemetry-path="},
			p + `--web.telemetry-path: empty; want an absolute path such as /metrics (see --help)`},
		{"telemetry path is the landing page", []string{"--web.telemetry-path=/"},
			p + `--web.telemetry-path: "/" is the landing page; want an absolute path such as /metrics (see --help)`},
		{"telemetry path with a wildcard", []string{"--web.telemetry-path=/m/{x}"},
			p + `--web.telemetry-path: "/m/{x}" may only contain letters, digits and / - . _ ~ (see --help)`},
		{"telemetry path with a method", []string{"--web.telemetry-path=/GET /metrics"},
			p + `--web.telemetry-path: "/GET /metrics" may only contain letters, digits and / - . _ ~ (see --help)`},
		{"telemetry path with a trailing slash", []string{"--web.telemetry-path=/metrics/"},
			p + `--web.telemetry-path: "/metrics/" is not a clean path (no trailing /, //, . or ..); want an absolute path such as /metrics (see --help)`},
		{"zero stall threshold", []string{"--stall.threshold=0s"},
			p + `--stall.threshold: must be a positive duration such as 5m, got 0s (an unconverged object counts as stalled once it is older than this) (see --help)`},
		{"negative stall threshold", []string{"--stall.threshold=-1m"},
			p + `--stall.threshold: must be a positive duration such as 5m, got -1m0s (an unconverged object counts as stalled once it is older than this) (see --help)`},
		{"zero liveness timeout", []string{"--web.liveness-timeout=0s"},
			p + `--web.liveness-timeout: must be a positive duration such as 5m, got 0s (see --help)`},
		{"probe address without port", []string{"--web.probe-address=localhost"},
			p + `--web.probe-address: want host:port such as :10330, got "localhost": address localhost: missing port in address (see --help)`},
		{"probe address on the main port", []string{"--web.listen-address=127.0.0.1:9999", "--web.probe-address=:9999"},
			p + `--web.probe-address: ":9999" uses the port of --web.listen-address=127.0.0.1:9999; the probes need a port of their own (see --help)`},
		{"negative shutdown timeout", []string{"--web.shutdown-timeout=-1s"},
			p + `--web.shutdown-timeout: must not be negative, got -1s (see --help)`},
		{"no closed timeline retained", []string{"--timelines.retained=0"},
			p + `--timelines.retained: must be at least 1, got 0 (closed episodes kept for the timeline API) (see --help)`},
		{"no closed timeline per object", []string{"--timelines.retained-per-object=0"},
			p + `--timelines.retained-per-object: must be at least 1, got 0 (closed episodes of one object kept for the timeline API) (see --help)`},
		{"timeline budget too small", []string{"--timelines.max-bytes=512KiB"},
			p + `--timelines.max-bytes: must be at least 1MiB, got 512KiB (the memory of the timeline store) (see --help)`},
		{"timeline budget not a size", []string{"--timelines.max-bytes=lots"},
			p + `--timelines.max-bytes: "lots" is not a size such as 64MiB (units B, KiB, MiB, GiB) (see --help)`},
		{"negative max requests", []string{"--web.max-requests=-1"},
			p + `--web.max-requests: must not be negative, got -1 (0: no limit) (see --help)`},
		{"one timeline entry", []string{"--timelines.max-entries=1"},
			p + `--timelines.max-entries: must be at least 2, got 1 (an episode keeps its first and its last entries: the write and the close) (see --help)`},
		{"negative timeline entries", []string{"--timelines.max-entries=-5"},
			p + `--timelines.max-entries: must be at least 2, got -5 (an episode keeps its first and its last entries: the write and the close) (see --help)`},
		{"shard index at the total", []string{"--shard.total=2", "--shard.index=2"},
			p + `--shard.index: must be below --shard.total=2 (shards are numbered from 0), got 2 (see --help)`},
		{"shard index above the default total", []string{"--shard.index=1"},
			p + `--shard.index: must be below --shard.total=1 (shards are numbered from 0), got 1 (see --help)`},
		{"zero shards", []string{"--shard.total=0"},
			p + `--shard.total: must be at least 1, got 0 (the number of exporter processes the namespaces are split among) (see --help)`},
		{"negative shards", []string{"--shard.total=-2"},
			p + `--shard.total: must be at least 1, got -2 (the number of exporter processes the namespaces are split among) (see --help)`},
		{"negative shard index", []string{"--shard.total=2", "--shard.index=-1"},
			p + `--shard.index: must not be negative, got -1 (see --help)`},
		{"empty excluded namespace", []string{"--kube.namespaces-exclude=team-a,,team-b"},
			p + `--kube.namespaces-exclude: empty namespace name at position 2 of "team-a,,team-b" (see --help)`},
		{"trailing comma in the excluded namespaces", []string{"--kube.namespaces-exclude=team-a,"},
			p + `--kube.namespaces-exclude: empty namespace name at position 2 of "team-a," (see --help)`},
		{"excluded namespace not a name", []string{"--kube.namespaces-exclude=Team_A"},
			p + `--kube.namespaces-exclude: "Team_A" is not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?') (see --help)`},
		{"empty included namespace", []string{"--kube.namespaces=,team-a"},
			p + `--kube.namespaces: empty namespace name at position 1 of ",team-a" (see --help)`},
		{"namespace included and excluded", []string{"--kube.namespaces=team-a,team-b", "--kube.namespaces-exclude=team-b"},
			p + `--kube.namespaces: "team-b" is also in --kube.namespaces-exclude (see --help)`},
		{"memory limit ratio above 1", []string{"--auto-gomemlimit.ratio=1.5"},
			p + `--auto-gomemlimit.ratio: must be in [0, 1] (0 turns it off), got 1.5 (the fraction of the cgroup memory limit the Go runtime is told to stay under) (see --help)`},
		{"negative memory limit ratio", []string{"--auto-gomemlimit.ratio=-0.1"},
			p + `--auto-gomemlimit.ratio: must be in [0, 1] (0 turns it off), got -0.1 (the fraction of the cgroup memory limit the Go runtime is told to stay under) (see --help)`},
		{"memory limit ratio NaN", []string{"--auto-gomemlimit.ratio=NaN"},
			p + `--auto-gomemlimit.ratio: must be in [0, 1] (0 turns it off), got NaN (the fraction of the cgroup memory limit the Go runtime is told to stay under) (see --help)`},
		{"two bad flags, two lines", []string{"--web.telemetry-path=metrics", "--stall.threshold=0s"},
			p + `--web.telemetry-path: "metrics" is not absolute; want an absolute path such as /metrics` + "\n" +
				p + `--stall.threshold: must be a positive duration such as 5m, got 0s (an unconverged object counts as stalled once it is older than this) (see --help)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || strings.TrimSuffix(errs, "\n") != tc.want || out != "" {
				t.Errorf("exit %d\nstderr: %s\n  want: %s\nstdout: %q", code, errs, tc.want, out)
			}
		})
	}
}

// Accepted values: different hosts of one port are still one port.
func TestServeFlagsAccepted(t *testing.T) {
	for _, tc := range []struct {
		telemetry, listen, probe string
	}{
		{"/metrics", ":10329", ""},
		{"/-/metrics", ":10329", ":10330"},
		{"/probe/v1.0/metrics_x~", "127.0.0.1:10329", "127.0.0.2:10330"},
		{"/metrics", "127.0.0.1:0", "127.0.0.1:0"}, // port 0: the kernel picks two ports
	} {
		listen := []string{tc.listen}
		f := serveFlags{memLimitRatio: DefaultMemLimitRatio, telemetryPath: tc.telemetry, probeAddress: tc.probe, stallThreshold: 1, livenessTimeout: 1, tlRetained: 1, tlPerObject: 1, tlMaxBytes: units.MiB, tlMaxEntries: 2, syncTimeout: 1, shardTotal: 1}
		f.web = &web.FlagConfig{WebListenAddresses: &listen}
		if err := f.validate(); err != nil {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	for _, r := range []float64{0, 0.5, 1} {
		if err := validateMemLimitRatio(r); err != nil {
			t.Errorf("--auto-gomemlimit.ratio=%v: %v", r, err)
		}
	}
}

// Accepted shard and namespace flags, and the scope they give.
func TestShardFlagsAccepted(t *testing.T) {
	for _, tc := range []struct {
		index, total int
		exclude      string
		want         []string
	}{
		{0, 1, "", nil},
		{1, 2, "", nil},
		{2, 3, "team-a, team-b,team-a", []string{"team-a", "team-b"}},
	} {
		f := serveFlags{telemetryPath: "/metrics", stallThreshold: 1, livenessTimeout: 1, tlRetained: 1, tlPerObject: 1, tlMaxBytes: units.MiB, tlMaxEntries: 2, syncTimeout: 1,
			shardIndex: tc.index, shardTotal: tc.total, nsExclude: tc.exclude}
		if err := f.validate(); err != nil {
			t.Errorf("%+v: %v", tc, err)
		}
		s := f.scope()
		if s.Index != tc.index || s.Total != tc.total || !slices.Equal(s.Exclude, tc.want) {
			t.Errorf("%+v: scope %+v", tc, s)
		}
	}
}

// Sharding needs namespaceLabel.mode keep: the process exits at start
// naming the flag, the key and the file; keep, and an unsharded process
// with drop, pass that check (and stop later, at the missing kubeconfig).
func TestShardingNeedsNamespaceLabelKeep(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	drop := write("drop.yml", "namespaceLabel:\n  mode: drop\n")
	allow := write("allow.yml", "namespaceLabel:\n  mode: allowlist\n  allow: [team-a]\n")
	keep := write("keep.yml", "namespaceLabel:\n  mode: keep\n")
	missing := filepath.Join(dir, "no-kubeconfig")
	for _, tc := range []struct {
		args []string
		want string // in stderr; "" : not the sharding error
	}{
		{[]string{"--shard.total=2", "--config.file=" + drop}, `--shard.total=2 needs namespaceLabel.mode \"keep\", but config file ` + drop + ` sets namespaceLabel.mode \"drop\"`},
		{[]string{"--shard.total=3", "--shard.index=2", "--config.file=" + allow}, `--shard.total=3 needs namespaceLabel.mode \"keep\", but config file ` + allow + ` sets namespaceLabel.mode \"allowlist\"`},
		{[]string{"--shard.total=2", "--config.file=" + keep}, ""},
		{[]string{"--config.file=" + drop}, ""},
	} {
		code, _, errs := runCLI(t, append(tc.args, "--kubeconfig="+missing)...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1; stderr %s", tc.args, code, errs)
		}
		if tc.want != "" && !strings.Contains(errs, tc.want) {
			t.Errorf("%v: stderr %s\nwant it to contain %s", tc.args, errs, tc.want)
		}
		if tc.want == "" && (strings.Contains(errs, "namespaceLabel.mode") || !strings.Contains(errs, missing)) {
			t.Errorf("%v: want the kubeconfig error, not the sharding one: %s", tc.args, errs)
		}
	}
}
