package release

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tool is a binary of tools/build.sh: in $KCE_BIN_DIR (make exports it),
// else in the repository's .bin.
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, ".bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not built (make tools, or tools/build.sh): %v", name, err)
	}
	return p
}

// testWriter logs a command's output into the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestImageAndChartThroughARegistry is a release's image and chart on their
// way to a user: built as make release builds them (one platform, this
// machine's, to be quick), pushed to a registry the way
// docs/releasing.md says (the layout as crane push reads it; helm push),
// pulled back with crane and helm pull, and used: the image's config and
// files, the binary out of the image run with --version, the pulled
// chart rendered.
func TestImageAndChartThroughARegistry(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the image's linux binary")
	}
	ctx := t.Context()
	helm := tool(t, "helm")
	dir := t.TempDir()
	logw := testWriter{t}
	s := Stamp{
		Version:   "1.2.3-rc.1",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Branch:    "release-test",
		BuildUser: DefaultBuildUser,
		Date:      time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC),
	}
	p := Platform{"linux", runtime.GOARCH}

	start := time.Now()
	bin := filepath.Join(dir, BinaryName(s.Version, p))
	if err := BuildBinary(ctx, logw, repoRoot, s, p, bin); err != nil {
		t.Fatal(err)
	}
	base, err := BaseLayer(BaseFiles{CABundle: DefaultCABundle, Zoneinfo: DefaultZoneinfo}, s.Date)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image(base, bin, p, s)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index([]PlatformImage{{p, img}}, s)
	if err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, LayoutDir)
	if err := WriteLayout(layoutDir, idx, s.Version); err != nil {
		t.Fatal(err)
	}
	chart, err := PackageChart(ctx, logw, helm, repoRoot, s.Version, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the binary, image and chart in %s", time.Since(start).Round(time.Millisecond))

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	imageRef := host + "/kube-convergence/kube-convergence-exporter:" + s.Version

	// Push: what `crane push dist/oci REF` does with the layout.
	loaded, err := LoadLayout(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(imageRef, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, loaded, remote.WithContext(ctx)); err != nil {
		t.Fatalf("pushing the layout: %v", err)
	}
	helmHome := filepath.Join(dir, "helm-home")
	helmCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, helm, args...)
		// Helm's registry config, cache and data in the test's directory:
		// nothing of the user's is read or written.
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"), "HELM_DATA_HOME="+filepath.Join(helmHome, "data"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	helmCmd("push", chart, "oci://"+host+"/kube-convergence/charts", "--plain-http")

	opts := []crane.Option{crane.Insecure, crane.WithContext(ctx)}
	want := Annotations(s)

	t.Run("index", func(t *testing.T) {
		raw, err := crane.Manifest(imageRef, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var m v1.IndexManifest
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIImageIndex {
			t.Errorf("media type %s, want %s", m.MediaType, types.OCIImageIndex)
		}
		if !maps.Equal(m.Annotations, want) {
			t.Errorf("index annotations %v, want %v", m.Annotations, want)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.OS != p.OS || m.Manifests[0].Platform.Architecture != p.Arch {
			t.Errorf("index manifests %+v, want one for %s", m.Manifests, p)
		}
		pushed, _ := idx.Digest()
		if got, err := crane.Digest(imageRef, opts...); err != nil || got != pushed.String() {
			t.Errorf("pulled index digest %s (%v), the layout's %s", got, err, pushed)
		}
	})

	pulled, err := crane.Pull(imageRef, append(opts, crane.WithPlatform(&v1.Platform{OS: p.OS, Architecture: p.Arch}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("image config", func(t *testing.T) {
		cf, err := pulled.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Arch {
			t.Errorf("platform %s/%s, want %s", cf.OS, cf.Architecture, p)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532", cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/bin/kube-convergence-exporter"}) || len(cf.Config.Cmd) != 0 {
			t.Errorf("entrypoint %q cmd %q", cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if _, ok := cf.Config.ExposedPorts["10329/tcp"]; !ok {
			t.Errorf("exposed ports %v", cf.Config.ExposedPorts)
		}
		if !maps.Equal(cf.Config.Labels, want) {
			t.Errorf("labels %v, want %v", cf.Config.Labels, want)
		}
		if cf.RootFS.Type != "layers" || len(cf.RootFS.DiffIDs) != 2 {
			t.Errorf("rootfs %+v, want type layers and 2 diff_ids", cf.RootFS)
		}
		if !cf.Created.Equal(s.Date) {
			t.Errorf("created %s, want %s", cf.Created, s.Date)
		}
		m, err := pulled.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
			t.Errorf("media types %s, %s: want OCI", m.MediaType, m.Config.MediaType)
		}
		if !maps.Equal(m.Annotations, want) {
			t.Errorf("image annotations %v, want %v", m.Annotations, want)
		}
	})

	// The image's file system, flattened; the binary written out to run.
	files := map[string]*tar.Header{}
	extracted := filepath.Join(dir, "from-the-image")
	var passwd string
	rc := mutate.Extract(pulled)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		switch h.Name {
		case "bin/kube-convergence-exporter":
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(extracted, data, 0o755); err != nil {
				t.Fatal(err)
			}
		case "etc/passwd":
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			passwd = string(data)
		}
	}
	_ = rc.Close()

	t.Run("image files", func(t *testing.T) {
		for name, mode := range map[string]int64{
			"bin/kube-convergence-exporter":     0o755,
			"etc/ssl/certs/ca-certificates.crt": 0o644,
			"etc/group":                         0o644,
			"usr/share/zoneinfo/Etc/UTC":        0o644,
			"usr/share/zoneinfo/Europe/Berlin":  0o644,
			"home/nonroot":                      0o700,
			"tmp":                               0o1777,
		} {
			h, ok := files[name]
			if !ok {
				t.Errorf("%s missing", name)
				continue
			}
			if h.Mode != mode {
				t.Errorf("%s: mode %o, want %o", name, h.Mode, mode)
			}
		}
		if h := files["home/nonroot"]; h != nil && (h.Uid != 65532 || h.Gid != 65532) {
			t.Errorf("home/nonroot owned by %d:%d", h.Uid, h.Gid)
		}
		if !strings.Contains(passwd, "\nnonroot:x:65532:65532:") {
			t.Errorf("etc/passwd has no nonroot 65532:\n%s", passwd)
		}
	})

	t.Run("binary from the image", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, extracted, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("--version: %v\n%s", err, out)
		}
		for _, w := range []string{
			"kube-convergence-exporter, version 1.2.3-rc.1 (branch: release-test, revision: 0123456789abcdef0123456789abcdef01234567)",
			"build user:       kce-release",
			"build date:       20260509-10:00:00",
			"platform:         " + p.String(),
		} {
			if !strings.Contains(string(out), w) {
				t.Errorf("--version does not say %q:\n%s", w, out)
			}
		}
	})

	t.Run("chart", func(t *testing.T) {
		pulledDir := filepath.Join(dir, "pulled")
		if err := os.Mkdir(pulledDir, 0o755); err != nil {
			t.Fatal(err)
		}
		helmCmd("pull", "oci://"+host+"/kube-convergence/charts/kube-convergence-exporter", "--version", s.Version, "--plain-http", "--destination", pulledDir)
		pulledChart := filepath.Join(pulledDir, ChartName(s.Version))
		if _, err := os.Stat(pulledChart); err != nil {
			t.Fatal(err)
		}
		out := helmCmd("template", "kce", pulledChart, "--namespace", "monitoring")
		for _, w := range []string{
			"image: ghcr.io/kube-convergence/kube-convergence-exporter:1.2.3-rc.1",
			"helm.sh/chart: kube-convergence-exporter-1.2.3-rc.1",
			"app.kubernetes.io/version: 1.2.3-rc.1", // Helm 4 writes the quoted string plain
		} {
			if !strings.Contains(out, w) {
				t.Errorf("helm template of the pulled chart lacks %q", w)
			}
		}
	})
}
