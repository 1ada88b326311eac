package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1" //nolint:gosec // a fake git commit id, as source-controller reports one; no security use
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// KustomizeController is the name of Flux's kustomize-controller binary
// (tools/build.sh, component flux) and the stem of its log file.
const KustomizeController = "kustomize-controller"

// fluxCRDDir is where tools/build.sh copies Flux's CRDs, under the bin dir:
// kustomize-controller's own and source-controller's, from the modules
// tools/flux pins.
const fluxCRDDir = "flux-crds"

// fluxCRDs are the CRDs the controller needs: its own, and every source kind
// it watches (it watches OCIRepository and Bucket even when no Kustomization
// refers to one, and its caches never sync without their CRDs).
// ExternalArtifact is watched only behind a feature gate, off by default at
// v1.9.6, and applied anyway: it costs one CRD.
var fluxCRDs = []string{
	"kustomize.toolkit.fluxcd.io_kustomizations.yaml",
	"source.toolkit.fluxcd.io_gitrepositories.yaml",
	"source.toolkit.fluxcd.io_ocirepositories.yaml",
	"source.toolkit.fluxcd.io_buckets.yaml",
	"source.toolkit.fluxcd.io_externalartifacts.yaml",
}

// Flux resources the sandbox writes or tests read.
var (
	crdResource           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	GitRepositoryResource = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	KustomizationResource = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// FluxOptions configures StartKustomizeController.
type FluxOptions struct {
	// BinDir holds the kustomize-controller binary and flux-crds/; default:
	// the sandbox's bin dir.
	BinDir string
	// ExtraArgs are appended to the command line (a later flag wins), e.g.
	// "--concurrent=1".
	ExtraArgs []string
}

// Flux is Flux's real kustomize-controller running against a sandbox, and
// a loopback artefact server standing in for source-controller's storage.
// source-controller itself is not run: PublishGitRepository writes a
// GitRepository's status the way it would, pointing at a tarball served
// here.
type Flux struct {
	sb          *Sandbox
	dyn         dynamic.Interface
	sp          *spawner
	proc        *process
	logPath     string
	metricsAddr string
	healthAddr  string
	artifacts   *artifactServer

	stopOnce sync.Once
	stopErr  error
}

// StartKustomizeController applies Flux's CRDs to the sandbox, starts the
// artefact server and kustomize-controller (admin kubeconfig, all
// namespaces, no leader election, no events address: its events go to the
// API server only), and returns once the controller's workers run. Its log
// is KustomizeController.log in the sandbox dir; Stop ends it by its pid.
func StartKustomizeController(ctx context.Context, s *Sandbox, o FluxOptions) (_ *Flux, err error) {
	if !s.enabled[APIServer] {
		return nil, errors.New("flux: the sandbox runs no kube-apiserver")
	}
	binDir := o.BinDir
	if binDir == "" {
		binDir = s.binDir
	}
	bin, err := binary(binDir, KustomizeController)
	if err != nil {
		return nil, fmt.Errorf("flux: %w", err)
	}
	dyn, err := dynamic.NewForConfig(s.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("flux: %w", err)
	}
	f := &Flux{sb: s, dyn: dyn, sp: newSpawner(), logPath: s.path(KustomizeController + ".log")}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
		}
	}()
	if err := applyCRDs(ctx, dyn, filepath.Join(binDir, fluxCRDDir), fluxCRDs); err != nil {
		return nil, fmt.Errorf("flux: %w", err)
	}
	if f.artifacts, err = startArtifactServer(); err != nil {
		return nil, fmt.Errorf("flux: %w", err)
	}
	// The controller untars every artefact into a temp dir: keep them in
	// the sandbox dir, removed with it.
	tmp := s.path(KustomizeController + "-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("flux: %w", err)
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, fmt.Errorf("flux: %w", err)
		}
		f.metricsAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
		f.healthAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
		var offset int64
		if st, err := os.Stat(f.logPath); err == nil {
			offset = st.Size()
		}
		args := append([]string{
			// There is no --kubeconfig flag: controller-runtime's GetConfig
			// reads $KUBECONFIG (set below).
			"--metrics-addr=" + f.metricsAddr,
			"--health-addr=" + f.healthAddr,
			"--watch-all-namespaces=true",
			"--enable-leader-election=false",
			"--events-addr=",
			"--no-remote-bases=true",
			// The artefact server is on loopback and does not fail; the
			// default 9 retries with a 5 s minimum wait would hide a bug
			// for 45 s.
			"--http-retry=1",
			"--log-encoding=json",
		}, o.ExtraArgs...)
		spec := launchSpec{
			name: KustomizeController, bin: bin, args: args, logPath: f.logPath,
			env: []string{
				"KUBECONFIG=" + s.Kubeconfig(""),
				"TMPDIR=" + tmp,
				// Read by its SOPS and kubeconfig features only; set so
				// that nothing falls back to a developer's environment.
				"RUNTIME_NAMESPACE=flux-system",
				"HOME=" + tmp,
			},
			ready: f.readyProbe(offset),
		}
		f.proc, err = launch(ctx, f.sp, spec)
		if err == nil {
			s.logf("sandbox: %s ready (pid %d, metrics %s)", KustomizeController, f.proc.pid(), f.metricsAddr)
			return f, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, fmt.Errorf("flux: %w", err)
		}
	}
}

