package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// basic_auth_users of the web config: user "prometheus", password
// probeTestPassword, bcrypt cost 10 (exporter-toolkit accepts only bcrypt).
const (
	probeTestUser     = "prometheus"
	probeTestPassword = "probe-test-secret"
	probeTestHash     = "$2a$10$6Cvkq62blutKKbLRKPkpQ.d79nzMZmKGP51HvImqfD9lVxRH9IWZa"
)

// With --web.config.file basic auth on the main listener, the kubelet's
// probes (which send no credentials) answer on --web.probe-address, which
// serves nothing else; the metrics still need the password.
func TestProbeAddressWithBasicAuth(t *testing.T) {
	webConfig := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  "+probeTestUser+": "+probeTestHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := freeAddr(t)
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(readOnlyUser), "--web.config.file="+webConfig, "--web.probe-address="+probe)
	probeURL := "http://" + probe

	request := func(url, user, password string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	eventually(t, 60*time.Second, "/readyz 200 on the probe listener without credentials", func() (bool, string) {
		code, body := request(probeURL+"/readyz", "", "")
		return code == http.StatusOK, body
	})
	// The probe port says the verdict only; the main listener, behind
	// the credentials, names the collectors.
	if code, body := request(probeURL+"/readyz", "", ""); body != "ready\n" {
		t.Errorf("probe /readyz = %d:\n%s\nwant the verdict only", code, body)
	}
	if code, body := request(probeURL+"/healthz", "", ""); code != http.StatusOK || body != "ok\n" {
		t.Errorf("probe /healthz = %d %q, want 200 ok", code, body)
	}
	for _, path := range []string{"/metrics", "/"} {
		if code, _ := request(probeURL+path, "", ""); code != http.StatusNotFound {
			t.Errorf("probe listener %s = %d, want 404 (the probe port exposes nothing else)", path, code)
		}
	}

	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := request(e.url+path, "", ""); code != http.StatusUnauthorized {
			t.Errorf("main listener %s without credentials = %d, want 401", path, code)
		}
	}
	if code, _ := request(e.url+"/metrics", probeTestUser, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("main /metrics with a wrong password = %d, want 401", code)
	}
	code, body := request(e.url+"/metrics", probeTestUser, probeTestPassword)
	if code != http.StatusOK || !strings.Contains(body, "kube_convergence_collector_up{collector=\"rollouts\"} 1") {
		t.Errorf("main /metrics with the password = %d, %d bytes", code, len(body))
	}
	if code, body := request(e.url+"/readyz", probeTestUser, probeTestPassword); !strings.Contains(body, "collector rollouts: synced") {
		t.Errorf("main /readyz with the password = %d:\n%s", code, body)
	}
	if !strings.Contains(e.logs.String(), "serving /healthz and /readyz over plain HTTP") {
		t.Errorf("no log line for the probe listener:\n%s", tail(e.logs.String(), 20))
	}
}

// Bad flags and bad config files fail at start with a clear message and no
// goroutine dump: flags exit 2 (like an unknown flag), a config file or a
// taken probe port exits 1 (like an unreachable listen address).
func TestBadStartFailsWithoutGoroutineDump(t *testing.T) {
	dir := t.TempDir()
	twoDocs := filepath.Join(dir, "two-docs.yaml")
	zeroPod := filepath.Join(dir, "zero-pod.yaml")
	for path, doc := range map[string]string{
		twoDocs: "stall: {threshold: 1m}\n---\ncollectors: {pods: {enabled: false}}\n",
		zeroPod: "stall:\n  perKind:\n    Pod: 0s\n",
	} {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	taken, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	kc := "--kubeconfig=" + sb.Kubeconfig(readOnlyUser)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"telemetry path /healthz", []string{"--web.telemetry-path=/healthz"}, 2,
			`kube-convergence-exporter: --web.telemetry-path: "/healthz" is the liveness probe; want an absolute path such as /metrics (see --help)`},
		{"telemetry path without /", []string{"--web.telemetry-path=metrics"}, 2,
			`kube-convergence-exporter: --web.telemetry-path: "metrics" is not absolute; want an absolute path such as /metrics (see --help)`},
		{"empty telemetry path", []string{"--web.telemetry-path="}, 2,
			`kube-convergence-exporter: --web.telemetry-path: empty; want an absolute path such as /metrics (see --help)`},
		{"second YAML document", []string{"--config.file=" + twoDocs}, 1,
			`config file ` + twoDocs + `: line 2: a second YAML document: the file must hold exactly one`},
		{"zero per-kind stall threshold", []string{"--config.file=" + zeroPod}, 1,
			`config file ` + zeroPod + `: line 3: stall.perKind.Pod: must be a positive duration such as \"5m\", got 0s`},
		{"probe port taken", []string{"--web.probe-address=" + taken.Addr().String()}, 1,
			`--web.probe-address: listen tcp ` + taken.Addr().String() + `: bind: address already in use`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{kc, "--web.listen-address=" + freeAddr(t)}, tc.args...)
			out, err := exec.CommandContext(ctx, exporter, args...).CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != tc.code || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit %d (want %d), output:\n%s\nwant it to contain:\n%s", code, tc.code, out, tc.want)
			}
			if strings.Contains(string(out), "panic:") || strings.Contains(string(out), "goroutine ") {
				t.Errorf("goroutine dump:\n%s", out)
			}
		})
	}
}

