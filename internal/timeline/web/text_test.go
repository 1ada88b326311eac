package web

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ (go test ./internal/timeline/web -run TestTextGolden -update)")

// textNow is the fixed clock of the golden file: 12.75 s after the
// recorded answer's stalled episode passed 10 minutes (its durationSeconds
// 612.5 was computed by the exporter at the same instant).
var textNow = time.Date(2026, 11, 10, 12, 0, 12, 750_000_000, time.UTC)

// The golden file is the text of a quota-blocked Deployment (generation 3
// stalled on replica_failure with FailedCreate events) and its converged
// generation 2, with markup, ANSI escapes, a C1 CSI, a bidi override and a
// newline in a field manager and an Event note. The episodes are those
// explain decodes from the API's answer: testdata/explain/quota-blocked.json
// decoded into the model and encoded again by encoding/json, as the API
// serves it (U+009B and U+202E raw, ESC as \u001b).
func TestTextGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "explain", "quota-blocked.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []timeline.Episode `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	if raw, err = json.Marshal(list); err != nil {
		t.Fatal(err)
	}
	list.Items = nil
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteText(&b, list.Items, textNow)
	out := b.String()
	golden := filepath.Join("testdata", "explain", "quota-blocked.text.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -run TestTextGolden -update to rewrite it):\n%s", golden, out)
	}
	assertTerminalSafe(t, out)
	for _, want := range []string{"<script>alert(1)</script>", "FailedCreate", "replica_failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}

// assertTerminalSafe fails on any byte or rune a terminal could interpret
// (C0 but newline, DEL, C1, bidi and other format runes).
func assertTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r == '\n' {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("output carries rune %U at byte %d: %q", r, i, out[max(0, i-20):min(len(out), i+20)])
		}
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"kubectl-client-side-apply":  "kubectl-client-side-apply",
		"<script>alert(1)</script>":  "<script>alert(1)</script>",
		"\x1b[31mred\x1b[0m":         `\x1b[31mred\x1b[0m`,
		"a\u009b2Jb":                 `a\x9b2Jb`,
		"\u202egnp.exe":              `\u202egnp.exe`,
		"zero\u200bwidth":            `zero\u200bwidth`,
		"line\nnext\r\tend\x7f":      `line\nnext\r\tend\x7f`,
		`C:\path`:                    `C:\\path`,
		"bad \xff utf-8":             `bad \xff utf-8`,
		"ünïcödé 日本 \U0001F600":      "ünïcödé 日本 \U0001F600",
		"nbsp\u00a0and\U000e0001tag": `nbsp\xa0and\U000e0001tag`,
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %s, want %s", in, got, want)
		}
	}
}