// readyProbe wants /readyz to answer and the controller's workers to have
// started, which happens only once its caches synced (a missing source CRD
// shows here, not minutes later as a cache sync timeout).
func (f *Flux) readyProbe(logOffset int64) func(context.Context) error {
	health := f.sb.httpProbe("http://"+f.healthAddr+"/readyz", "", "")
	return func(ctx context.Context) error {
		if err := health(ctx); err != nil {
			return err
		}
		// controller-runtime logs this once per controller, after WaitForCacheSync.
		if !bytes.Contains(logSince(f.logPath, logOffset), []byte(`"msg":"Starting workers"`)) {
			return errors.New("workers not started yet (caches syncing)")
		}
		return nil
	}
}

// MetricsAddr is the controller's metrics address (host:port, plain HTTP,
// path /metrics): controller-runtime's workqueue_* and
// controller_runtime_reconcile_* families, and Flux's gotk_* ones.
func (f *Flux) MetricsAddr() string { return f.metricsAddr }

// MetricsTarget is a scrape job "kustomize-controller" for MetricsAddr.
func (f *Flux) MetricsTarget() ScrapeTarget {
	return ScrapeTarget{Job: KustomizeController, Addr: f.metricsAddr}
}

// LogPath is the controller's log file (JSON lines), in the sandbox dir.
func (f *Flux) LogPath() string { return f.logPath }

// LogTail returns the last n lines of the controller's log.
func (f *Flux) LogTail(n int) string { return logTail(f.logPath, n) }

// Stop stops the controller by its pid (SIGTERM, SIGKILL after 10 s) and
// closes the artefact server. Kustomizations keep their finalizer: delete
// them before Stop, or their namespace cannot be deleted. Idempotent.
func (f *Flux) Stop() error {
	f.stopOnce.Do(func() {
		var errs []error
		if f.proc != nil {
			errs = append(errs, f.proc.stop(stopGrace))
		}
		f.sp.close()
		if f.artifacts != nil {
			errs = append(errs, f.artifacts.close())
		}
		if err := errors.Join(errs...); err != nil {
			f.stopErr = fmt.Errorf("flux: stop: %w", err)
		}
	})
	return f.stopErr
}

// Artifact is what source-controller writes into a source's
// status.artifact, for a tarball the artefact server serves.
type Artifact struct {
	Path     string // gitrepository/<namespace>/<name>/<sha256 hex>.tar.gz
	URL      string // http://127.0.0.1:PORT/<Path>
	Revision string // main@sha1:<hex>, like a Git source's
	Digest   string // sha256:<hex> of the tarball, which the controller verifies
	Size     int64
}