// An access review that fails is not an answer: with the system:basic-user
// binding removed, the real API server answers every SelfSubjectAccessReview
// with 403 (an error about the review, not a verdict on list/watch). The
// collectors stay pending and /readyz 503 with the error, for as long as it
// lasts; once the binding is back the retries get answers and the exporter
// turns ready without a restart.
func TestAccessReviewErrorKeepsCollectorsPending(t *testing.T) {
	ctx := context.Background()
	crbs := client.RbacV1().ClusterRoleBindings()
	basic, err := crbs.Get(ctx, "system:basic-user", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		b := basic.DeepCopy()
		b.ResourceVersion, b.UID = "", ""
		if _, err := crbs.Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restore system:basic-user: %v", err)
		}
	}
	t.Cleanup(restore)
	if err := crbs.Delete(ctx, basic.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	viewer := kubernetes.NewForConfigOrDie(sb.UserConfig(readOnlyUser))
	eventually(t, 10*time.Second, "SelfSubjectAccessReviews forbidden for the viewer", func() (bool, string) {
		_, err := viewer.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}},
		}, metav1.CreateOptions{})
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})

	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(readOnlyUser))
	want := "collector rollouts: pending: checking permissions (access review for list "
	eventually(t, 20*time.Second, "/readyz 503 naming the failed review", func() (bool, string) {
		code, body, _ := e.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, want) && strings.Contains(body, "forbidden"), body
	})
	// Not ready for as long as the reviews fail: poll for 3 s.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, body, _ := e.get("/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz = %d while every access review fails:\n%s", code, body)
		}
	}
	if v, ok := value(e.scrape(), "kube_convergence_collector_up", map[string]string{"collector": "rollouts"}); !ok || v != 0 {
		t.Errorf("collector_up{rollouts} = %v (found %v) while its review fails, want 0", v, ok)
	}
	if !strings.Contains(e.logs.String(), "cannot check the collector's permissions yet, retrying") {
		t.Errorf("no retry log line:\n%s", tail(e.logs.String(), 10))
	}

	restore()
	start := time.Now()
	body := e.waitReady(60 * time.Second)
	t.Logf("ready %v after the binding was restored", time.Since(start).Round(10*time.Millisecond))
	for _, c := range []string{"rollouts", "pods", "endpoints"} {
		if !strings.Contains(body, "collector "+c+": synced") {
			t.Errorf("collector %s not synced after the reviews were answered:\n%s", c, body)
		}
		if v, _ := value(e.scrape(), "kube_convergence_collector_up", map[string]string{"collector": c}); v != 1 {
			t.Errorf("collector_up{%s} = %v, want 1", c, v)
		}
	}
}

// /healthz is liveness, not readiness: with a 1 s liveness timeout it stays
// 200 while the cluster is quiet and while the API server is cut off (the
// reflectors retry; no events are queued), and /readyz keeps its latch.
func TestHealthzIgnoresQuietClusterAndAPIServerOutage(t *testing.T) {
	proxy, err := sb.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Restore)
	e := startExporter(t, "--kubeconfig="+proxy.Kubeconfig(readOnlyUser), "--web.liveness-timeout=1s")
	e.waitReady(60 * time.Second)
	check := func(phase string, d time.Duration) {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if code, body, err := e.get("/healthz"); err != nil || code != http.StatusOK {
				t.Fatalf("%s: /healthz = %d %q (%v)", phase, code, body, err)
			}
		}
	}
	check("quiet cluster", 4*time.Second)
	proxy.Cut()
	check("API server cut off", 6*time.Second)
	proxy.Restore()
	check("after the outage", 2*time.Second)
	if code, _, _ := e.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d after the outage, want the latched 200", code)
	}
}
