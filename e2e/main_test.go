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
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

var (
	sb     *sandbox.Sandbox
	shared *exporterProc // one exporter for the tests that can share it
	// sharedSA is deploy/base's ServiceAccount, the shared exporter's
	// identity, bound to deploy/base's ClusterRole.
	sharedSA *corev1.ServiceAccount
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
	// leastPrivilegeSA is the ServiceAccount (in sharedSA's namespace) of
	// the exporter that TestLeastPrivilege runs with admission probes and
	// a custom resource.
	leastPrivilegeSA = "kce-least-privilege"
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
	var shippedSA corev1.ServiceAccount
	if err := readManifest("serviceaccount.yaml", &shippedSA); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	sb, err = sandbox.Start(ctx, sandbox.Options{
		Stages:   sandbox.StagesGeneral,
		AuditLog: true, // the retries test counts the pod creates a quota rejected
		// Every request of the exporters' ServiceAccounts, reads included:
		// TestLeastPrivilege compares them with their roles.
		AuditEveryRequestOf:    []string{"system:serviceaccounts:" + shippedSA.Namespace},
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
	// The shared exporter runs as deploy/base runs it: its ServiceAccount,
	// bound to the shipped ClusterRole, with a TokenRequest token, and the
	// Deployment's args. Differences: loopback listen and probe addresses
	// instead of :10329 and :10330, a kubeconfig instead of the in-cluster
	// config, and --stall.threshold for the stall tests.
	if sharedSA, err = installShippedRBAC(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: deploy/base RBAC:", err)
		return 1
	}
	saKubeconfig := filepath.Join(dir, "shared-exporter.kubeconfig")
	// Longer than any run of the suite: the token is read once.
	if err := writeServiceAccountKubeconfig(ctx, sharedSA.Namespace, sharedSA.Name, saKubeconfig, 12*time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	sharedArgs, err := manifestArgs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	probePort, err := sandbox.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	sharedArgs = append(sharedArgs, "--web.probe-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--kubeconfig="+saKubeconfig, "--stall.threshold="+stallThreshold.String())
	shared, err = launchExporter(sharedArgs...)
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