// PublishGitRepository serves files (slash-separated paths relative to the
// repository root, and their contents) as a gzipped tarball and makes the
// GitRepository namespace/name point at it: the object is created if
// needed, then its status is written as source-controller writes it after a
// successful fetch (artifact, Ready=True and ArtifactInStorage=True at the
// object's generation, observedGeneration). A Kustomization referring to it
// is reconciled on a new revision. The revision is derived from the
// content, so publishing the same files again changes nothing.
func (f *Flux) PublishGitRepository(ctx context.Context, namespace, name string, files map[string]string) (Artifact, error) {
	tarball, err := tarGz(files)
	if err != nil {
		return Artifact{}, fmt.Errorf("flux: %w", err)
	}
	sum := sha256.Sum256(tarball)
	commit := sha1.Sum(tarball) //nolint:gosec // see the import
	a := Artifact{
		Path:     "gitrepository/" + namespace + "/" + name + "/" + hex.EncodeToString(sum[:]) + ".tar.gz",
		Revision: "main@sha1:" + hex.EncodeToString(commit[:]),
		Digest:   "sha256:" + hex.EncodeToString(sum[:]),
		Size:     int64(len(tarball)),
	}
	a.URL = f.artifacts.serve(a.Path, tarball)

	repos := f.dyn.Resource(GitRepositoryResource).Namespace(namespace)
	repo, err := repos.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		repo, err = repos.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
			"metadata": map[string]any{"name": name, "namespace": namespace},
			// Never fetched: source-controller is not running. The URL is
			// in the reserved .invalid domain, so nothing could reach it.
			"spec": map[string]any{"url": "https://git.invalid/" + namespace + "/" + name, "interval": "1h",
				"ref": map[string]any{"branch": "main"}},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("flux: GitRepository %s/%s: %w", namespace, name, err)
	}
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	gen := repo.GetGeneration()
	msg := "stored artifact for revision '" + a.Revision + "'"
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": "Succeeded", "message": msg,
			"observedGeneration": gen, "lastTransitionTime": now}
	}
	repo.Object["status"] = map[string]any{
		"observedGeneration": gen,
		"conditions":         []any{cond("Ready"), cond("ArtifactInStorage")},
		"artifact": map[string]any{
			"path": a.Path, "url": a.URL, "revision": a.Revision, "digest": a.Digest,
			"size": a.Size, "lastUpdateTime": now,
		},
	}
	if _, err := repos.UpdateStatus(ctx, repo, metav1.UpdateOptions{}); err != nil {
		return Artifact{}, fmt.Errorf("flux: GitRepository %s/%s status: %w", namespace, name, err)
	}
	return a, nil
}

// tarGz packs files into a gzipped tarball with fixed modes and times, in
// name order, so the same files always give the same digest.
func tarGz(files map[string]string) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		if n == "" || strings.HasPrefix(n, "/") || slices.Contains(strings.Split(n, "/"), "..") {
			return nil, fmt.Errorf("artefact file name %q is not a relative path", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// artifactServer serves published tarballs on loopback, as
// source-controller's storage server does (GET of the artifact's path).
// A test publishes a handful; they are kept until close.
type artifactServer struct {
	base string
	srv  *http.Server
	done chan error

	mu    sync.Mutex
	files map[string][]byte
}

func startArtifactServer() (*artifactServer, error) {
	l, err := listenLoopback()
	if err != nil {
		return nil, fmt.Errorf("artefact server: %w", err)
	}
	a := &artifactServer{base: "http://" + l.Addr().String(), files: map[string][]byte{}, done: make(chan error, 1)}
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { a.done <- a.srv.Serve(l) }()
	return a, nil
}

func (a *artifactServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a.mu.Lock()
	b, ok := a.files[strings.TrimPrefix(r.URL.Path, "/")]
	a.mu.Unlock()
	if !ok {
		// The controller reads a 404 as "source not ready" and retries.
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (a *artifactServer) serve(path string, b []byte) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[path] = b
	return a.base + "/" + path
}

func (a *artifactServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if serveErr := <-a.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("artefact server: %w", err)
	}
	return nil
}

// applyCRDs server-side applies the named CRD files of dir and waits until
// each is Established and its resource is served.
func applyCRDs(ctx context.Context, dyn dynamic.Interface, dir string, names []string) error {
	var applied []*unstructured.Unstructured
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("CRD %s (copied by tools/build.sh flux): %w", n, err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&obj.Object); err != nil {
			return fmt.Errorf("CRD %s: %w", n, err)
		}
		// Controller-gen writes a creationTimestamp: null, which apply rejects.
		unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
		out, err := dyn.Resource(crdResource).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "kce-sandbox", Force: true})
		if err != nil {
			return fmt.Errorf("applying CRD %s: %w", obj.GetName(), err)
		}
		applied = append(applied, out)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, c := range applied {
		if err := waitCRDServed(ctx, dyn, c); err != nil {
			return err
		}
	}
	return nil
}

// waitCRDServed polls until the CRD is Established and a list of its
// storage version answers (the API server serves a new resource a moment
// after Established).
func waitCRDServed(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var version string
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["storage"] == true {
			version, _ = m["name"].(string)
		}
	}
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("not established")
	for {
		cur, err := dyn.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil && crdEstablished(cur) {
			if _, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				return nil
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not served: %w (last: %w)", crd.GetName(), ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
