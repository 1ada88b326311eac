// Package tracing exports rollout and custom-resource episodes as
// OpenTelemetry traces (docs/tracing.md): one trace per episode, its id
// derived from (uid, generation); a root span from the write to the end (or
// to the stall), one child span per stage reached, on the exporter's receive
// times, with the k8s.* semantic-convention attributes.
//
// The Tracer is a collectors.EpisodeSink. Sinks run on the feeding
// collector's handler goroutines (after its lock is released, but its next
// events wait for them), so ObserveEpisodes only updates the tracer's own
// state and hands finished span plans to a bounded queue; Run turns them
// into SDK spans (reading Warning Events from the timeline store, on its
// own goroutine) and the SDK's BatchSpanProcessor exports them. Neither
// queue ever blocks: when the endpoint is unreachable, spans are dropped and
// one log line a minute says so.
//
// Spans are built with the SDK's own tracer, given their start and end times
// (trace.WithTimestamp) and their ids through a custom IDGenerator that reads
// them from the context (ids.go). The alternative, building ReadOnlySpans by
// hand (tracetest.SpanStub) and calling the processor, would bypass the
// sampler, the attribute limits and the resource the SDK applies, and
// depend on a package meant for tests.
package tracing

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	commonconfig "github.com/prometheus/common/config"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// ServiceName is the service.name of the exporter's resource (OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES override it).
const ServiceName = "kube-convergence-exporter"

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/kube-convergence/kube-convergence-exporter/internal/tracing"

// DefaultPlanQueue bounds the episode exports waiting for Run: 1024 plans
// of at most 7 spans each, about as many spans as the BatchSpanProcessor's
// own queue (2048 by default, OTEL_BSP_MAX_QUEUE_SIZE). Plans are produced
// per episode close or stall, so a full queue means Run is wedged, not busy.
const DefaultPlanQueue = 1024

// LogEvery is the least time between two log lines about dropped spans.
const LogEvery = time.Minute

// shutdownTimeout bounds the flush at exit: an unreachable endpoint must
// not hold the process past its own --web.shutdown-timeout.
const shutdownTimeout = 5 * time.Second

// Options configure New.
type Options struct {
	Config  config.Tracing
	Version string // service.version
	Logger  *slog.Logger
	// Events, when set (the timeline store), is read for the Warning Events
	// of an episode when its spans are exported; they become span events.
	Events timeline.Source
	// Exporter replaces the OTLP exporter built from Config (tests).
	Exporter sdktrace.SpanExporter
	// Now is the clock of the log limiter and of Events reads; nil: time.Now.
	Now func() time.Time
}

// Tracer is the episode sink that exports traces.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	sampler sdktrace.Sampler // samplingFraction's, nil when the SDK's (env) decides
	events  timeline.Source
	now     func() time.Time
	log     *limitedLog
	work    chan exportPlan

	mu   sync.Mutex
	open map[trace.TraceID]*episodeState

	// roots are the root span contexts exported so far of episodes not yet
	// closed; Run's goroutine only.
	roots map[trace.TraceID]trace.SpanContext
}

// episodeState is what an open episode has given the tracer so far.
type episodeState struct {
	ep tracker.Episode
	// reached are the stages reached and not exported yet.
	reached []tracker.Event
	// stalledAt is set once the root was exported stalled.
	stalledAt time.Time
}

// New builds the tracer and its OTLP exporter (no connection is made until
// spans are sent). It sets the process's OpenTelemetry error handler to a
// log line at most once a LogEvery.
func New(ctx context.Context, o Options) (*Tracer, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	exp := o.Exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, o.Config); err != nil {
			return nil, err
		}
	}
	// Our attributes first, then the environment's: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES win (resource.New applies detectors in order,
	// later ones overriding).
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	t := &Tracer{
		events: o.Events,
		now:    o.Now,
		log:    &limitedLog{logger: o.Logger, every: LogEvery, now: o.Now},
		work:   make(chan exportPlan, DefaultPlanQueue),
		open:   map[trace.TraceID]*episodeState{},
		roots:  map[trace.TraceID]trace.SpanContext{},
	}
	// The batch processor's settings come from OTEL_BSP_* (queue 2048,
	// batch 512, delay 5 s, export timeout 30 s by default); it never
	// blocks: a full queue drops the span.
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	}
	if f := o.Config.SamplingFraction; f != nil {
		// Decided on the trace id alone (TraceIDRatioBased), so a
		// restarted exporter samples a recovered episode alike; children
		// follow their root.
		t.sampler = sdktrace.TraceIDRatioBased(*f)
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(t.sampler)))
	}
	t.tp = sdktrace.NewTracerProvider(opts...)
	t.tracer = t.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(o.Version), trace.WithSchemaURL(semconv.SchemaURL))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(t.log.handle))
	return t, nil
}

