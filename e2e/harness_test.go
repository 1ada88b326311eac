package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// grantRBAC gives readOnlyUser what the exporter needs (the resources of
// every collector), and noEndpointsUser the same without endpointslices.
func grantRBAC(ctx context.Context) error {
	for user, skip := range map[string]string{readOnlyUser: "", noEndpointsUser: "endpointslices", noEventsUser: "events"} {
		var rules []rbacv1.PolicyRule
		for _, r := range all.Resources() {
			if r.Resource == skip {
				continue
			}
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{"get", "list", "watch"}})
		}
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kce-" + user}, Rules: rules}
		if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return err
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kce-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// exporterProc is the real exporter binary running against the sandbox.
type exporterProc struct {
	t    testing.TB
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
}

// launchExporter runs the binary with args (a listen address is added).
func launchExporter(args ...string) (*exporterProc, error) {
	return launchExporterEnv(nil, args...)
}

// launchExporterEnv is launchExporter with env (KEY=VALUE) added to the
// test's own environment, e.g. client-go's KUBE_FEATURE_* gates.
func launchExporterEnv(env []string, args ...string) (*exporterProc, error) {
	port, err := sandbox.FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	e := &exporterProc{url: "http://" + addr, logs: &syncBuffer{}, done: make(chan error, 1)}
	e.cmd = exec.CommandContext(context.Background(), exporter, append([]string{"--web.listen-address=" + addr}, args...)...)
	e.cmd.Stdout, e.cmd.Stderr = e.logs, e.logs
	if env != nil {
		e.cmd.Env = append(os.Environ(), env...)
	}
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sandbox.StartCmd(e.cmd); err != nil {
		return nil, err
	}
	go func() { e.done <- e.cmd.Wait() }()
	return e, nil
}

// startExporter runs the binary for one test and stops it at its end.
func startExporter(t testing.TB, args ...string) *exporterProc {
	t.Helper()
	return startExporterEnv(t, nil, args...)
}

// startExporterEnv is startExporter with env added (see launchExporterEnv).
func startExporterEnv(t testing.TB, env []string, args ...string) *exporterProc {
	t.Helper()
	e, err := launchExporterEnv(env, args...)
	if err != nil {
		t.Fatal(err)
	}
	e.t = t
	t.Cleanup(func() {
		_, _ = e.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("exporter log:\n%s", tail(e.logs.String(), 60))
		}
	})
	return e
}

// forTest returns the shared exporter bound to t (for failures and logs).
func (e *exporterProc) forTest(t testing.TB) *exporterProc {
	c := *e
	c.t = t
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared exporter log:\n%s", tail(e.logs.String(), 60))
		}
	})
	return &c
}

// stop sends SIGTERM and waits; it returns how long the process took to
// exit and its exit error, or fails after timeout.
func (e *exporterProc) stop(timeout time.Duration) (time.Duration, error) {
	if e.cmd.ProcessState != nil {
		return 0, nil
	}
	start := time.Now()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.done:
		return time.Since(start), err
	case <-time.After(timeout):
		_ = e.cmd.Process.Kill()
		<-e.done //nolint:errcheck // killed: the exit error says only that
		if e.t != nil {
			e.t.Errorf("exporter did not exit within %v of SIGTERM", timeout)
		}
		return time.Since(start), errors.New("killed after the timeout")
	}
}

func (e *exporterProc) get(path string) (int, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, e.url+path, nil)
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

// waitReady waits for /readyz to answer 200.
func (e *exporterProc) waitReady(timeout time.Duration) string {
	e.t.Helper()
	var body string
	eventually(e.t, timeout, "exporter /readyz", func() (bool, string) {
		code, b, err := e.get("/readyz")
		body = b
		return err == nil && code == http.StatusOK, fmt.Sprintf("code=%d err=%v body=%s", code, err, b)
	})
	return body
}

// ready waits for /readyz without a test (TestMain).
func (e *exporterProc) ready(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := e.get("/readyz")
		if err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: code %d body %s: %w", timeout, code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape returns the exporter's metric families (text format).
func (e *exporterProc) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	code, body, err := e.get("/metrics")
	if err != nil || code != http.StatusOK {
		e.t.Fatalf("scrape: code %d err %v", code, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		e.t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// value returns the value of the sample of family name whose labels include
// match (gauge, counter; for histograms the sample count), and whether found.
func value(mfs map[string]*dto.MetricFamily, name string, match map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// histogram returns the sum and count of the histogram series matching.
func histogram(mfs map[string]*dto.MetricFamily, name string, match map[string]string) (sum float64, count uint64) {
	mf := mfs[name]
	if mf == nil {
		return 0, 0
	}
	for _, m := range mf.Metric {
		if labelsMatch(m, match) && m.Histogram != nil {
			sum += m.Histogram.GetSampleSum()
			count += m.Histogram.GetSampleCount()
		}
	}
	return sum, count
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// eventually polls cond every 100 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, info := cond()
		if ok {
			return
		}
		last = info
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func promtool(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KCE_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".bin")
	}
	p := filepath.Join(dir, "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("promtool not built (run make tools): %v", err)
	}
	return p
}

// deployBase holds the shipped manifests (kubectl apply -k deploy/base).
const deployBase = "../deploy/base"

// readManifest decodes one single-document manifest of deploy/base into
// obj (a typed API object).
func readManifest(name string, obj any) error {
	b, err := os.ReadFile(filepath.Join(deployBase, name))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// installShippedRBAC creates the ServiceAccount, ClusterRole and
// ClusterRoleBinding of deploy/base as they are written (kustomize only
// adds labels), and the namespace they expect, which deploy/base leaves to
// the user. It returns the ServiceAccount.
func installShippedRBAC(ctx context.Context) (*corev1.ServiceAccount, error) {
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
	)
	for name, obj := range map[string]any{"serviceaccount.yaml": &sa, "clusterrole.yaml": &role, "clusterrolebinding.yaml": &binding} {
		if err := readManifest(name, obj); err != nil {
			return nil, err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sa.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", sa.Namespace, err)
	}
	if _, err := client.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("serviceaccount.yaml: %w", err)
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("clusterrole.yaml: %w", err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("clusterrolebinding.yaml: %w", err)
	}
	return &sa, nil
}

// writeServiceAccountKubeconfig writes to path a kubeconfig that
// authenticates as ServiceAccount namespace/name with a TokenRequest token
// (the kind the kubelet mounts, bound to the account) and verifies the API
// server with the sandbox's CA.
func writeServiceAccountKubeconfig(ctx context.Context, namespace, name, path string, ttl time.Duration) error {
	tok, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	cfg := rest.CopyConfig(sb.AdminConfig())
	cfg.BearerToken, cfg.BearerTokenFile = tok.Status.Token, ""
	return sb.WriteKubeconfig(path, cfg)
}

// manifestArgs returns the exporter container's args of
// deploy/base/deployment.yaml without the listen and probe addresses
// (":10329", ":10330"), which the tests replace with free loopback ports.
func manifestArgs() ([]string, error) {
	var d appsv1.Deployment
	if err := readManifest("deployment.yaml", &d); err != nil {
		return nil, err
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("deployment.yaml: %d containers, want the exporter alone", len(d.Spec.Template.Spec.Containers))
	}
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--web.listen-address=") || strings.HasPrefix(a, "--web.probe-address=") {
			continue
		}
		args = append(args, a)
	}
	return args, nil
}
