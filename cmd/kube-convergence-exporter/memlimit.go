package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// DefaultMemLimitRatio is the default of --auto-gomemlimit.ratio: the Go
// memory limit is 90% of the container's, leaving room for what the Go
// runtime does not count (thread stacks, cgo, the binary's pages) before
// the kernel's OOM killer, as Prometheus does.
const DefaultMemLimitRatio = 0.9

// validateMemLimitRatio checks --auto-gomemlimit.ratio.
func validateMemLimitRatio(r float64) error {
	if math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("must be in [0, 1] (0 turns it off), got %v (the fraction of the cgroup memory limit the Go runtime is told to stay under)", r)
	}
	return nil
}

// setMemoryLimit sets the Go runtime's soft memory limit to ratio × the
// memory limit that provider reports (memlimit.FromCgroup in production:
// the container's cgroup v2 memory.max or v1 limit_in_bytes), and logs
// what it did or why it did nothing: the ratio is 0, GOMEMLIMIT in the
// environment wins (the runtime already read it), or there is no limit.
//
// Without it, the heap grows to twice the live heap before a GC (GOGC=100)
// whatever the container's limit: the exporter's initial list (a 20x spike
// at kube-state-metrics, FACTS.md) then reaches the OOM killer where a GC
// would have freed enough. It returns the limit in force afterwards.
func setMemoryLimit(ratio float64, provider memlimit.Provider, logger *slog.Logger) int64 {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		limit := debug.SetMemoryLimit(-1) // the runtime read it at start
		logger.Info("Go memory limit from GOMEMLIMIT in the environment; --auto-gomemlimit.ratio ignored", "GOMEMLIMIT", env, "limit_bytes", limit)
		return limit
	}
	if ratio == 0 {
		logger.Info("Go memory limit not set: --auto-gomemlimit.ratio is 0")
		return debug.SetMemoryLimit(-1)
	}
	var cgroup uint64
	var noLimit bool
	recorded := func() (uint64, error) {
		v, err := provider()
		if errors.Is(err, memlimit.ErrNoLimit) {
			noLimit = true
		}
		cgroup = v
		return v, err
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(recorded))
	switch {
	case err != nil:
		logger.Info("Go memory limit not set: no cgroup memory limit found", "err", err)
	case noLimit:
		logger.Info("Go memory limit not set: the cgroup has no memory limit")
	default:
		logger.Info("Go memory limit set from the cgroup memory limit", "limit_bytes", limit, "cgroup_limit_bytes", cgroup, "ratio", ratio)
	}
	return limit
}