// newExporter builds the OTLP exporter of c. Only the keys set in c become
// options: the others stay with the SDK's OTEL_EXPORTER_OTLP_* variables.
func newExporter(ctx context.Context, c config.Tracing) (sdktrace.SpanExporter, error) {
	var tlsCfg *tls.Config
	if c.TLSConfig.Set() {
		var err error
		tlsCfg, err = commonconfig.NewTLSConfig(&commonconfig.TLSConfig{
			CAFile: c.TLSConfig.CAFile, CertFile: c.TLSConfig.CertFile, KeyFile: c.TLSConfig.KeyFile,
			ServerName: c.TLSConfig.ServerName, InsecureSkipVerify: c.TLSConfig.InsecureSkipVerify,
		})
		if err != nil {
			return nil, fmt.Errorf("tracing.tlsConfig: %w", err)
		}
	}
	url := strings.Contains(c.Endpoint, "://")
	switch c.Client() {
	case config.TracingClientHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(c.Endpoint)}
		if url {
			opts = []otlptracehttp.Option{otlptracehttp.WithEndpointURL(c.Endpoint)}
		}
		if c.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
		}
		if c.Compression == "gzip" {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		if c.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(time.Duration(c.Timeout)))
		}
		if tlsCfg != nil {
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsCfg))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	default:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Endpoint)}
		if url {
			opts = []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(c.Endpoint)}
		}
		if c.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(c.Headers))
		}
		if c.Compression == "gzip" {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		if c.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(time.Duration(c.Timeout)))
		}
		if tlsCfg != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	}
}

// ExemplarTraceID returns the trace id (32 hex digits) an exemplar of the
// episode of uid opened by generation carries, or "" when the configured
// samplingFraction leaves that trace out (an exemplar must not point at a
// trace that does not exist). With the SDK's sampler (OTEL_TRACES_SAMPLER)
// every episode is assumed sampled.
func (t *Tracer) ExemplarTraceID(uid string, generation int64) string {
	tid := TraceID(uid, generation)
	if t.sampler != nil {
		r := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid})
		if r.Decision != sdktrace.RecordAndSample {
			return ""
		}
	}
	return tid.String()
}

// ObserveEpisodes implements collectors.EpisodeSink. The feeding
// collector's handler waits for it (outside the collector's lock): it
// takes only t.mu and never waits.
func (t *Tracer) ObserveEpisodes(evs []tracker.Event) {
	var plans []exportPlan
	t.mu.Lock()
	for _, ev := range evs {
		if ev.Type == tracker.ThresholdCrossed {
			continue // in the metrics; a span has nothing to add
		}
		tid := TraceID(ev.Episode.UID, ev.Episode.Generation)
		st := t.open[tid]
		if st == nil {
			st = &episodeState{ep: ev.Episode}
			t.open[tid] = st
		}
		st.ep = ev.Episode
		switch ev.Type {
		case tracker.StageReached:
			if st.stalledAt.IsZero() {
				st.reached = append(st.reached, ev)
				break
			}
			// After the stalled root went out, each stage goes out as
			// its child when reached.
			plans = append(plans, exportPlan{ep: st.ep, tid: tid, spans: []spanSpec{stageSpec(tid, st.ep, ev)}})
		case tracker.EpisodeStalled:
			if !st.stalledAt.IsZero() {
				break
			}
			st.stalledAt = ev.At
			plans = append(plans, t.rootPlan(tid, st, ev))
			st.reached = nil
		case tracker.EpisodeClosed:
			delete(t.open, tid)
			if st.stalledAt.IsZero() {
				p := t.rootPlan(tid, st, ev)
				p.final = true
				plans = append(plans, p)
				break
			}
			// The root went out at the stall: the rest of the episode
			// is one child, from the stall to the end, with the outcome.
			plans = append(plans, exportPlan{ep: st.ep, tid: tid, final: true, spans: []spanSpec{{
				id: spanID(tid, "closed"), name: "closed", start: st.stalledAt, end: ev.At, events: true,
				attrs: append(identity(st.ep), attribute.String("kce.outcome", string(ev.Outcome))),
			}}})
		}
	}
	t.mu.Unlock()
	for _, p := range plans {
		select {
		case t.work <- p:
		default:
			t.log.handle(fmt.Errorf("tracing: export queue full (%d episode exports waiting): dropped the spans of %s %s/%s generation %d",
				cap(t.work), p.ep.Kind, p.ep.Namespace, p.ep.Name, p.ep.Generation))
		}
	}
}

