package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/gen/manifests"
)

// TestGeneratedFilesUpToDate runs every generator in -check mode against the
// repository: a new generator is covered without a test of its own.
func TestGeneratedFilesUpToDate(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-check"}, &stdout, &stderr); code != 0 {
		t.Errorf("generated files are stale: run make generate (go run ./internal/gen); exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// fakeRoot is a directory that findRoot accepts as the repository root.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestCheckThenWrite(t *testing.T) {
	root := fakeRoot(t)
	// The chart copies hand-written kustomize files too: give the tree
	// those (the sources no generator writes).
	generated := map[string]bool{}
	for _, g := range generators() {
		generated[g.path] = true
	}
	for _, src := range manifests.ChartSources {
		if generated[src] {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(src)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, filepath.FromSlash(src))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errs bytes.Buffer

	// -check on a tree without the files: stale, exit 1, nothing written.
	if code := run([]string{"-root", root, "-check"}, &out, &errs); code != 1 {
		t.Fatalf("-check on an empty tree: exit %d, want 1\n%s%s", code, out.String(), errs.String())
	}
	for _, g := range generators() {
		if !strings.Contains(out.String(), "stale: "+g.path) {
			t.Errorf("-check output does not name %s:\n%s", g.path, out.String())
		}
		if _, err := os.Stat(filepath.Join(root, g.path)); err == nil {
			t.Errorf("-check wrote %s", g.path)
		}
	}

	// Write, then -check is clean and a second write changes nothing.
	out.Reset()
	if code := run([]string{"-root", root}, &out, &errs); code != 0 {
		t.Fatalf("write: exit %d\n%s%s", code, out.String(), errs.String())
	}
	out.Reset()
	if code := run([]string{"-root", root, "-check"}, &out, &errs); code != 0 {
		t.Fatalf("-check after write: exit %d\n%s%s", code, out.String(), errs.String())
	}
	if code := run([]string{"-root", root}, &out, &errs); code != 0 || out.Len() != 0 {
		t.Errorf("second write: exit %d, output %q; want 0 and no output (files unchanged)", code, out.String())
	}

	// A hand edit is stale again.
	g := generators()[0]
	if err := os.WriteFile(filepath.Join(root, g.path), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-root", root, "-check", g.name}, &out, &errs); code != 1 {
		t.Errorf("-check after a hand edit: exit %d, want 1", code)
	}
}

func TestUnknownGenerator(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-root", fakeRoot(t), "no-such-generator"}, &out, &errs); code != 2 {
		t.Errorf("unknown generator: exit %d, want 2", code)
	}
	if !strings.Contains(errs.String(), "no-such-generator") {
		t.Errorf("error does not name the generator: %q", errs.String())
	}
}

func TestFindRoot(t *testing.T) {
	root := fakeRoot(t)
	// A nested module (like tools/kube) is not the root.
	nested := filepath.Join(root, "tools", "kube", "sub")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tools", "kube", "go.mod"), []byte("module example.com/tools/kube\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := findRoot(nested)
	if err != nil {
		t.Fatal(err)
	}
	if got != root {
		t.Errorf("findRoot(%s) = %s, want %s", nested, got, root)
	}
	if _, err := findRoot(t.TempDir()); err == nil {
		t.Error("findRoot outside the repository succeeded")
	}
}
