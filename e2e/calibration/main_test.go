// Package calibration proves both directions of every bundled alert on a
// cluster that behaves like a real one: a healthy cluster under the write
// patterns clusters produce pages nobody, and each real outage makes its
// alert's expression true. It runs its own control plane (the other e2e
// packages leave stuck objects behind on theirs, on purpose), Flux's real
// kustomize-controller, real Prometheus with every bundled rule file
// unmodified, and the exporter, restarted once mid-run.
//
// The healthy phase lasts KCE_CALIBRATION_DURATION (default 3m, which
// make test runs); make soak runs it for 10 minutes and also waits for the
// alerts whose expressions need ten minutes without progress
// (KubeConvergenceRolloutStuck).
package calibration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

var (
	sb       *sandbox.Sandbox
	flux     *sandbox.Flux
	exporter string // path of the built binary
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("calibration: skipped in -short mode")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kce-calibration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	exporter = filepath.Join(dir, "kube-convergence-exporter")
	build := exec.CommandContext(ctx, "go", "build", "-o", exporter, "../../cmd/kube-convergence-exporter")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "calibration: build exporter:", err)
		return 1
	}
	sb, err = sandbox.Start(ctx, sandbox.Options{
		Stages: sandbox.StagesGeneral,
		Logf:   func(f string, a ...any) { fmt.Printf("sandbox: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "calibration: sandbox:", err)
		return 1
	}
	defer func() { _ = sb.Stop() }()
	flux, err = sandbox.StartKustomizeController(ctx, sb, sandbox.FluxOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "calibration: kustomize-controller:", err)
		return 1
	}
	defer func() { _ = flux.Stop() }()
	return m.Run()
}
