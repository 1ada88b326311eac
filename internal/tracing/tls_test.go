package tracing

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracing/otlpreceiver"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// tlsFixture is a CA, a server certificate for otel.test signed by it and a
// client certificate, written as PEM files.
type tlsFixture struct {
	dir            string
	server         tls.Certificate
	pool           *x509.CertPool
	caFile         string
	certFile, keyF string
}

func newTLSFixture(t *testing.T) tlsFixture {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	srvDER, srvKey := issue(2, "otel.test", x509.ExtKeyUsageServerAuth, []string{"otel.test"})
	cliDER, cliKey := issue(3, "kube-convergence-exporter", x509.ExtKeyUsageClientAuth, nil)
	cliKeyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tlsFixture{
		dir:    dir,
		server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
		pool:   pool,
		caFile: write("ca.pem", "CERTIFICATE", caDER), certFile: write("client.pem", "CERTIFICATE", cliDER), keyF: write("client-key.pem", "PRIVATE KEY", cliKeyDER),
	}
}

// tlsConfig's caFile, certFile, keyFile and serverName against receivers
// that verify the client certificate (mutual TLS), over both transports.
func TestMutualTLS(t *testing.T) {
	fx := newTLSFixture(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{fx.server}, ClientCAs: fx.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	for _, client := range []string{config.TracingClientHTTP, config.TracingClientGRPC} {
		t.Run(client, func(t *testing.T) {
			start := otlpreceiver.StartHTTPTLS
			if client == config.TracingClientGRPC {
				start = otlpreceiver.StartGRPCTLS
			}
			r, err := start(serverTLS)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			// Dialled by IP: the server name to verify comes from serverName.
			if _, _, err := net.SplitHostPort(r.Endpoint); err != nil {
				t.Fatal(err)
			}
			tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: client,
				TLSConfig: config.TracingTLS{CAFile: fx.caFile, CertFile: fx.certFile, KeyFile: fx.keyF, ServerName: "otel.test"}}, nil, nil)
			tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
				{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: t0.Add(time.Second)}})
			if root := waitSpans(t, r, 1)[0]; root.Name != "rollout Deployment" {
				t.Fatalf("got span %q", root.Name)
			}
		})
	}
	// Without the client certificate the receiver refuses the handshake:
	// nothing arrives, and the failure is logged.
	t.Run("no client certificate", func(t *testing.T) {
		r, err := otlpreceiver.StartHTTPTLS(serverTLS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "500")
		var logs lockedWriter
		tr := startTracer(t, config.Tracing{Endpoint: r.Endpoint, ClientType: "http", TLSConfig: config.TracingTLS{CAFile: fx.caFile, ServerName: "otel.test"}}, nil, &logs)
		tr.ObserveEpisodes([]tracker.Event{{Type: tracker.EpisodeOpened, Episode: ep, At: t0},
			{Type: tracker.EpisodeClosed, Episode: ep, Outcome: tracker.OutcomeConverged, At: t0.Add(time.Second)}})
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(logLines(&logs), "tracing: spans dropped or not exported") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := len(r.Spans()); n != 0 || !strings.Contains(logLines(&logs), "certificate") {
			t.Errorf("%d spans received without a client certificate; log:\n%s", n, logLines(&logs))
		}
	})
}
