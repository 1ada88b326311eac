package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// FuzzParse reads any document as a configuration file (seeds:
// testdata/fuzz/FuzzParse, the example overlay's file and the README's and
// docs' examples). It checks:
//
//   - an error names its line: every one of the problems joined by "; "
//     starts with "line N: ", N within the document, and Load puts the
//     file's path before it (yaml.v3 leaves the line out of some of its
//     errors: problemLine finds it);
//   - a file that parses is a fixed point: written back as YAML (every
//     field set, durations as "5m") it parses to the same configuration,
//     the defaults and presets applied included.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 64<<10 {
			return // the decoder is linear; bigger inputs only slow the fuzzer
		}
		c, err := Parse(doc)
		if err != nil {
			checkLines(t, doc, err.Error())
			path := filepath.Join(dir, "config.yaml")
			if werr := os.WriteFile(path, doc, 0o600); werr != nil {
				t.Fatal(werr)
			}
			if _, lerr := Load(path); lerr == nil || lerr.Error() != "config file "+path+": "+err.Error() {
				t.Errorf("Load = %v, want the path before Parse's error %q", lerr, err)
			}
			return
		}
		again, err := yaml.Marshal(document(reflect.ValueOf(*c)))
		if err != nil {
			t.Fatalf("writing the configuration back: %v", err)
		}
		c2, err := Parse(again)
		if err != nil {
			t.Fatalf("the configuration written back does not parse: %v\noriginal:\n%s\nwritten back:\n%s", err, doc, again)
		}
		if a, b := comparableForm(reflect.ValueOf(*c)), comparableForm(reflect.ValueOf(*c2)); !reflect.DeepEqual(a, b) {
			t.Errorf("parse, write, parse changed the configuration:\n first: %#v\nsecond: %#v\nwritten back:\n%s", a, b, again)
		}
	})
}

var (
	// quotedValue is a value a message quotes (%q, or yaml.v3's
	// backquotes), which may hold "; ".
	quotedValue = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`")
	lineOfError = regexp.MustCompile(`^line (\d+): `)
)

// checkLines fails t unless every problem of msg names a line of doc
// (counted as YAML counts them). A document in UTF-16 is left out: the
// line of a character its reader refuses there is not searched.
func checkLines(t *testing.T, doc []byte, msg string) {
	t.Helper()
	if bytes.HasPrefix(doc, []byte{0xff, 0xfe}) || bytes.HasPrefix(doc, []byte{0xfe, 0xff}) {
		return
	}
	lines := lineAt(doc, len(doc))
	for _, part := range problems(quotedValue.ReplaceAllString(msg, `""`)) {
		m := lineOfError.FindStringSubmatch(part)
		if m == nil {
			t.Errorf("a problem without its line: %q\nin error: %s\ndocument: %q", part, msg, doc)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines {
			t.Errorf("line %d of a document of %d lines: %s\ndocument: %q", n, lines, msg, doc)
		}
	}
}

// problemStart is where a problem starts in a message that joins several:
// after "; ", at its line. A problem's own text may hold "; " too ("(a
// CRD's group has at least one dot); built-in workloads are ..."), so a
// problem without a line after the first one is not told apart from the
// text of the one before.
var problemStart = regexp.MustCompile(`; line \d+: `)

// problems splits msg into the problems it joins.
func problems(msg string) []string {
	var out []string
	from := 0
	for _, m := range problemStart.FindAllStringIndex(msg, -1) {
		out = append(out, msg[from:m[0]])
		from = m[0] + 2
	}
	return append(out, msg[from:])
}

var durationType = reflect.TypeFor[Duration]()

// document is v as the YAML a user writes: fields under their yaml keys,
// left out when zero (unset), durations as Go duration strings; a map's
// entries and a pointer's value are written whatever their value.
func document(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return document(v.Elem())
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" || v.Field(i).IsZero() {
				continue
			}
			if fv := v.Field(i); (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0 {
				continue
			}
			out[key] = document(v.Field(i))
		}
		return out
	case v.Kind() == reflect.Map && v.Type().Elem().Kind() != reflect.Interface:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[k.String()] = document(v.MapIndex(k))
		}
		return out
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Interface:
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = document(v.Index(i))
		}
		return out
	}
	return v.Interface() // scalars, and a probe's object as decoded
}

// comparableForm is document with the fields the file does not hold (the
// parsed ready expressions, the observed fields of a preset) under their
// Go names, and nil for an empty list or map.
func comparableForm(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int())
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return []any{comparableForm(v.Elem())} // a pointer to a zero value is not nil
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			out[v.Type().Field(i).Name] = comparableForm(v.Field(i))
		}
		return out
	case (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0:
		return nil
	case v.Kind() == reflect.Map && v.Type().Elem().Kind() != reflect.Interface:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[k.String()] = comparableForm(v.MapIndex(k))
		}
		return out
	case v.Kind() == reflect.Slice:
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = comparableForm(v.Index(i))
		}
		return out
	}
	return fmt.Sprintf("%T %#v", v.Interface(), v.Interface())
}
