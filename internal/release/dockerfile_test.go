package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction of a stage.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER, ...
	args string
}

// parseDockerfile returns the instructions of each stage, continuation
// lines joined and comments dropped. A parser of our own, not BuildKit's:
// the comparison needs the instructions of one file we write, and
// BuildKit's parser would bring the BuildKit module into the main module.
func parseDockerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before FROM", path, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment, also inside a continued instruction
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func find(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// TestDockerfileDescribesTheReleaseImage: the Dockerfile stays for those
// who build with Docker; it must give the image make release assembles:
// the same user, entrypoint, port and labels, and a binary built with the
// same environment and flags.
func TestDockerfileDescribesTheReleaseImage(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	if len(stages) != 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and the image", len(stages))
	}
	build, final := stages[0], stages[1]

	t.Run("image", func(t *testing.T) {
		if got := find(final, "USER"); !slices.Equal(got, []string{ImageUser}) {
			t.Errorf("USER %q, the release's %q", got, ImageUser)
		}
		var entrypoint []string
		if got := find(final, "ENTRYPOINT"); len(got) != 1 || json.Unmarshal([]byte(got[0]), &entrypoint) != nil {
			t.Fatalf("ENTRYPOINT %q: want one, in JSON (exec) form", got)
		}
		if !slices.Equal(entrypoint, ImageEntrypoint) {
			t.Errorf("ENTRYPOINT %q, the release's %q", entrypoint, ImageEntrypoint)
		}
		if got, want := find(final, "EXPOSE"), strings.TrimSuffix(ImagePort, "/tcp"); !slices.Equal(got, []string{want}) {
			t.Errorf("EXPOSE %q, the release's %q", got, want)
		}
		copies := find(final, "COPY")
		if len(copies) != 1 || !strings.HasSuffix(copies[0], " "+ImageBinary) {
			t.Errorf("COPY %q: want the binary copied to %s", copies, ImageBinary)
		}
		from := find(final, "FROM")
		if len(from) != 1 || !strings.HasSuffix(from[0], ":nonroot") || !strings.Contains(from[0], "distroless/static") {
			t.Errorf("FROM %q: the release's base layer copies distroless static's nonroot image", from)
		}
		// LABEL k="v" ...: every label of the Dockerfile is one of the
		// release's annotations, with the same value where the value is
		// not a build argument.
		labels := map[string]string{}
		for _, l := range find(final, "LABEL") {
			for _, m := range regexp.MustCompile(`([\w.-]+)="([^"]*)"`).FindAllStringSubmatch(l, -1) {
				labels[m[1]] = m[2]
			}
		}
		want := Annotations(Stamp{})
		for k, v := range labels {
			w, ok := want[k]
			switch {
			case !ok:
				t.Errorf("LABEL %s: not an annotation of the release", k)
			case !strings.Contains(v, "${") && v != w:
				t.Errorf("LABEL %s=%q, the release's %q", k, v, w)
			}
		}
		for _, k := range []string{"org.opencontainers.image.source", "org.opencontainers.image.licenses", "org.opencontainers.image.version", "org.opencontainers.image.revision"} {
			if _, ok := labels[k]; !ok {
				t.Errorf("LABEL %s missing", k)
			}
		}
	})

	t.Run("binary", func(t *testing.T) {
		var goBuild string
		for _, r := range find(build, "RUN") {
			if strings.Contains(r, "go build") {
				goBuild = r
			}
		}
		if goBuild == "" {
			t.Fatal("no RUN ... go build in the build stage")
		}
		for _, env := range BuildEnv {
			if !strings.Contains(goBuild, env+" ") {
				t.Errorf("go build without %s: %s", env, goBuild)
			}
		}
		if !strings.Contains(goBuild, " -trimpath ") || !slices.Contains(BuildArgs("", ""), "-trimpath") {
			t.Errorf("-trimpath in one build only: %s / %q", goBuild, BuildArgs("", ""))
		}
		if !strings.HasSuffix(goBuild, " "+MainPackage) {
			t.Errorf("go build of another package than %s: %s", MainPackage, goBuild)
		}
		m := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(goBuild)
		if m == nil {
			t.Fatalf("no -ldflags \"...\" in %s", goBuild)
		}
		ldflags := strings.Fields(m[1])
		if !strings.HasPrefix(strings.Join(ldflags, " "), StripFlags+" ") {
			t.Errorf("-ldflags %q do not start with the release's %q", m[1], StripFlags)
		}
		var keys []string
		for _, x := range regexp.MustCompile(`-X ([\w./-]+)\.(\w+)=`).FindAllStringSubmatch(m[1], -1) {
			if x[1] != VersionPackage {
				t.Errorf("-X into %s, the release stamps %s", x[1], VersionPackage)
			}
			keys = append(keys, x[2])
		}
		if !slices.Equal(keys, LDFlagKeys) {
			t.Errorf("-X keys %q, the release's %q", keys, LDFlagKeys)
		}
	})
}

// TestMakeBuildStampsWhatAReleaseStamps: make build's binary and a
// release's answer --version with the same fields.
func TestMakeBuildStampsWhatAReleaseStamps(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, x := range regexp.MustCompile(`-X `+regexp.QuoteMeta(VersionPackage)+`\.(\w+)=`).FindAllStringSubmatch(string(data), -1) {
		keys = append(keys, x[1])
	}
	if !slices.Equal(keys, LDFlagKeys) {
		t.Errorf("Makefile -X keys %q, the release's %q", keys, LDFlagKeys)
	}
}
