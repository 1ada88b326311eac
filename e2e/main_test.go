// Package e2e proves the exporter against real components: the real binary
// runs against the sandbox's kube-apiserver, controller-manager, scheduler
// and kwok, and the tests read its real /metrics. One sandbox serves the
// whole package (TestMain): on 2 cores, several control planes at once
// starve each other.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

var (
	sb       *sandbox.Sandbox
	shared   *exporterProc // one exporter for the tests that can share it
	client   kubernetes.Interface
	exporter string // path of the built binary
)

// Injected truth: kwok's pod stages take exactly these delays (jitter-delay
// equal to delay), and the EndpointSlice controller batches pod-triggered
// slice updates by this period.
const (
	podCreateDelay   = 1 * time.Second
	podReadyDelay    = 2 * time.Second
	sliceBatchPeriod = 2 * time.Second
	stallThreshold   = 15 * time.Second
	readOnlyUser     = "viewer"    // may list/watch everything the exporter reads
	noEndpointsUser  = "no-slices" // may not list endpointslices
	noEventsUser     = "no-events" // may not list events
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kce-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	exporter = filepath.Join(dir, "kube-convergence-exporter")
	build := exec.CommandContext(ctx, "go", "build", "-o", exporter, "../cmd/kube-convergence-exporter")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build exporter:", err)
		return 1
	}
	sb, err = sandbox.Start(ctx, sandbox.Options{
		Stages:                 sandbox.StagesGeneral,
		AuditLog:               true, // the retries test counts the pod creates a quota rejected
		ControllerManagerFlags: []string{"--endpointslice-updates-batch-period=" + sliceBatchPeriod.String()},
		Users:                  []string{readOnlyUser, noEndpointsUser, noEventsUser},
		ExtraStages:            []string{demo.StageRunningNotReady, demo.StageReadyToStartContainers},
		Logf:                   func(f string, a ...any) { fmt.Printf("sandbox: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: sandbox:", err)
		return 1
	}
	defer func() { _ = sb.Stop() }()
	defer stopWatchSandbox() // started on first use by the watch tests
	client = kubernetes.NewForConfigOrDie(sb.AdminConfig())
	if err := sb.CreateNode(ctx, "kwok-node-0"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: node:", err)
		return 1
	}
	if err := grantRBAC(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: rbac:", err)
		return 1
	}
	shared, err = launchExporter("--kubeconfig="+sb.Kubeconfig(""), "--stall.threshold="+stallThreshold.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: exporter:", err)
		return 1
	}
	if err := shared.ready(60 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: shared exporter not ready: %v\n%s\n", err, tail(shared.logs.String(), 40))
		return 1
	}
	defer func() {
		if _, err := shared.stop(15 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: shared exporter exit: %v\n%s\n", err, tail(shared.logs.String(), 40))
		}
	}()
	return m.Run()
}
