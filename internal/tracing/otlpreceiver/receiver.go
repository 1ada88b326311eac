// Package otlpreceiver is a real OTLP trace receiver for tests: an HTTP
// server decoding protobuf ExportTraceServiceRequests (OTLP/HTTP, gzip or
// not) and a gRPC server implementing the collector's TraceService
// (OTLP/gRPC), both on loopback, keeping every span they receive. The unit
// tests of internal/tracing and the end-to-end tests send to them.
package otlpreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed requests
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is a received span with its resource's attributes and the time it
// arrived.
type Span struct {
	*tracepb.Span
	Resource map[string]string
	Received time.Time
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.TraceId) }

// SpanID is the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.SpanId) }

// ParentID is the parent span's id in hex, "" for a root.
func (s Span) ParentID() string { return hex.EncodeToString(s.ParentSpanId) }

// Duration is end - start.
func (s Span) Duration() time.Duration {
	return time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano) // OTLP times are int64 nanoseconds in uint64 fields
}

// Attr returns an attribute's value as a string ("" when absent).
func (s Span) Attr(key string) string { return attr(s.Attributes, key) }

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			return fmt.Sprint(v.DoubleValue)
		}
	}
	return ""
}

// Receiver keeps the spans it received.
type Receiver struct {
	// Endpoint is host:port to configure the exporter with.
	Endpoint string

	mu      sync.Mutex
	spans   []Span
	headers []map[string]string
	changed chan struct{}
	close   func()
}

func newReceiver() *Receiver { return &Receiver{changed: make(chan struct{})} }

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest, headers map[string]string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = attr(rs.GetResource().GetAttributes(), kv.Key)
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{Span: s, Resource: res, Received: now})
			}
		}
	}
	r.headers = append(r.headers, headers)
	close(r.changed)
	r.changed = make(chan struct{})
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Headers returns the request headers of every export request so far.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.headers)
}

// Wait returns the spans received once cond holds for them, or an error
// with what was received at the deadline.
func (r *Receiver) Wait(ctx context.Context, cond func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if cond(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, fmt.Errorf("OTLP receiver: %d spans received, condition not met: %w", len(spans), ctx.Err())
		}
	}
}

// Close stops the server.
func (r *Receiver) Close() { r.close() }

// StartHTTP runs an OTLP/HTTP receiver on loopback (POST /v1/traces,
// application/x-protobuf).
func StartHTTP() (*Receiver, error) { return StartHTTPTLS(nil) }

// StartHTTPTLS is StartHTTP serving TLS with tlsCfg (nil: plain HTTP).
func StartHTTPTLS(tlsCfg *tls.Config) (*Receiver, error) {
	ln, err := listen(tlsCfg)
	if err != nil {
		return nil, err
	}
	r := newReceiver()
	r.Endpoint = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := map[string]string{}
		for k := range req.Header {
			h[http.CanonicalHeaderKey(k)] = req.Header.Get(k)
		}
		r.add(&msg, h)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = io.Copy(w, bytes.NewReader(out))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.close = func() { _ = srv.Close() }
	return r, nil
}

// StartGRPC runs an OTLP/gRPC receiver on loopback (plaintext).
func StartGRPC() (*Receiver, error) { return StartGRPCTLS(nil) }

// StartGRPCTLS is StartGRPC serving TLS with tlsCfg (nil: plaintext).
func StartGRPCTLS(tlsCfg *tls.Config) (*Receiver, error) {
	ln, err := listen(nil)
	if err != nil {
		return nil, err
	}
	r := newReceiver()
	r.Endpoint = ln.Addr().String()
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg))) // negotiates h2, as gRPC clients require
	}
	srv := grpc.NewServer(opts...)
	coltracepb.RegisterTraceServiceServer(srv, &traceService{r: r})
	go func() { _ = srv.Serve(ln) }()
	r.close = srv.Stop
	return r, nil
}

// listen listens on a free loopback port, with TLS when tlsCfg is set.
func listen(tlsCfg *tls.Config) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil || tlsCfg == nil {
		return ln, err
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.NextProtos = []string{"http/1.1"}
	return tls.NewListener(ln, tlsCfg), nil
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s *traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	h := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		h[http.CanonicalHeaderKey(k)] = strings.Join(v, ",")
	}
	s.r.add(req, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
