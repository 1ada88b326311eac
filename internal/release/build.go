package release

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// VersionPackage is where the build stamps the version (the Makefile's and
// the Dockerfile's -X flags too).
const VersionPackage = "github.com/prometheus/common/version"

// LDFlagKeys are the variables of VersionPackage a release sets, in the
// order of the Makefile and the Dockerfile (dockerfile_test.go compares).
var LDFlagKeys = []string{"Version", "Revision", "Branch", "BuildUser", "BuildDate"}

// BuildDateLayout is promu's, the Makefile's and the Dockerfile's
// (date -u +%Y%m%d-%H:%M:%S).
const BuildDateLayout = "20060102-15:04:05"

// BuildEnv is the environment of a release build: no cgo, so the binary is
// static and cross-compiles without a C toolchain (the Dockerfile's).
var BuildEnv = []string{"CGO_ENABLED=0"}

// StripFlags drop the symbol table and DWARF (about a third of the size);
// the module build info that --version falls back to stays.
const StripFlags = "-s -w"

// LDFlags is the -ldflags value of s: StripFlags and one -X per
// LDFlagKeys.
func (s Stamp) LDFlags() (string, error) {
	values := map[string]string{
		"Version":   s.Version,
		"Revision":  s.Revision,
		"Branch":    s.Branch,
		"BuildUser": s.BuildUser,
		"BuildDate": s.Date.UTC().Format(BuildDateLayout),
	}
	flags := []string{StripFlags}
	for _, k := range LDFlagKeys {
		v := values[k]
		// The go command splits -ldflags on spaces: a value with one
		// would stamp half of itself and pass the rest as flags.
		if v == "" || strings.ContainsAny(v, " \t\n'\"") {
			return "", fmt.Errorf("stamp %s=%q: empty or with a space or quote", k, v)
		}
		flags = append(flags, fmt.Sprintf("-X %s.%s=%s", VersionPackage, k, v))
	}
	return strings.Join(flags, " "), nil
}

// BuildArgs are the go build arguments of the binary at out.
// -buildvcs=true: the binary records vcs.revision, vcs.time and
// vcs.modified in its build info (go version -m, the SBOM) even where
// GOFLAGS turns it off (this project's machines set -buildvcs=false); the
// Dockerfile says false because its build context has no .git.
func BuildArgs(ldflags, out string) []string {
	return []string{"build", "-trimpath", "-buildvcs=true", "-ldflags", ldflags, "-o", out, MainPackage}
}

// BuildBinary builds the exporter for p from the repository at repo into
// out, stamped with s.
func BuildBinary(ctx context.Context, log io.Writer, repo string, s Stamp, p Platform, out string) error {
	ldflags, err := s.LDFlags()
	if err != nil {
		return err
	}
	start := time.Now()
	env := append([]string{"GOOS=" + p.OS, "GOARCH=" + p.Arch}, BuildEnv...)
	if err := run(ctx, log, repo, env, "go", BuildArgs(ldflags, out)...); err != nil {
		return fmt.Errorf("building %s: %w", p, err)
	}
	fmt.Fprintf(log, "release: built %s for %s in %s\n", out, p, time.Since(start).Round(time.Second))
	return nil
}
