// Command kce-release is `make release VERSION=x.y.z`: it checks the
// version and that the work tree is clean, builds the pinned helm and
// cyclonedx-gomod (tools/build.sh), then writes the release into dist/
// with internal/release: binaries, SBOMs, the OCI image layout, the
// packaged chart and SHA256SUMS (docs/releasing.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kube-convergence/kube-convergence-exporter/internal/release"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kce-release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the release's version: semver without a leading v (0.1.0; the git tag is v0.1.0)")
	out := fs.String("out", "dist", "output directory, relative to the repository; rebuilt from scratch when inside it")
	platforms := fs.String("platforms", joinPlatforms(release.Platforms), "comma-separated os/arch of the binaries; the linux ones are also images")
	caBundle := fs.String("ca-bundle", release.DefaultCABundle, "the CA bundle installed in the image")
	zoneinfo := fs.String("zoneinfo", release.DefaultZoneinfo, "the tzdata tree installed in the image (empty: none)")
	buildUser := fs.String("build-user", release.DefaultBuildUser, "the build user stamped into the binaries")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "kce-release: %s\n", strings.ReplaceAll(err.Error(), "\n", "\nkce-release: "))
		return code
	}

	repo, err := repoRoot(ctx)
	if err != nil {
		return fail(1, err)
	}
	// Bad input stops here, before anything is built or removed.
	if err := release.Preflight(ctx, repo, *version); err != nil {
		return fail(2, err)
	}
	var ps []release.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := release.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fail(2, err)
		}
		ps = append(ps, p)
	}
	dir := *out
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(repo, dir)
	}
	if err := clearOut(ctx, repo, dir); err != nil {
		return fail(2, err)
	}

	// tools/build.sh builds into the repository's .bin (a component
	// already built from the same pins is not rebuilt).
	bin := filepath.Join(repo, ".bin")
	tools := exec.CommandContext(ctx, filepath.Join(repo, "tools", "build.sh"), "helm", "cyclonedx")
	tools.Dir, tools.Stdout, tools.Stderr = repo, stderr, stderr
	if err := tools.Run(); err != nil {
		return fail(1, fmt.Errorf("tools/build.sh helm cyclonedx: %w", err))
	}

	stamp, err := release.StampFromGit(ctx, repo, *version)
	if err != nil {
		return fail(1, err)
	}
	stamp.BuildUser = *buildUser
	res, err := release.Run(ctx, release.Config{
		Repo:      repo,
		Out:       dir,
		Stamp:     stamp,
		Platforms: ps,
		Helm:      filepath.Join(bin, "helm"),
		CycloneDX: filepath.Join(bin, "cyclonedx-gomod"),
		Base:      release.BaseFiles{CABundle: *caBundle, Zoneinfo: *zoneinfo},
		Log:       stderr,
	})
	if err != nil {
		return fail(1, err)
	}
	fmt.Fprintf(stdout, "release %s (revision %s, date %s)\n", stamp.Version, stamp.Revision, stamp.Date.Format("2006-01-02T15:04:05Z"))
	for _, a := range res.Artefacts {
		rel, _ := filepath.Rel(repo, a.Path)
		fmt.Fprintf(stdout, "  %10s  %s\n", humanSize(a.Size), rel)
	}
	if res.IndexDigest.Hex != "" {
		fmt.Fprintf(stdout, "image index %s; push it with:\n  crane push %s ghcr.io/kube-convergence/kube-convergence-exporter:%s\n", res.IndexDigest, filepath.Join(*out, release.LayoutDir), stamp.Version)
	}
	return 0
}

// repoRoot is the top of the work tree the command runs in.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git work tree (a release is built from a commit): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// clearOut removes a previous release in dir when git ignores dir inside
// the repository (dist/ is in .gitignore); any other dir must be empty or
// new, so that a wrong -out never deletes anything that is not a build
// output.
func clearOut(ctx context.Context, repo, dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) == 0:
		return nil
	}
	rel, err := filepath.Rel(repo, dir)
	if err != nil {
		return err
	}
	if rel != "." && !strings.HasPrefix(rel, "..") {
		ignored := exec.CommandContext(ctx, "git", "check-ignore", "-q", rel+"/")
		ignored.Dir = repo
		if ignored.Run() == nil {
			return os.RemoveAll(dir)
		}
	}
	return fmt.Errorf("-out %s is not empty and not an ignored directory of the repository (as dist/ is): give an empty or new directory", dir)
}

// humanSize is n bytes in KiB or MiB.
func humanSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func joinPlatforms(ps []release.Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
