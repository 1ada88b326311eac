package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// TraceID is the trace of the episode of uid opened by generation:
// timeline.TraceID (the first 16 bytes of SHA-256("uid/generation")), the
// id the timeline API and the exemplars show.
func TraceID(uid string, generation int64) trace.TraceID {
	tid, err := trace.TraceIDFromHex(timeline.TraceID(uid, generation))
	if err != nil {
		// timeline.TraceID is 32 hex digits by construction.
		panic("tracing: timeline.TraceID is not a trace id: " + err.Error())
	}
	return tid
}

// spanID derives a span id from the trace id and the span's role ("root",
// "stage/available", "closed"), so that the process that exports a span and
// one that restarted and recovered the episode name it alike: the stages a
// restarted exporter exports point at the root span id the first one used.
func spanID(tid trace.TraceID, role string) trace.SpanID {
	sum := sha256.Sum256(append(tid[:], "/"+role...))
	var sid trace.SpanID
	copy(sid[:], sum[:8])
	if !sid.IsValid() { // all zero: 2^-64, but an invalid id is dropped by every backend
		sid[7] = 1
	}
	return sid
}

// RootSpanID is the span id of the root span of the episode trace tid.
func RootSpanID(tid trace.TraceID) trace.SpanID { return spanID(tid, "root") }

// StageSpanID is the span id of the span of stage in the episode trace tid.
func StageSpanID(tid trace.TraceID, stage string) trace.SpanID { return spanID(tid, "stage/"+stage) }

// idsKey carries the ids the next span must have through the context that
// starts it: the SDK asks its IDGenerator, and spans given their start and
// end times are otherwise ordinary SDK spans (sampling, limits, resource,
// batching all stay the SDK's).
type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{tid, sid})
}

// idGenerator hands out the ids withIDs put in the context. Without them
// (nothing else starts spans on this provider) it falls back to random ids.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
	binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], rand.Uint64()|1)
	return sid
}
