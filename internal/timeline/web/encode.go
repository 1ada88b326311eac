package web

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// The answers of the API are written by hand, byte for byte what
// encoding/json writes for the same values (TestEncoderMatchesEncodingJSON
// checks it on every field of the model, so a field added to
// timeline.Episode fails that test until it is added here). The reason is
// the API's latency goal (50 ms): at 1000 retained episodes of 200 entries,
// encoding/json spent 63 % of the default list's 23 ms of CPU, a fifth of it
// formatting time.Time values through their MarshalJSON and re-checking
// the output (BenchmarkAPI, docs/benchmarks.md).

func appendEpisode(b []byte, e *timeline.Episode) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"namespace":`...)
	b = appendString(b, e.Namespace)
	b = append(b, `,"name":`...)
	b = appendString(b, e.Name)
	b = append(b, `,"uid":`...)
	b = appendString(b, e.UID)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, e.Generation, 10)
	b = append(b, `,"target":`...)
	b = strconv.AppendInt(b, e.Target, 10)
	b = append(b, `,"change":`...)
	b = appendString(b, e.Change)
	b = append(b, `,"state":`...)
	b = appendString(b, e.State)
	b = append(b, `,"outcome":`...)
	b = appendString(b, e.Outcome)
	b = append(b, `,"start":`...)
	b = appendTime(b, e.Start)
	b = append(b, `,"apiStart":`...)
	b = appendTime(b, e.APIStart)
	if e.End != nil {
		b = append(b, `,"end":`...)
		b = appendTime(b, *e.End)
	}
	b = append(b, `,"durationSeconds":`...)
	b = appendFloat(b, e.DurationSeconds)
	b = append(b, `,"stage":`...)
	b = appendString(b, e.Stage)
	b = append(b, `,"reason":`...)
	b = appendString(b, e.Reason)
	b = append(b, `,"recovered":`...)
	b = strconv.AppendBool(b, e.Recovered)
	b = append(b, `,"traceId":`...)
	b = appendString(b, e.TraceID)
	b = append(b, `,"stages":`...)
	if e.Stages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Stages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStage(b, &e.Stages[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"entries":`...)
	if e.Entries == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendEntry(b, &e.Entries[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"entriesDropped":`...)
	b = strconv.AppendInt(b, int64(e.EntriesDropped), 10)
	return append(b, '}')
}

func appendStage(b []byte, s *timeline.StageTiming) []byte {
	b = append(b, `{"stage":`...)
	b = appendString(b, s.Stage)
	b = append(b, `,"reached":`...)
	b = strconv.AppendBool(b, s.Reached)
	if s.At != nil {
		b = append(b, `,"at":`...)
		b = appendTime(b, *s.At)
	}
	if s.DurationSeconds != nil {
		b = append(b, `,"durationSeconds":`...)
		b = appendFloat(b, *s.DurationSeconds)
	}
	return append(b, '}')
}

func appendEntry(b []byte, e *timeline.Entry) []byte {
	b = append(b, `{"time":`...)
	b = appendTime(b, e.Time)
	if e.APITime != nil {
		b = append(b, `,"apiTime":`...)
		b = appendTime(b, *e.APITime)
	}
	b = append(b, `,"type":`...)
	b = appendString(b, string(e.Type))
	if o := e.Object; o != nil {
		b = append(b, `,"object":{"kind":`...)
		b = appendString(b, o.Kind)
		if o.Namespace != "" {
			b = append(b, `,"namespace":`...)
			b = appendString(b, o.Namespace)
		}
		b = append(b, `,"name":`...)
		b = appendString(b, o.Name)
		if o.UID != "" {
			b = append(b, `,"uid":`...)
			b = appendString(b, o.UID)
		}
		b = append(b, '}')
	}
	if e.Generation != 0 {
		b = append(b, `,"generation":`...)
		b = strconv.AppendInt(b, e.Generation, 10)
	}
	if len(e.Managers) > 0 {
		b = append(b, `,"managers":[`...)
		for i, m := range e.Managers {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m)
		}
		b = append(b, ']')
	}
	for _, f := range [...]struct{ key, v string }{
		{`,"stage":`, e.Stage}, {`,"node":`, e.Node}, {`,"reason":`, e.Reason},
		{`,"message":`, e.Message}, {`,"controller":`, e.Controller},
	} {
		if f.v != "" {
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
	}
	if e.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, e.Count, 10)
	}
	return append(b, '}')
}

// appendTime is time.Time.MarshalJSON: RFC 3339 with nanoseconds, quoted.
// (MarshalJSON refuses years outside 0-9999; no time of a Kubernetes object
// or of this process's clock is.)
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat is encoding/json's float64 encoding: the shortest
// representation, in exponent form below 1e-6 and from 1e21 on, with the
// exponent's leading zero dropped. (encoding/json refuses NaN and ±Inf;
// durations are neither.)
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoding with HTML escaping (its
// default): quotes, backslashes and control characters escaped, <, > and &
// as \u003c, \u003e, \u0026, U+2028 and U+2029 escaped, invalid UTF-8 as
// \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
