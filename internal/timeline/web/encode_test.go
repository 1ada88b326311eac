package web

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// tricky are strings encoding/json escapes: quotes, backslashes, control
// characters, HTML, line separators, invalid UTF-8, multi-byte runes.
var tricky = []string{
	"", "plain", xss, `"quoted" \ back`, "tab\tnl\ncr\r\bbs\fff\x00\x1f\x7f", "a&b<c>d",
	"line\u2028para\u2029", "bad\xffutf8\xc3", "ünïcødé ✓ 🚀", "\xe2\x80", strings.Repeat("x", 300),
}

// fill sets every field of v, recursively, to a non-zero value built from
// seed, so that a field the hand-written encoder misses shows.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(tricky[seed%len(tricky)] + "s")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed*7919 - 3))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat(float64(seed) * 1.25e-3)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), seed+i+1)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 10, 0, seed%60, seed*1234567, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), seed+i+1)
		}
	default:
		panic("fill: a field of kind " + v.Kind().String() + " in the timeline model: teach fill and appendEpisode about it")
	}
}

// items is the answer of the API as encoding/json would write it.
type items struct {
	Items []timeline.Episode `json:"items"`
}

func normalized(eps []timeline.Episode) []timeline.Episode {
	out := slices.Clone(eps)
	for i := range out {
		normalize(&out[i])
	}
	return out
}

// encodeItems is the answer writeItems writes.
func encodeItems(eps []timeline.Episode) []byte {
	rec := httptest.NewRecorder()
	writeItems(context.Background(), rec, timeline.Literal(eps), "")
	return rec.Body.Bytes()
}

func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The hand-written encoder writes what encoding/json writes, on every field
// of the model (filled, and empty for omitempty), on the test episodes and
// on every tricky string.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	var full timeline.Episode
	fill(reflect.ValueOf(&full).Elem(), 1)
	cases := map[string][]timeline.Episode{
		"every field set":         {full},
		"every field empty":       {{}},
		"empty lists":             {{Stages: []timeline.StageTiming{}, Entries: []timeline.Entry{{Managers: []string{}}}}},
		"test episodes":           episodes(),
		"none":                    {},
		"many (flushed in parts)": slices.Repeat([]timeline.Episode{full}, 300),
	}
	for i, s := range tricky {
		var e timeline.Episode
		fill(reflect.ValueOf(&e).Elem(), i)
		e.Kind, e.Entries[0].Message, e.Entries[1].Managers[1] = s, s, s
		cases["tricky "+s] = []timeline.Episode{e}
	}
	for name, eps := range cases {
		// The API answers [] for lists a store left nil (normalize).
		want := encodingJSON(t, items{Items: normalized(eps)})
		if got := encodeItems(eps); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %.2000s\nwant %.2000s", name, got, want)
		}
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 1e-7, 1.5e-9, 1e-6, 999999999, 1e20, 1e21, 1.234e25, 123.456789, math.SmallestNonzeroFloat64, math.MaxFloat64, -2.5e-8} {
		want := strings.TrimSuffix(string(encodingJSON(t, f)), "\n")
		if got := string(appendFloat(nil, f)); got != want {
			t.Errorf("appendFloat(%v) = %s, encoding/json %s", f, got, want)
		}
	}
}
