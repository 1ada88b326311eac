package deploy_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// TestWebConfigProbes runs the real exporter with the arguments of the
// Deployment that base + components/web-config renders (ports moved to
// free loopback ports, the Secret's files to a scratch directory) against
// the sandbox, and checks the contract the manifests rely on: the
// Deployment's probe paths answer 200 over plain HTTP without credentials
// on the probe port, which serves nothing else, while the metrics port
// wants TLS and basic auth.
func TestWebConfigProbes(t *testing.T) {
	if sb == nil {
		t.Skip("needs the sandbox; skipped with -short")
	}
	var d appsv1.Deployment
	decode(t, only(t, kustomize(t, kustomizations()["web-config"]), "Deployment"), &d)
	c := d.Spec.Template.Spec.Containers[0]

	dir := t.TempDir()
	caPool, certFile, keyFile := selfSignedCert(t, dir)
	const user, password = "prometheus", "correct horse battery staple"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web-config.yml")
	if err := os.WriteFile(webConfig, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n", certFile, keyFile, user, hash), 0o600); err != nil {
		t.Fatal(err)
	}

	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = sandbox.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	listen, probe := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	var args []string
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch name {
		case "web.listen-address":
			a = "--web.listen-address=" + listen
		case "web.probe-address":
			a = "--web.probe-address=" + probe
		case "web.config.file":
			a = "--web.config.file=" + webConfig
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+sb.Kubeconfig(""))
	logs := runExporter(t, buildExporter(t), args)

	plain := &http.Client{Timeout: 5 * time.Second}
	get := func(client *http.Client, url string, auth bool) (int, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if auth {
			req.SetBasicAuth(user, password)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	// The kubelet's requests: each probe of the Deployment, plain HTTP, no
	// credentials, on the probe listener. Readiness waits for the informers.
	for _, p := range []struct {
		name, path string
	}{
		{"startupProbe", c.StartupProbe.HTTPGet.Path},
		{"livenessProbe", c.LivenessProbe.HTTPGet.Path},
		{"readinessProbe", c.ReadinessProbe.HTTPGet.Path},
	} {
		url := "http://" + probe + p.path
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, body, err := get(plain, url, false)
			if err == nil && code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET %s: %d %q %v after 60s\nexporter log:\n%s", p.name, url, code, body, err, logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if code, _, err := get(plain, "http://"+probe+"/metrics", false); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /metrics on the probe port: %d %v, want 404 (the probe port exposes no metrics)", code, err)
	}

	// The metrics port: TLS and basic auth.
	if code, _, err := get(plain, "http://"+listen+"/metrics", false); err == nil && code == http.StatusOK {
		t.Error("plain HTTP to the metrics port answered 200; want TLS only")
	}
	secure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: caPool, ServerName: "kube-convergence-exporter", MinVersion: tls.VersionTLS12,
	}}}
	if code, _, err := get(secure, "https://"+listen+"/metrics", false); err != nil || code != http.StatusUnauthorized {
		t.Errorf("HTTPS without credentials: %d %v, want 401", code, err)
	}
	code, body, err := get(secure, "https://"+listen+"/metrics", true)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "kube_convergence_build_info") {
		t.Errorf("HTTPS with basic auth, verifying the certificate for the ServiceMonitor's serverName: %d %v, want 200 with kube_convergence_build_info", code, err)
	}
}

// buildExporter builds the exporter binary into a scratch directory.
func buildExporter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kube-convergence-exporter")
	if out, err := command(t.Context(), repoRoot, "go", "build", "-o", bin, "./cmd/kube-convergence-exporter"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return bin
}

// runExporter starts the exporter, stops it by its own pid at the end of
// the test, and returns a function that reads its log so far.
func runExporter(t *testing.T, bin string, args []string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	// Its exit status is of no interest: the test interrupts it.
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel() // kills the process
			<-done
		}
		cancel()
	})
	return func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and the
// ServiceMonitor's serverName, and returns a pool that trusts it.
func selfSignedCert(t *testing.T, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kube-convergence-exporter"},
		DNSNames:              []string{"kube-convergence-exporter"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool, certFile, keyFile
}