// exportPlan is what Run turns into spans: all of one trace.
type exportPlan struct {
	ep    tracker.Episode
	tid   trace.TraceID
	spans []spanSpec // the root first when present
	final bool       // the episode ended: forget its root
}

type spanSpec struct {
	id         trace.SpanID
	root       bool // no parent; else the child of the root
	name       string
	start, end time.Time
	attrs      []attribute.KeyValue
	errorMsg   string // status Error with this description when set
	events     bool   // attach the episode's Warning Events within [start, end]
}

// rootPlan is the root span ended by ev (EpisodeClosed or EpisodeStalled)
// and the spans of the stages reached so far.
func (t *Tracer) rootPlan(tid trace.TraceID, st *episodeState, ev tracker.Event) exportPlan {
	ep := st.ep
	attrs := append(identity(ep),
		attribute.Int64("kce.target_generation", ep.Target),
		attribute.String("kce.change", string(ep.Change)),
		attribute.Bool("kce.recovered", ep.Recovered),
	)
	if !ep.APIStart.IsZero() {
		attrs = append(attrs, attribute.String("kce.api_start", ep.APIStart.UTC().Format(time.RFC3339Nano)))
	}
	root := spanSpec{id: RootSpanID(tid), root: true, name: rootName(ep), start: ep.Start, end: ev.At, events: true}
	if ev.Type == tracker.EpisodeStalled {
		attrs = append(attrs, attribute.Bool("kce.stalled", true),
			attribute.String("kce.stall.stage", string(ev.Stage)), attribute.String("kce.stall.reason", ev.Reason))
		root.errorMsg = fmt.Sprintf("stalled before stage %s: %s", ev.Stage, ev.Reason)
	} else {
		attrs = append(attrs, attribute.Bool("kce.stalled", false), attribute.String("kce.outcome", string(ev.Outcome)))
	}
	root.attrs = attrs
	p := exportPlan{ep: ep, tid: tid, spans: []spanSpec{root}}
	for _, r := range st.reached {
		p.spans = append(p.spans, stageSpec(tid, ep, r))
	}
	return p
}

// rootName is low-cardinality, as the OpenTelemetry specification asks of
// span names ("rollout Deployment", "rollout Certificate.cert-manager.io"):
// the object is in the attributes.
func rootName(ep tracker.Episode) string { return "rollout " + string(ep.Kind) }

// stageSpec is the span of a stage: from the episode's start to the time it
// was reached, so its duration is the event's Duration, the value observed
// in the duration histogram and its exemplar.
func stageSpec(tid trace.TraceID, ep tracker.Episode, ev tracker.Event) spanSpec {
	return spanSpec{
		id: StageSpanID(tid, string(ev.Stage)), name: string(ev.Stage),
		start: ep.Start, end: ep.Start.Add(ev.Duration),
		attrs: append(identity(ep), attribute.String("kce.stage", string(ev.Stage)), attribute.Float64("kce.duration_seconds", ev.Duration.Seconds()),
			attribute.Bool("kce.recovered", ep.Recovered)),
	}
}

// identity is the object's k8s.* semantic-convention attributes (the
// workload kinds have their own keys; custom resources kce.name and
// kce.uid) and its generation.
func identity(ep tracker.Episode) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, attribute.String("kce.kind", string(ep.Kind)))
	if ep.Namespace != "" {
		attrs = append(attrs, semconv.K8SNamespaceName(ep.Namespace))
	}
	switch ep.Kind {
	case tracker.Deployment:
		attrs = append(attrs, semconv.K8SDeploymentName(ep.Name), semconv.K8SDeploymentUID(ep.UID))
	case tracker.StatefulSet:
		attrs = append(attrs, semconv.K8SStatefulSetName(ep.Name), semconv.K8SStatefulSetUID(ep.UID))
	case tracker.DaemonSet:
		attrs = append(attrs, semconv.K8SDaemonSetName(ep.Name), semconv.K8SDaemonSetUID(ep.UID))
	default:
		attrs = append(attrs, attribute.String("kce.name", ep.Name), attribute.String("kce.uid", ep.UID))
	}
	return append(attrs, attribute.Int64("kce.generation", ep.Generation))
}

