package deploy_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// repoRoot is the repository root seen from this package's directory.
const repoRoot = ".."

// sb is an API server (with etcd, nothing else: a dry run needs no
// controller) shared by the test binary; nil in -short mode.
var sb *sandbox.Sandbox

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // the dry-run tests skip themselves
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	sb, err = sandbox.Start(ctx, sandbox.Options{Only: []sandbox.Component{sandbox.Etcd, sandbox.APIServer}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy: sandbox:", err)
		return 1
	}
	defer func() { _ = sb.Stop() }()
	return m.Run()
}

// tool returns the path of a binary built by tools/build.sh: in
// $KCE_BIN_DIR, else in the repository's .bin. The test fails when it is
// missing: these tests are what make test runs to check the manifests.
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, ".bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not built (make tools, or tools/build.sh): %v", name, err)
	}
	return p
}
