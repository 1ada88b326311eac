package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestTracingDefaultsOff(t *testing.T) {
	for name, c := range map[string]*Config{"Default": Default(), "empty file": mustParse(t, ""), "empty section": mustParse(t, "tracing:\n")} {
		if c.Tracing.Enabled() || c.Tracing.Client() != TracingClientGRPC || c.Tracing.SamplingFraction != nil {
			t.Errorf("%s: tracing %+v", name, c.Tracing)
		}
	}
}

func TestTracingParse(t *testing.T) {
	c := mustParse(t, `tracing:
  endpoint: otel-collector.monitoring:4318
  clientType: http
  headers: {Authorization: Bearer x, X-Scope-OrgID: team-a}
  compression: gzip
  timeout: 5s
  samplingFraction: 0.25
  tlsConfig:
    caFile: /etc/ca.pem
    certFile: /etc/c.pem
    keyFile: /etc/k.pem
    serverName: collector
    insecureSkipVerify: true
`)
	tr := c.Tracing
	if !tr.Enabled() || tr.Client() != TracingClientHTTP || tr.Compression != "gzip" || time.Duration(tr.Timeout) != 5*time.Second ||
		*tr.SamplingFraction != 0.25 || tr.Headers["X-Scope-OrgID"] != "team-a" || tr.Insecure {
		t.Errorf("tracing %+v", tr)
	}
	if want := (TracingTLS{"/etc/ca.pem", "/etc/c.pem", "/etc/k.pem", "collector", true}); tr.TLSConfig != want {
		t.Errorf("tlsConfig %+v, want %+v", tr.TLSConfig, want)
	}
	for _, ok := range []string{
		"tracing: {endpoint: 'localhost:4317', insecure: true}\n",
		"tracing: {endpoint: 'http://localhost:4318/otlp/v1/traces', clientType: http}\n",
		"tracing: {endpoint: '[::1]:4317', samplingFraction: 0}\n",
		"tracing: {endpoint: 'c:4317', samplingFraction: 1}\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%q) = %v", ok, err)
		}
	}
}

func TestTracingErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"tracing:\n  clientType: http\n", `line 2: tracing: endpoint is not set, so tracing is off and the other tracing keys would be ignored (set endpoint, or remove the section)`},
		{"tracing:\n  endpoint: collector\n", `line 2: tracing.endpoint: want host:port (such as otel-collector:4317) or an http(s) URL, got "collector"`},
		{"tracing:\n  endpoint: grpc://c:4317\n", `line 2: tracing.endpoint: want host:port (such as otel-collector:4317) or an http(s) URL, got "grpc://c:4317"`},
		{"tracing:\n  endpoint: c:4317\n  clientType: GRPC\n", `line 3: tracing.clientType: unknown client type "GRPC" (want grpc or http)`},
		{"tracing:\n  endpoint: c:4317\n  compression: zstd\n", `line 3: tracing.compression: unknown compression "zstd" (want gzip, or nothing for none)`},
		{"tracing:\n  endpoint: c:4317\n  timeout: 0s\n", `line 3: tracing.timeout: must be a positive duration such as "10s", got 0s`},
		{"tracing:\n  endpoint: c:4317\n  timeout: soon\n", `line 3: want a duration such as "5m", got "soon"`},
		{"tracing:\n  endpoint: c:4317\n  samplingFraction: 1.5\n", `line 3: tracing.samplingFraction: must be between 0 and 1, got 1.5`},
		{"tracing:\n  endpoint: c:4317\n  samplingFraction: -0.1\n", `line 3: tracing.samplingFraction: must be between 0 and 1, got -0.1`},
		{"tracing:\n  endpoint: c:4317\n  headers:\n    'a b': x\n", `line 4: tracing.headers: "a b" is not a header name`},
		{"tracing:\n  endpoint: c:4317\n  insecure: true\n  tlsConfig: {caFile: /ca.pem}\n", `line 3: tracing: insecure sends without TLS, so tlsConfig would be ignored (remove one of them)`},
		{"tracing:\n  endpoint: c:4317\n  tlsConfig:\n    certFile: /c.pem\n", `line 4: tracing.tlsConfig: certFile and keyFile go together (a client certificate needs its key)`},
		{"tracing:\n  endpoint: c:4317\n  tlsConfig: {ca_file: /ca.pem}\n", `line 3: unknown key "ca_file"`},
		{"tracing:\n  endpoint: c:4317\n  sampling_fraction: 1\n", `line 3: unknown key "sampling_fraction"`},
	} {
		if _, err := Parse([]byte(tc.doc)); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tc.doc, err, tc.want)
		}
	}
}

// The README example's tracing section is valid. (The whole example is
// not one valid file: it shows exclusive options side by side.)
func TestREADMEExampleParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### Configuration file")
	if !ok {
		t.Fatal("README has no Configuration file section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	doc, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block in the Configuration file section")
	}
	_, tracing, ok := strings.Cut(doc, "\ntracing:")
	if !ok {
		t.Fatal("no tracing: in the README example")
	}
	c, err := Parse([]byte("tracing:" + tracing))
	if err != nil {
		t.Fatalf("README example: %v", err)
	}
	if !c.Tracing.Enabled() || c.Tracing.Client() != TracingClientGRPC || c.Tracing.TLSConfig.CAFile == "" {
		t.Errorf("README example's tracing: %+v", c.Tracing)
	}
}
