// Package slowwebhook is a real HTTPS admission webhook server that allows
// every request after a configurable delay. The end-to-end tests and the
// demo register it with the sandbox's API server through clientConfig.url:
// its own CA goes into caBundle, so the API server really calls it, over
// TLS, and waits for it.
package slowwebhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the certificate, PEM: what goes into caBundle
}

// NewCA returns a CA valid from an hour ago until notAfter.
func NewCA(notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "kce-slowwebhook-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// ServingCert issues a serving certificate for 127.0.0.1 and localhost.
func (ca *CA) ServingCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.Cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key}, nil
}

// Server allows every AdmissionReview it receives after its delay. The
// delay can differ per path, so one server backs several webhooks:
// /sleep/<duration> sleeps that long (Go syntax: /sleep/200ms, /sleep/6s);
// any other path sleeps the default delay set with SetDelay.
type Server struct {
	CA    *CA
	url   string
	srv   *http.Server
	ln    net.Listener
	delay atomic.Int64 // nanoseconds
	calls atomic.Int64
	wg    sync.WaitGroup
	done  chan struct{}
}

// Start serves on a free loopback port with a fresh CA valid for a year.
func Start() (*Server, error) {
	ca, err := NewCA(time.Now().Add(365 * 24 * time.Hour))
	if err != nil {
		return nil, err
	}
	return StartWithCA(ca, "127.0.0.1:0")
}

// StartWithCA serves on addr with a serving certificate from ca.
func StartWithCA(ca *CA, addr string) (*Server, error) {
	cert, err := ca.ServingCert()
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("slowwebhook: listen: %w", err)
	}
	s := &Server{CA: ca, ln: ln, url: "https://" + ln.Addr().String(), done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.ServeTLS(ln, "", "") // ends with ErrServerClosed on Close
	}()
	return s, nil
}

// URL is https://127.0.0.1:PORT; append a path such as /sleep/2s.
func (s *Server) URL() string { return s.url }

// SetDelay sets the delay of paths without /sleep/.
func (s *Server) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

// Calls counts the AdmissionReviews received.
func (s *Server) Calls() int64 { return s.calls.Load() }

// Close stops the server; requests still sleeping return at once.
func (s *Server) Close() error {
	select {
	case <-s.done:
		return nil
	default:
		close(s.done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "want an AdmissionReview", http.StatusBadRequest)
		return
	}
	s.calls.Add(1)
	delay := time.Duration(s.delay.Load())
	var d string
	if _, err := fmt.Sscanf(r.URL.Path, "/sleep/%s", &d); err == nil {
		if v, err := time.ParseDuration(d); err == nil {
			delay = v
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the API server gave up (its timeout)
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}
