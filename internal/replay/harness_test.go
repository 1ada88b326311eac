package replay_test

import (
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

// TestPlayFailsARecordingThatListsTooLittle: a resource a collector
// watches and the recording never lists would leave that collector
// detached and its numbers silently empty.
func TestPlayFailsARecordingThatListsTooLittle(t *testing.T) {
	h := replay.New(replay.Options{})
	defer h.Close()
	rec, err := replay.Read(strings.NewReader(`{"resource":"pods","type":"list-end","at":"2026-01-02T03:04:05Z"}`+"\n"), "pods-only.jsonl", h.Resources())
	if err != nil {
		t.Fatal(err)
	}
	err = h.Play(rec)
	if err == nil || !strings.Contains(err.Error(), "pods-only.jsonl: never lists") || !strings.Contains(err.Error(), "nodes") || strings.Contains(err.Error(), " pods,") {
		t.Errorf("Play: %v, want the resources never listed (nodes among them, not pods)", err)
	}
}
