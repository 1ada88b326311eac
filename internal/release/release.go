// Package release builds the artefacts of a release into dist/
// (docs/releasing.md): static binaries stamped with the version, their
// SBOMs, SHA256SUMS, a multi-arch OCI image layout made without a Docker
// engine, and the packaged Helm chart. cmd/kce-release is its command line
// (make release); the test of this package builds the image and the chart,
// pushes both to an in-memory registry and pulls them back.
package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// What is released.
const (
	// Binary is the command's name: the binaries' prefix and the image's
	// entrypoint.
	Binary = "kube-convergence-exporter"
	// MainPackage is the package built, relative to the repository.
	MainPackage = "./cmd/kube-convergence-exporter"
	// ChartDir is the Helm chart, relative to the repository.
	ChartDir = "deploy/helm/kube-convergence-exporter"
	// Source and License are the org.opencontainers.image.source and
	// .licenses of the image (and the Dockerfile's labels).
	Source  = "https://github.com/kube-convergence/kube-convergence-exporter"
	License = "Apache-2.0"
	// LayoutDir is the OCI image layout under the output directory.
	LayoutDir = "oci"
	// SumsFile lists the SHA-256 of every file of the output directory, in
	// sha256sum's format.
	SumsFile = "SHA256SUMS"
)

// Platform is one GOOS/GOARCH pair of the release.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the binaries of a release; the linux ones are also images.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}

// ParsePlatform reads "os/arch".
func ParsePlatform(s string) (Platform, error) {
	goos, goarch, ok := strings.Cut(s, "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/amd64", s)
	}
	return Platform{goos, goarch}, nil
}

// BinaryName is the file name of the binary of version v for p, in the
// Prometheus projects' naming (node_exporter-1.8.0.linux-amd64).
func BinaryName(v string, p Platform) string {
	return fmt.Sprintf("%s-%s.%s-%s", Binary, v, p.OS, p.Arch)
}

// Sentinel errors of Preflight: bad input stops a release before anything
// is built.
var (
	ErrNoVersion  = errors.New("no version: make release VERSION=x.y.z (semver without a leading v, e.g. 0.1.0)")
	ErrNotSemver  = errors.New("not a semantic version")
	ErrDirtyTree  = errors.New("the work tree is not clean")
	errBadVersion = fmt.Errorf("version: %w", ErrNotSemver)
)

// semverRE is the regular expression of semver.org 2.0.0 (section
// "Is there a suggested regular expression"): the chart's version and the
// image's tag are both this string, and Helm requires semver for the first.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// CheckVersion accepts a semantic version without a leading v: the git tag
// is v0.1.0, the version, the chart's version and the image's tag 0.1.0,
// as in the Prometheus projects.
func CheckVersion(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return ErrNoVersion
	case strings.HasPrefix(v, "v") && semverRE.MatchString(v[1:]):
		return fmt.Errorf("%w: %q: give it without the leading v (%s; the git tag is %s)", errBadVersion, v, v[1:], v)
	case strings.Contains(v, "+"):
		// Build metadata is semver, but + is not allowed in an image tag
		// (the OCI distribution spec's [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}),
		// and Helm turns it into _ in OCI tags: one version string for all
		// artefacts rules it out.
		return fmt.Errorf("%w: %q: build metadata (+...) cannot be an image tag; use a pre-release (-rc.1) instead", errBadVersion, v)
	case !semverRE.MatchString(v):
		return fmt.Errorf("%w: %q: want MAJOR.MINOR.PATCH with an optional -pre-release, e.g. 0.1.0 or 1.2.0-rc.1 (semver.org)", errBadVersion, v)
	}
	return nil
}

// CheckClean fails when git status --porcelain lists anything in repo: a
// release is built from a commit, and the revision stamped into it must
// describe every byte (untracked files count: go build may compile them).
func CheckClean(ctx context.Context, repo string) error {
	out, err := git(ctx, repo, "status", "--porcelain")
	if err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	more := ""
	if len(lines) > 10 {
		more = fmt.Sprintf("\n  ... and %d more", len(lines)-10)
		lines = lines[:10]
	}
	return fmt.Errorf("%w (git status --porcelain; commit or stash first):\n  %s%s", ErrDirtyTree, strings.Join(lines, "\n  "), more)
}

// Preflight is every check of the input, in the order a person fixes
// them: the version, then the tree.
func Preflight(ctx context.Context, repo, version string) error {
	if err := CheckVersion(version); err != nil {
		return err
	}
	return CheckClean(ctx, repo)
}

// Stamp is what a release writes into github.com/prometheus/common/version
// (--version, kube_convergence_build_info) and into the image's
// annotations.
type Stamp struct {
	Version   string
	Revision  string
	Branch    string
	BuildUser string
	// Date is the commit's time unless SOURCE_DATE_EPOCH says otherwise:
	// the same commit gives the same binaries and image digests
	// (reproducible-builds.org's convention), whoever builds it when.
	Date time.Time
}

// DefaultBuildUser is the build user of a release. Not user@host: the
// binaries would differ between two people building the same commit.
const DefaultBuildUser = "kce-release"

// StampFromGit reads the revision, branch and commit time of repo's HEAD.
func StampFromGit(ctx context.Context, repo, version string) (Stamp, error) {
	s := Stamp{Version: version, BuildUser: DefaultBuildUser}
	var err error
	if s.Revision, err = git(ctx, repo, "rev-parse", "HEAD"); err != nil {
		return Stamp{}, err
	}
	if s.Branch, err = git(ctx, repo, "rev-parse", "--abbrev-ref", "HEAD"); err != nil {
		return Stamp{}, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git(ctx, repo, "log", "-1", "--format=%ct", "HEAD"); err != nil {
			return Stamp{}, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return Stamp{}, fmt.Errorf("build date %q (SOURCE_DATE_EPOCH or the commit time): %w", epoch, err)
	}
	s.Date = time.Unix(sec, 0).UTC()
	return s, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// run runs a command in dir with extra environment, its output into log.
func run(ctx context.Context, log io.Writer, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = io.MultiWriter(&out, log)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, lastLines(out.String(), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