// Run exports the queued plans until ctx is done, then flushes what is
// queued (at most shutdownTimeout) and shuts the provider down.
func (t *Tracer) Run(ctx context.Context) error {
	for {
		select {
		case p := <-t.work:
			t.export(p)
		case <-ctx.Done():
			return t.shutdown()
		}
	}
}

func (t *Tracer) shutdown() error {
	for len(t.work) > 0 { // Run is the only reader
		t.export(<-t.work)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush at exit: %w", err)
	}
	return nil
}

// export starts and ends the spans of p on the SDK; the batch processor
// queues them without waiting.
func (t *Tracer) export(p exportPlan) {
	var events []timeline.Entry
	if t.events != nil {
		events = t.warningEvents(p)
	}
	rootSC, ok := t.roots[p.tid]
	if !ok {
		// The root went out in a plan that was dropped, or before a
		// restart: name it all the same (its id is derived).
		flags := trace.TraceFlags(0)
		if t.ExemplarTraceID(p.ep.UID, p.ep.Generation) != "" {
			flags = trace.FlagsSampled
		}
		rootSC = trace.NewSpanContext(trace.SpanContextConfig{TraceID: p.tid, SpanID: RootSpanID(p.tid), TraceFlags: flags})
	}
	for _, s := range p.spans {
		ctx := withIDs(context.Background(), p.tid, s.id)
		if !s.root {
			ctx = trace.ContextWithSpanContext(ctx, rootSC)
		}
		_, span := t.tracer.Start(ctx, s.name, trace.WithTimestamp(s.start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(s.attrs...))
		if s.errorMsg != "" {
			span.SetStatus(codes.Error, s.errorMsg)
		}
		if s.events {
			for _, e := range events {
				if e.Time.Before(s.start) || e.Time.After(s.end) {
					continue
				}
				span.AddEvent(e.Reason, trace.WithTimestamp(e.Time), trace.WithAttributes(eventAttrs(e)...))
			}
		}
		span.End(trace.WithTimestamp(s.end))
		if s.root {
			rootSC = span.SpanContext()
			t.roots[p.tid] = rootSC
		}
	}
	if p.final {
		delete(t.roots, p.tid)
	}
}

// warningEvents reads the Warning Events of the plan's episode from the
// timeline store.
func (t *Tracer) warningEvents(p exportPlan) []timeline.Entry {
	var out []timeline.Entry
	for _, ep := range timeline.All(t.events.Select(timeline.Query{TraceID: p.tid.String()}, t.now())) {
		if ep.UID != p.ep.UID || ep.Generation != p.ep.Generation {
			continue
		}
		for _, e := range ep.Entries {
			if e.Type == timeline.EntryEvent {
				out = append(out, e)
			}
		}
	}
	return out
}

func eventAttrs(e timeline.Entry) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("k8s.event.reason", e.Reason), attribute.String("kce.event.message", e.Message)}
	if e.Object != nil {
		attrs = append(attrs, attribute.String("kce.event.object", e.Object.Kind+" "+e.Object.Namespace+"/"+e.Object.Name))
	}
	if e.Controller != "" {
		attrs = append(attrs, attribute.String("kce.event.controller", e.Controller))
	}
	if e.Count > 0 {
		attrs = append(attrs, attribute.Int64("kce.event.count", e.Count))
	}
	if e.APITime != nil {
		attrs = append(attrs, attribute.String("kce.event.api_time", e.APITime.UTC().Format(time.RFC3339Nano)))
	}
	return attrs
}

// limitedLog logs an OpenTelemetry error at most once per every, with the
// number of errors left unlogged since: an unreachable endpoint fails every
// export (one per batch delay, 5 s by default), which must not flood the log.
type limitedLog struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *limitedLog) handle(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return
	}
	l.logger.Warn("tracing: spans dropped or not exported", "err", err, "errors_not_logged_since_last", l.suppressed, "next_log_in_at_least", l.every)
	l.last, l.suppressed = now, 0
}
