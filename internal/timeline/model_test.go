package timeline

import "testing"

// The expected id is computed outside Go: printf 'b7c1e3a0-uid/3' | sha256sum | cut -c1-32.
func TestTraceIDIsStableSHA256Prefix(t *testing.T) {
	if got, want := TraceID("b7c1e3a0-uid", 3), "bcdae66ca18e3a533be23eb34052379a"; got != want {
		t.Errorf("TraceID = %s, want %s", got, want)
	}
	if TraceID("b7c1e3a0-uid", 4) == TraceID("b7c1e3a0-uid", 3) {
		t.Error("generations share a trace id")
	}
}
