package config

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// Tracing client types: the OTLP transports, as Prometheus' tracing
// configuration names them (prometheus/config TracingClientType).
const (
	TracingClientGRPC = "grpc"
	TracingClientHTTP = "http"
)

// Tracing is the `tracing:` section: where the OpenTelemetry spans of
// rollout episodes go (docs/tracing.md). Its keys are those of Prometheus'
// own `tracing:` section (prometheus/config TracingConfig), in camelCase
// like the rest of this file. Tracing is off unless Endpoint is set.
//
// Keys left out leave the OpenTelemetry SDK's environment variables in
// force (OTEL_EXPORTER_OTLP_TRACES_HEADERS, ..._TIMEOUT, ..._COMPRESSION,
// ..._CERTIFICATE, OTEL_TRACES_SAMPLER...): a key written here wins over the
// variable of the same setting.
type Tracing struct {
	// Endpoint is host:port (Prometheus' form), or a URL
	// (http://host:port/path) whose scheme also decides TLS.
	Endpoint string `yaml:"endpoint"`
	// ClientType is grpc (default, as in Prometheus) or http.
	ClientType string `yaml:"clientType"`
	// Insecure sends without TLS.
	Insecure bool `yaml:"insecure"`
	// Headers are sent with every export request (authentication tokens,
	// tenant ids).
	Headers map[string]string `yaml:"headers"`
	// Compression is "gzip" or empty (none).
	Compression string `yaml:"compression"`
	// Timeout bounds one export request (the SDK's default: 10s).
	Timeout Duration `yaml:"timeout"`
	// TLSConfig has the fields of prometheus/common's TLSConfig that apply
	// to an OTLP client.
	TLSConfig TracingTLS `yaml:"tlsConfig"`
	// SamplingFraction is the fraction of episodes traced, 0 to 1, decided
	// on the trace id (so a restart decides the same). nil: the SDK's
	// OTEL_TRACES_SAMPLER, by default every episode. Prometheus defaults to
	// 0 because it traces every query; an episode is one per rollout.
	SamplingFraction *float64 `yaml:"samplingFraction"`
}

// TracingTLS is the client TLS of the OTLP exporter: the fields of
// prometheus/common config.TLSConfig, camelCase.
type TracingTLS struct {
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	ServerName         string `yaml:"serverName"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

// Set reports whether any TLS field is set.
func (t TracingTLS) Set() bool { return t != TracingTLS{} }

// Enabled reports whether spans are exported.
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

// Client returns the client type with its default applied.
func (t Tracing) Client() string {
	if t.ClientType == "" {
		return TracingClientGRPC
	}
	return t.ClientType
}

// validateTracing checks the tracing section. Files (tlsConfig) are read
// when the tracer starts, which names them in its error.
func (c *Config) validateTracing(pos positions, add func(line int, format string, a ...any)) {
	t := c.Tracing
	if pos.line("tracing") == 0 {
		return
	}
	if t.Endpoint == "" {
		// Strict like the rest of the file: a section without an endpoint
		// is off, so whatever else it says would be ignored.
		if _, v := pos.find("tracing"); v != nil && len(v.Content) > 0 {
			add(pos.line("tracing"), "tracing: endpoint is not set, so tracing is off and the other tracing keys would be ignored (set endpoint, or remove the section)")
		}
		return
	}
	if strings.Contains(t.Endpoint, "://") {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(pos.line("tracing", "endpoint"), "tracing.endpoint: want host:port (such as otel-collector:4317) or an http(s) URL, got %q", t.Endpoint)
		}
	} else if host, port, err := net.SplitHostPort(t.Endpoint); err != nil || host == "" || port == "" {
		add(pos.line("tracing", "endpoint"), "tracing.endpoint: want host:port (such as otel-collector:4317) or an http(s) URL, got %q", t.Endpoint)
	}
	switch t.ClientType {
	case "", TracingClientGRPC, TracingClientHTTP:
	default:
		add(pos.line("tracing", "clientType"), "tracing.clientType: unknown client type %q (want grpc or http)", t.ClientType)
	}
	switch t.Compression {
	case "", "gzip":
	default:
		add(pos.line("tracing", "compression"), "tracing.compression: unknown compression %q (want gzip, or nothing for none)", t.Compression)
	}
	if l := pos.line("tracing", "timeout"); l > 0 && t.Timeout <= 0 {
		add(l, "tracing.timeout: must be a positive duration such as \"10s\", got %v", time.Duration(t.Timeout))
	}
	if f := t.SamplingFraction; f != nil && (*f < 0 || *f > 1 || *f != *f) {
		add(pos.line("tracing", "samplingFraction"), "tracing.samplingFraction: must be between 0 and 1, got %v", *f)
	}
	for _, k := range sortedKeys(t.Headers) {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			add(pos.keyLine("tracing", "headers", k), "tracing.headers: %q is not a header name", k)
		}
		if strings.ContainsAny(t.Headers[k], "\r\n") {
			add(pos.line("tracing", "headers", k), "tracing.headers.%s: a value must not contain a line break", k)
		}
	}
	tls := t.TLSConfig
	if t.Insecure && tls.Set() {
		add(pos.line("tracing", "insecure"), "tracing: insecure sends without TLS, so tlsConfig would be ignored (remove one of them)")
	}
	if (tls.CertFile == "") != (tls.KeyFile == "") {
		add(pos.line("tracing", "tlsConfig"), "tracing.tlsConfig: certFile and keyFile go together (a client certificate needs its key)")
	}
}
