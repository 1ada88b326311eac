package calibration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// exporterProc is the exporter under test, restartable on the same
// address (Prometheus scrapes one static target).
type exporterProc struct {
	t    *testing.T
	addr string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs bytes.Buffer // every run's output
	done chan error
}

func startExporter(t *testing.T, args ...string) *exporterProc {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e := &exporterProc{t: t, addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), args: args}
	e.start()
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("exporter log (tail):\n%s", tail(e.log(), 80))
		}
	})
	return e
}

func (e *exporterProc) start() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	cmd := exec.CommandContext(context.Background(), exporter, append([]string{"--web.listen-address=" + e.addr}, e.args...)...)
	w := &lockedWriter{mu: &e.mu, w: &e.logs}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sandbox.StartCmd(cmd); err != nil {
		e.t.Fatal(err)
	}
	e.cmd, e.done = cmd, make(chan error, 1)
	go func(done chan error) { done <- cmd.Wait() }(e.done)
}

// stop sends SIGTERM and waits up to 20 s.
func (e *exporterProc) stop() {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		e.t.Logf("exporter exited: %v", err)
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		e.t.Logf("exporter killed after 20 s: %v", <-done)
	}
}

func (e *exporterProc) log() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *exporterProc) get(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (e *exporterProc) waitReady(timeout time.Duration) {
	e.t.Helper()
	eventually(e.t, timeout, "exporter /readyz", func() (bool, string) {
		code, body, err := e.get("/readyz")
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %s", code, err, body)
	})
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, l := cond()
		if ok {
			return
		}
		last = l
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, last)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// moduleFile reads path inside module@version from the Go module cache,
// downloading the module from the Go module proxy if needed: the real
// CRDs operators ship, never a copy in this repository.
func moduleFile(t *testing.T, module, version, path string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir() // outside this module: no go.mod to change
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", module, version, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s", module, version, err, info.Error)
	}
	b, err := os.ReadFile(filepath.Join(info.Dir, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRD creates the CRD in b and waits until its resource is served.
func applyCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface, b []byte) schema.GroupVersionResource {
	t.Helper()
	var crd unstructured.Unstructured
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("CRD %s: %v", crd.GetName(), err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var version string
	for _, v := range versions {
		m := v.(map[string]any)
		if m["storage"] == true {
			version = m["name"].(string)
		}
	}
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	eventually(t, 30*time.Second, "CRD "+crd.GetName()+" served", func() (bool, string) {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	return gvr
}

// fixture returns document doc of testdata/operators/<file>: an object as
// its operator writes it, read from the operator's source (the file's
// header names the version).
func fixture(t *testing.T, file string, doc int) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "operators", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for i := 0; ; {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: document %d: %v", file, doc, err)
		}
		if m == nil {
			continue // an empty document (a leading ---)
		}
		if i < doc {
			i++
			continue
		}
		// Through JSON: unstructured wants int64 and string times.
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatal(err)
		}
		return u
	}
}

// asNew is the fixture object f as a new object namespace/name: what the
// API server sets is dropped.
func asNew(f *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured {
	u := f.DeepCopy()
	delete(u.Object, "status")
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if l := f.GetLabels(); len(l) > 0 {
		meta["labels"] = map[string]any{}
		for k, v := range l {
			meta["labels"].(map[string]any)[k] = v
		}
	}
	u.Object["metadata"] = meta
	return u
}

// statusAt is the fixture's status with every observed generation (the
// status field, lastAttemptedGeneration and the conditions' own) set to
// gen and every time to now, as its operator would write it for gen.
func statusAt(f *unstructured.Unstructured, gen int64) map[string]any {
	st, _ := f.DeepCopy().Object["status"].(map[string]any)
	now := time.Now().UTC().Format(time.RFC3339)
	for _, k := range []string{"observedGeneration", "lastAttemptedGeneration"} {
		if _, ok := st[k]; ok {
			st[k] = gen
		}
	}
	if conds, ok := st["conditions"].([]any); ok {
		for _, c := range conds {
			m := c.(map[string]any)
			if _, ok := m["observedGeneration"]; ok {
				m["observedGeneration"] = gen
			}
			if _, ok := m["lastTransitionTime"]; ok {
				m["lastTransitionTime"] = now
			}
		}
	}
	return st
}
