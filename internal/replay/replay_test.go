package replay_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata from the replays")

// TestRecordings replays every recording of testdata into all collectors
// at once and compares the whole exposition (<name>.metrics.txt) and the
// timeline API's answers (<name>.timelines.json) with their golden files.
// -update rewrites them; review the diff.
func TestRecordings(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings in testdata: %v", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			h := play(t, name)
			metrics, err := h.Exposition()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".metrics.txt"), metrics)
			golden(t, filepath.Join("testdata", name+".timelines.json"), timelineAnswers(t, h))
		})
	}
}

// play replays testdata/<name>.jsonl with its configuration
// (testdata/<name>.yaml, if any) and returns the harness after the end.
func play(t testing.TB, name string) *replay.Harness {
	t.Helper()
	h, logs := playLogged(t, name)
	if logs != "" {
		t.Logf("collector logs:\n%s", logs)
	}
	return h
}

// playLogged is play, returning the warnings logged.
func playLogged(t testing.TB, name string) (*replay.Harness, string) {
	t.Helper()
	cfg := config.Default()
	if b, err := os.ReadFile(filepath.Join("testdata", name+".yaml")); err == nil {
		if cfg, err = config.Parse(b); err != nil {
			t.Fatalf("%s.yaml: %v", name, err)
		}
	}
	var logs bytes.Buffer
	h := replay.New(replay.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	t.Cleanup(h.Close)
	rec, err := replay.ReadFile(filepath.Join("testdata", name+".jsonl"), h.Resources())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Play(rec); err != nil {
		t.Fatal(err)
	}
	return h, logs.String()
}

// timelineAnswers is the timeline API's list of every retained episode and
// its answer for each object in it, as one indented JSON document.
func timelineAnswers(t *testing.T, h *replay.Harness) string {
	t.Helper()
	get := func(path string) json.RawMessage {
		code, body := h.Get(path)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		return json.RawMessage(body)
	}
	list := get("/api/v1/timelines?limit=1000")
	var items struct {
		Items []struct{ Kind, Namespace, Name string }
	}
	if err := json.Unmarshal(list, &items); err != nil {
		t.Fatal(err)
	}
	objects := map[string]json.RawMessage{}
	for _, it := range items.Items {
		ns := it.Namespace
		if ns == "" {
			ns = "_"
		}
		key := fmt.Sprintf("%s/%s/%s", it.Kind, ns, it.Name)
		if _, ok := objects[key]; !ok {
			objects[key] = get("/api/v1/timelines/" + url.PathEscape(it.Kind) + "/" + url.PathEscape(ns) + "/" + url.PathEscape(it.Name))
		}
	}
	doc, err := json.MarshalIndent(map[string]any{"list": list, "objects": objects}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(doc) + "\n"
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the replay (-update rewrites it):\n%s", path, diff(string(want), got))
	}
}

// diff shows the first lines where want and got differ, with context.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  - %s\n  + %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
