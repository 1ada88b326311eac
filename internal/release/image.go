package release

// The image is assembled from files with go-containerregistry, not built
// by a Docker engine (there is none on the release machine, nor in CI):
// two layers on nothing, the layout of gcr.io/distroless/static-debian12:
// nonroot, which the Dockerfile's image is. go-containerregistry is the
// library crane and ko are built on; it writes OCI layouts, pushes them,
// and its in-memory registry lets the test push and pull on loopback.

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image runs: the Dockerfile's USER, ENTRYPOINT and EXPOSE
// (dockerfile_test.go compares).
const (
	// ImageUser is numeric, so that runAsNonRoot can verify it without
	// reading /etc/passwd.
	ImageUser = "65532:65532"
	// ImageBinary is where the binary is in the image.
	ImageBinary = "/bin/" + Binary
	// ImagePort is the exporter's default listen port (:10329).
	ImagePort = "10329/tcp"
	// Description is the image's org.opencontainers.image.description.
	Description = "Prometheus exporter for the convergence and health SLOs of Kubernetes controllers"
)

// ImageEntrypoint is the image's entrypoint.
var ImageEntrypoint = []string{ImageBinary}

// The nonroot user's uid and gid, and distroless's /etc files for it.
const (
	nonrootID = 65532
	passwd    = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
	// Go's resolver reads it to order /etc/hosts before DNS.
	nsswitch = "hosts: files dns\n"
)

// imageEnv is distroless's: the PATH of a Debian system and the CA bundle.
var imageEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
}

// Default host files of the base layer: Debian's ca-certificates and
// tzdata packages (distroless's come from the same packages).
const (
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
	DefaultZoneinfo = "/usr/share/zoneinfo"
)

// BaseFiles are the host files the base layer copies.
type BaseFiles struct {
	// CABundle is a PEM bundle, installed at /etc/ssl/certs/ca-certificates.crt
	// (Go's first place on Linux): the exporter talks TLS to the API server
	// with its own CA, but the OTLP exporter to public endpoints too.
	CABundle string
	// Zoneinfo is a tzdata tree, installed at /usr/share/zoneinfo: report
	// --timezone loads a location by name. Empty: none.
	Zoneinfo string
}

// Annotations are the OCI annotations of the index and of every image, and
// the labels of every image's config (the Dockerfile's LABEL).
func Annotations(s Stamp) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       Binary,
		"org.opencontainers.image.description": Description,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.licenses":    License,
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Revision,
		"org.opencontainers.image.created":     s.Date.UTC().Format(time.RFC3339),
	}
}

// tarEntries writes a tar stream deterministically: every entry owned by
// root unless said otherwise, with the release's date as its time, so
// that the same commit gives the same layer digests.
type tarEntries struct {
	w    *tar.Writer
	date time.Time
	dirs map[string]bool
}

func newTar(w io.Writer, date time.Time) *tarEntries {
	return &tarEntries{w: tar.NewWriter(w), date: date, dirs: map[string]bool{}}
}

// dir writes name and its missing parents.
func (t *tarEntries) dir(name string, mode int64, owner int) error {
	if name == "." || name == "" || t.dirs[name] {
		return nil
	}
	if err := t.dir(path.Dir(name), 0o755, 0); err != nil {
		return err
	}
	t.dirs[name] = true
	return t.w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: t.date})
}

func (t *tarEntries) file(name string, mode int64, data []byte) error {
	if err := t.dir(path.Dir(name), 0o755, 0); err != nil {
		return err
	}
	if err := t.w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: t.date}); err != nil {
		return err
	}
	_, err := t.w.Write(data)
	return err
}

func (t *tarEntries) symlink(name, target string) error {
	if err := t.dir(path.Dir(name), 0o755, 0); err != nil {
		return err
	}
	return t.w.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: t.date})
}

// tree copies the host directory src to dst, regular files and relative
// symlinks, in lexical order (WalkDir's). Absolute symlinks are left out:
// they name the host (Debian's zoneinfo/localtime -> /etc/localtime).
func (t *tarEntries) tree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return t.dir(name, 0o755, 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				return nil
			}
			return t.symlink(name, filepath.ToSlash(target))
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return t.file(name, 0o644, data)
		}
		return nil // sockets, devices: nothing a tzdata tree has
	})
}

func (t *tarEntries) close() error { return t.w.Close() }

