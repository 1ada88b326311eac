package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

// TestMakeFuzzRunsEveryTarget: the Makefile's FUZZ_TARGETS names each fuzz
// target of the module (package:Func) and only those, and docs/fuzzing.md
// describes each, so that make fuzz cannot silently skip a new one.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "tools") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(data, -1) {
			found = append(found, filepath.ToSlash(rel)+":"+string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := makeVariable(t, filepath.Join(root, "Makefile"), "FUZZ_TARGETS")
	slices.Sort(found)
	sorted := slices.Sorted(slices.Values(listed))
	if !slices.Equal(found, sorted) {
		t.Errorf("Makefile FUZZ_TARGETS = %v, the module's fuzz targets are %v", sorted, found)
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found: the walk is wrong")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "fuzzing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		_, name, _ := strings.Cut(f, ":")
		if !strings.Contains(string(doc), name) {
			t.Errorf("docs/fuzzing.md does not describe %s", f)
		}
	}
}

// makeVariable returns the words of a `NAME := \` variable continued over
// backslashed lines.
func makeVariable(t *testing.T, path, name string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var words []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !in {
			rest, ok := strings.CutPrefix(line, name+" :=")
			if !ok {
				continue
			}
			in, line = true, rest
		}
		more := strings.HasSuffix(line, `\`)
		words = append(words, strings.Fields(strings.TrimSuffix(line, `\`))...)
		if !more {
			break
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s has no %s :=", path, name)
	}
	return words
}
