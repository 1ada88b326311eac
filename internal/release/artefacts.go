package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ChartName is the packaged chart's file name for version v (helm
// package's NAME-VERSION.tgz).
func ChartName(v string) string { return fmt.Sprintf("%s-%s.tgz", Binary, v) }

// PackageChart packages the chart of repo with version and appVersion v
// into dir: the chart's files keep the version of the last chart change,
// the package says the release's (the chart's default image tag is its
// appVersion). It returns the package's path.
func PackageChart(ctx context.Context, log io.Writer, helm, repo, v, dir string) (string, error) {
	if err := run(ctx, log, repo, nil, helm, "package", filepath.Join(repo, ChartDir), "--version", v, "--app-version", v, "--destination", dir); err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	p := filepath.Join(dir, ChartName(v))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	return p, nil
}

// SBOMName is the SBOM's file name of a binary.
func SBOMName(binary string) string { return filepath.Base(binary) + ".cdx.json" }

// WriteSBOM writes the CycloneDX SBOM of binary (JSON, spec 1.6) with
// cyclonedx-gomod's bin mode: the modules the binary links, from its
// embedded build info, each with its go.sum hash and detected license.
// The app mode would read the source instead, but finds the main module's
// version with go-git, which cannot open a linked git worktree.
func WriteSBOM(ctx context.Context, log io.Writer, cyclonedx, repo, binary, v, out string) error {
	// Offline: every module the binary links is in the module cache (it
	// was just built), and its download for license detection must not
	// go out. GOSUMDB=off because cyclonedx-gomod runs go mod download
	// outside the module, where go.sum cannot vouch; the cached zips were
	// verified against go.sum by the build. The main module of version v
	// is not in any cache: its license is declared below instead.
	env := []string{"GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod"}
	if err := run(ctx, io.Discard, repo, env, cyclonedx, "bin", "-json", "-licenses", "-version", "v"+v, "-output", out, binary); err != nil {
		return fmt.Errorf("SBOM of %s: %w", binary, err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	var bom map[string]any
	if err := json.Unmarshal(data, &bom); err != nil {
		return fmt.Errorf("SBOM %s: %w", out, err)
	}
	if bom["bomFormat"] != "CycloneDX" {
		return fmt.Errorf("SBOM %s: bomFormat %v, want CycloneDX", out, bom["bomFormat"])
	}
	meta, _ := bom["metadata"].(map[string]any)
	main, _ := meta["component"].(map[string]any)
	if main == nil {
		return fmt.Errorf("SBOM %s: no metadata.component", out)
	}
	if _, ok := main["licenses"]; !ok {
		main["licenses"] = []any{map[string]any{"license": map[string]any{"id": License, "acknowledgement": "declared"}}}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(bom); err != nil {
		return err
	}
	fmt.Fprintf(log, "release: SBOM %s\n", out)
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// WriteSums writes dir/SHA256SUMS over every regular file of dir, in
// sha256sum's format (sha256sum -c SHA256SUMS checks them).
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries { // sorted by name
		if !e.Type().IsRegular() || e.Name() == SumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Config is one release.
type Config struct {
	Repo      string // the repository's root
	Out       string // the output directory (dist/), empty or absent
	Stamp     Stamp
	Platforms []Platform
	Helm      string // the helm binary
	CycloneDX string // the cyclonedx-gomod binary
	Base      BaseFiles
	Log       io.Writer
}

// Artefact is one file or directory of the output.
type Artefact struct {
	Path string
	Size int64 // a directory's: the sum of its files
}

// Result is what Run wrote.
type Result struct {
	Artefacts   []Artefact
	IndexDigest v1.Hash
}

// Run builds the release into cfg.Out. The input is checked first
// (Preflight is the caller's: it needs the tree before anything is
// written); then the binaries, their SBOMs, the images and the layout,
// the chart, and SHA256SUMS last.
func Run(ctx context.Context, cfg Config) (Result, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	if err := CheckVersion(cfg.Stamp.Version); err != nil {
		return Result{}, err
	}
	for _, tool := range []string{cfg.Helm, cfg.CycloneDX} {
		if _, err := os.Stat(tool); err != nil {
			return Result{}, fmt.Errorf("release tool missing (tools/build.sh helm cyclonedx): %w", err)
		}
	}
	if entries, err := os.ReadDir(cfg.Out); err == nil && len(entries) > 0 {
		return Result{}, fmt.Errorf("output directory %s is not empty", cfg.Out)
	}
	// The base layer first: a missing CA bundle fails in a second, not
	// after three builds.
	base, err := BaseLayer(cfg.Base, cfg.Stamp.Date)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return Result{}, err
	}
	start := time.Now()
	binaries := map[Platform]string{}
	for _, p := range cfg.Platforms {
		out := filepath.Join(cfg.Out, BinaryName(cfg.Stamp.Version, p))
		if err := BuildBinary(ctx, log, cfg.Repo, cfg.Stamp, p, out); err != nil {
			return Result{}, err
		}
		if err := WriteSBOM(ctx, log, cfg.CycloneDX, cfg.Repo, out, cfg.Stamp.Version, filepath.Join(cfg.Out, SBOMName(out))); err != nil {
			return Result{}, err
		}
		binaries[p] = out
	}
	var images []PlatformImage
	for _, p := range linuxPlatforms(cfg.Platforms) {
		img, err := Image(base, binaries[p], p, cfg.Stamp)
		if err != nil {
			return Result{}, err
		}
		images = append(images, PlatformImage{p, img})
	}
	var res Result
	if len(images) > 0 {
		idx, err := Index(images, cfg.Stamp)
		if err != nil {
			return Result{}, err
		}
		if err := WriteLayout(filepath.Join(cfg.Out, LayoutDir), idx, cfg.Stamp.Version); err != nil {
			return Result{}, err
		}
		if res.IndexDigest, err = idx.Digest(); err != nil {
			return Result{}, err
		}
		fmt.Fprintf(log, "release: OCI image index %s in %s\n", res.IndexDigest, filepath.Join(cfg.Out, LayoutDir))
	}
	if _, err := PackageChart(ctx, log, cfg.Helm, cfg.Repo, cfg.Stamp.Version, cfg.Out); err != nil {
		return Result{}, err
	}
	if err := WriteSums(cfg.Out); err != nil {
		return Result{}, err
	}
	if res.Artefacts, err = list(cfg.Out); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(log, "release: %s in %s\n", cfg.Out, time.Since(start).Round(time.Second))
	return res, nil
}

// list is the top level of dir with sizes.
func list(dir string) ([]Artefact, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Artefact
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var size int64
		err := filepath.WalkDir(p, func(_ string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			if err == nil {
				size += info.Size()
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, Artefact{p, size})
	}
	slices.SortFunc(out, func(a, b Artefact) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