// layer is a gzip-compressed OCI layer of the tar that fill writes.
func layer(date time.Time, fill func(*tarEntries) error) (v1.Layer, error) {
	var buf bytes.Buffer
	t := newTar(&buf, date)
	if err := fill(t); err != nil {
		return nil, err
	}
	if err := t.close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// BaseLayer holds what distroless static's nonroot image has and the
// exporter uses: /etc/passwd and /etc/group with nonroot (65532), its
// home, /tmp, the CA bundle and tzdata. It is the same for every
// architecture: one blob in the layout and the registry.
func BaseLayer(files BaseFiles, date time.Time) (v1.Layer, error) {
	ca, err := os.ReadFile(files.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle for the image (Debian: apt-get install ca-certificates): %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA bundle %s: no PEM certificate in it", files.CABundle)
	}
	if files.Zoneinfo != "" {
		if _, err := os.Stat(filepath.Join(files.Zoneinfo, "UTC")); err != nil {
			return nil, fmt.Errorf("tzdata for the image (Debian: apt-get install tzdata): %w", err)
		}
	}
	return layer(date, func(t *tarEntries) error {
		for _, f := range []struct {
			name string
			data string
		}{{"etc/passwd", passwd}, {"etc/group", group}, {"etc/nsswitch.conf", nsswitch}} {
			if err := t.file(f.name, 0o644, []byte(f.data)); err != nil {
				return err
			}
		}
		if err := t.file("etc/ssl/certs/ca-certificates.crt", 0o644, ca); err != nil {
			return err
		}
		if err := t.dir("home/nonroot", 0o700, nonrootID); err != nil {
			return err
		}
		if err := t.dir("tmp", 0o1777, 0); err != nil {
			return err
		}
		if files.Zoneinfo != "" {
			return t.tree(files.Zoneinfo, "usr/share/zoneinfo")
		}
		return nil
	})
}

// BinaryLayer holds the binary at ImageBinary.
func BinaryLayer(binary string, date time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	return layer(date, func(t *tarEntries) error {
		return t.file(strings.TrimPrefix(ImageBinary, "/"), 0o755, data)
	})
}

// Image is the image of one linux platform: the base layer and the
// platform's binary, run as ImageUser.
func Image(base v1.Layer, binary string, p Platform, s Stamp) (v1.Image, error) {
	if p.OS != "linux" {
		return nil, fmt.Errorf("image for %s: images are linux only", p)
	}
	bin, err := BinaryLayer(binary, s.Date)
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", p, err)
	}
	created := v1.Time{Time: s.Date.UTC()}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           p.OS,
		Created:      created,
		// The layers' diff_ids are appended by mutate.Append below.
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:         ImageUser,
			Entrypoint:   ImageEntrypoint,
			Env:          imageEnv,
			WorkingDir:   "/home/nonroot",
			ExposedPorts: map[string]struct{}{ImagePort: {}},
			Labels:       Annotations(s),
		},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "kce-release: /etc/passwd, /etc/group (nonroot 65532), CA certificates, tzdata", Comment: "base"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "kce-release: COPY " + Binary + " " + ImageBinary}},
	)
	if err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, Annotations(s)).(v1.Image)
	if !ok {
		return nil, errors.New("annotated image is no image") // mutate.Annotations keeps the type
	}
	return annotated, nil
}

// PlatformImage is one entry of the index.
type PlatformImage struct {
	Platform Platform
	Image    v1.Image
}

// Index is the multi-arch OCI image index of the images.
func Index(images []PlatformImage, s Stamp) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, errors.New("image index: no linux platform")
	}
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, pi := range images {
		adds = append(adds, mutate.IndexAddendum{Add: pi.Image, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: pi.Platform.OS, Architecture: pi.Platform.Arch},
		}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	annotated, ok := mutate.Annotations(idx, Annotations(s)).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotated index is no index")
	}
	return annotated, nil
}

// RefNameAnnotation names an entry of an OCI layout's index.json (the
// image-spec's org.opencontainers.image.ref.name: the tag).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as the only entry of a new OCI image layout at
// dir, named tag: `crane push dir REF` pushes a layout of one entry as
// that entry, the multi-arch index.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("OCI layout %s: directory not empty", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: tag})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// LoadLayout reads the index that WriteLayout wrote, the way crane push
// reads a layout directory (cmd/crane/cmd/push.go: one entry, pushed as
// itself).
func LoadLayout(dir string) (v1.ImageIndex, error) {
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		kinds := make([]string, 0, len(m.Manifests))
		for _, d := range m.Manifests {
			kinds = append(kinds, string(d.MediaType))
		}
		return nil, fmt.Errorf("OCI layout %s: want one image index in index.json, have %d entries %v", dir, len(m.Manifests), kinds)
	}
	return l.ImageIndex(m.Manifests[0].Digest)
}

// linuxPlatforms are the platforms of ps that are images.
func linuxPlatforms(ps []Platform) []Platform {
	return slices.DeleteFunc(slices.Clone(ps), func(p Platform) bool { return p.OS != "linux" })
}
