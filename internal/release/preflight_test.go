package release

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository, from this package's directory.
var repoRoot = func() string {
	p, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return p
}()

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"0.1.0", "1.2.3", "10.20.30", "1.2.0-rc.1", "1.0.0-alpha.beta.1"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, tc := range []struct {
		v    string
		want error
		says string
	}{
		{"", ErrNoVersion, "make release VERSION=x.y.z"},
		{"  ", ErrNoVersion, "make release VERSION=x.y.z"},
		{"v0.1.0", ErrNotSemver, "without the leading v (0.1.0; the git tag is v0.1.0)"},
		{"0.1", ErrNotSemver, "MAJOR.MINOR.PATCH"},
		{"01.2.3", ErrNotSemver, "MAJOR.MINOR.PATCH"},
		{"1.2.3-", ErrNotSemver, "MAJOR.MINOR.PATCH"},
		{"latest", ErrNotSemver, "MAJOR.MINOR.PATCH"},
		{"0568b86-dirty", ErrNotSemver, "MAJOR.MINOR.PATCH"}, // the Makefile's default VERSION
		{"1.2.3+build.5", ErrNotSemver, "cannot be an image tag"},
	} {
		err := CheckVersion(tc.v)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("CheckVersion(%q) = %v, want %v saying %q", tc.v, err, tc.want, tc.says)
		}
	}
}

// gitRepo is a new repository of one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func TestPreflightStopsOnADirtyTree(t *testing.T) {
	repo := gitRepo(t)
	if err := Preflight(t.Context(), repo, "0.1.0"); err != nil {
		t.Fatalf("clean tree: %v", err)
	}
	if err := os.WriteFile(filepath.Join(repo, "untracked.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Preflight(t.Context(), repo, "0.1.0")
	if !errors.Is(err, ErrDirtyTree) || !strings.Contains(err.Error(), "?? untracked.go") {
		t.Fatalf("untracked file: Preflight = %v, want ErrDirtyTree naming it", err)
	}
	// The version is checked first: it is the one a person typed.
	if err := Preflight(t.Context(), repo, "v0.1.0"); !errors.Is(err, ErrNotSemver) {
		t.Fatalf("dirty tree and bad version: Preflight = %v, want ErrNotSemver", err)
	}
}

func TestStampFromGit(t *testing.T) {
	repo := gitRepo(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1778320800")
	s, err := StampFromGit(t.Context(), repo, "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Revision) != 40 || s.Branch != "main" || s.Date.Unix() != 1778320800 || s.BuildUser != DefaultBuildUser {
		t.Errorf("stamp %+v", s)
	}
	ld, err := s.LDFlags()
	if err != nil {
		t.Fatal(err)
	}
	if want := "-X github.com/prometheus/common/version.BuildDate=20260509-10:00:00"; !strings.Contains(ld, want) {
		t.Errorf("ldflags %q lack %q", ld, want)
	}
	s.BuildUser = "a b"
	if _, err := s.LDFlags(); err == nil {
		t.Error("a value with a space: no error")
	}
}

// TestReleaseCommandStopsBadInput runs make release and kce-release as a
// person would, with each bad input: each stops with its message and
// exit code 2 before anything is built.
func TestReleaseCommandStopsBadInput(t *testing.T) {
	ctx := t.Context()
	bin := filepath.Join(t.TempDir(), "kce-release")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kce-release")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build kce-release: %v\n%s", err, out)
	}
	clean := gitRepo(t)
	dirty := gitRepo(t)
	if err := os.WriteFile(filepath.Join(dirty, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		cmd  []string
		says string
	}{
		// make's own check: without it the Makefile's default VERSION
		// (git describe) would be taken for the release's.
		{"make without VERSION", repoRoot, []string{"make", "-s", "release"}, "VERSION is required"},
		{"make with an empty VERSION", repoRoot, []string{"make", "-s", "release", "VERSION="}, "VERSION is required"},
		{"no -version", clean, []string{bin}, "no version"},
		{"a leading v", clean, []string{bin, "-version", "v0.1.0"}, "without the leading v"},
		{"not semver", clean, []string{bin, "-version", "0.1"}, "not a semantic version"},
		{"a dirty tree", dirty, []string{bin, "-version", "0.1.0"}, "the work tree is not clean (git status --porcelain; commit or stash first):\nkce-release:   ?? notes.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, tc.cmd[0], tc.cmd[1:]...)
			cmd.Dir = tc.dir
			cmd.Env = cleanEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("%v: %v, want exit status 2\n%s", tc.cmd, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.says)
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "dist")); tc.dir != repoRoot && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("dist/ written before the input was checked: %v", err)
			}
		})
	}
}

// cleanEnv is the environment without what would change make's VERSION:
// a VERSION of the caller's, and the variables that a make running this
// test passes to the make it starts.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "VERSION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
			continue
		}
		env = append(env, kv)
	}
	return env
}
