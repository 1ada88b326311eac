package collectors

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A collector never imports another (ARCHITECTURE.md): the depguard rule
// sibling-collectors of .golangci.yml says so and make lint enforces it.
// This proves that the rule catches a new collector doing it: a scratch
// package beside the collectors imports one of them and the parent package,
// and the pinned golangci-lint, with the repository's configuration, must
// refuse the sibling by name and accept the parent. Only depguard runs: it
// reads syntax, not types, so the check takes about a second.
func TestLintRefusesASiblingCollectorImport(t *testing.T) {
	lint := golangciLint(t)
	dir, err := os.MkdirTemp(".", "zzscratch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const module = "github.com/kube-convergence/kube-convergence-exporter"
	sibling := module + "/collectors/pods"
	src := "package " + filepath.Base(dir) + "\n\nimport (\n" +
		"\t\"" + module + "/collectors\"\n" +
		"\t\"" + sibling + "\"\n)\n\n" +
		"var _ = pods.Name\n\nvar _ collectors.Collector\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), lint, "run",
		"--config", filepath.Join(root, ".golangci.yml"), "--enable-only", "depguard",
		"--output.json.path", "stdout", "--show-stats=false",
		// Another golangci-lint (make lint, an editor) holds its lock:
		// wait for it instead of failing.
		"--allow-serial-runners",
		"./collectors/"+filepath.Base(dir))
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("golangci-lint accepted %s importing %s: the rule sibling-collectors does not hold", dir, sibling)
	}
	if exit, ok := errors.AsType[*exec.ExitError](err); !ok || exit.ExitCode() != 1 {
		t.Fatalf("golangci-lint: %v, want exit 1 (issues found)\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var report struct {
		Issues []struct {
			FromLinter, Text string
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("golangci-lint's JSON: %v\n%s", err, out)
	}
	var refused []string
	for _, is := range report.Issues {
		if is.FromLinter != "depguard" {
			t.Errorf("%s: %s, want depguard issues only", is.FromLinter, is.Text)
			continue
		}
		refused = append(refused, is.Text)
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "'"+sibling+"'") || !strings.Contains(refused[0], "sibling-collectors") {
		t.Errorf("depguard refused %q, want the import of %s only (list sibling-collectors)", refused, sibling)
	}
}

// golangciLint is the golangci-lint that make lint installs into
// $KCE_BIN_DIR (make exports it) or the repository's .bin. Without either
// the test skips: a plain go test may run before make lint ever has.
func golangciLint(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "golangci-lint"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("KCE_BIN_DIR") == "" {
			t.Skipf("golangci-lint is not installed in .bin and KCE_BIN_DIR is unset: run make lint (make test does) to check the layering rule: %v", err)
		}
		t.Fatalf("golangci-lint is not installed in KCE_BIN_DIR (run make lint, which installs it): %v", err)
	}
	return p
}
