// Package telemetry exports the spans of prodigy-action jobs as
// OpenTelemetry traces over OTLP (HTTP/protobuf or gRPC) with the official
// SDK. It implements runner.Tracer: the engine reports job → phase → item
// → attempt → step and this package turns them into spans with the
// prodigy.* and gen_ai.* attributes.
//
// Tracing is configured only by the standard OpenTelemetry environment,
// read through an injected getenv: it is on when OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none is). Without them
// New returns nil: nothing is exported and no connection is made.
// Export failures (a collector that is down) are warnings, never errors of
// the job, and Shutdown flushes within a bounded time.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Config configures New.
type Config struct {
	// Getenv reads the environment (OTEL_*); nil means tracing is off.
	Getenv func(string) string
	// Warn receives configuration and export problems (one line each);
	// nil discards them.
	Warn func(string)
	// Redactor removes secrets from every string attribute and status
	// message of spans whose job gives no redactor of its own
	// (runner.JobSpan.Redact); nil means none.
	Redactor *redact.Redactor
	// ServiceVersion is service.version; "" omits it.
	ServiceVersion string
	// ShutdownTimeout bounds Shutdown's flush; 0 means 5s.
	ShutdownTimeout time.Duration
}

// Tracing is an OpenTelemetry tracer provider exporting over OTLP; it
// implements runner.Tracer. A nil *Tracing traces nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	exporter *warningExporter
	redact   func(string) string
	warn     func(string)
	timeout  time.Duration
	closed   sync.Once
}

// instrumentation is the instrumentation scope of the spans.
const instrumentation = "github.com/prodigy-action/prodigy-action/telemetry"

// New returns the tracing the environment asks for, or nil when it asks
// for none. A configuration the exporter cannot use (an unknown protocol,
// an endpoint that is no URL, an unreadable certificate) is a warning and
// tracing stays off: tracing never stops a job.
func New(ctx context.Context, c Config) *Tracing {
	warn := c.Warn
	if warn == nil {
		warn = func(string) {}
	}
	if c.Getenv == nil {
		return nil
	}
	s, err := readSettings(c.Getenv)
	if errors.Is(err, errDisabled) {
		return nil
	}
	if err != nil {
		warn(fmt.Sprintf("tracing is off: %v", err))
		return nil
	}
	exp, err := newExporter(ctx, s)
	if err != nil {
		warn(fmt.Sprintf("tracing is off: create the OTLP exporter: %v", err))
		return nil
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(s.service)}
	if c.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(c.ServiceVersion))
	}
	for k, v := range s.resource {
		attrs = append(attrs, attribute.String(k, v))
	}
	res, err := resource.Merge(resource.NewSchemaless(attrs...), resource.NewWithAttributes(semconv.SchemaURL))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}
	we := &warningExporter{SpanExporter: exp, warn: warn, endpoint: s.endpoint}
	var bopts []sdktrace.BatchSpanProcessorOption
	if s.batch.delay > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(s.batch.delay))
	}
	if s.batch.exportTimeout > 0 {
		bopts = append(bopts, sdktrace.WithExportTimeout(s.batch.exportTimeout))
	}
	if s.batch.queue > 0 {
		bopts = append(bopts, sdktrace.WithMaxQueueSize(s.batch.queue))
	}
	if s.batch.batch > 0 {
		bopts = append(bopts, sdktrace.WithMaxExportBatchSize(s.batch.batch))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(samplerOf(s.sampler, s.ratio)),
		sdktrace.WithBatcher(we, bopts...),
	)
	t := &Tracing{provider: tp, tracer: tp.Tracer(instrumentation), exporter: we, warn: warn, timeout: c.ShutdownTimeout}
	t.redact = func(s string) string { return s }
	if c.Redactor != nil {
		t.redact = c.Redactor.String
	}
	if t.timeout <= 0 {
		t.timeout = 5 * time.Second
	}
	return t
}

// newExporter creates the OTLP exporter of s. Options given here take
// precedence over what the SDK itself reads from the process environment.
func newExporter(ctx context.Context, s settings) (sdktrace.SpanExporter, error) {
	if s.protocol == ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithHeaders(s.headers)}
		if strings.Contains(s.endpoint, "://") {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.endpoint))
		} else {
			opts = append(opts, otlptracegrpc.WithEndpoint(s.endpoint))
			if s.insecure {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		if s.timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(s.timeout))
		}
		if s.gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		if s.tls != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(s.tls)))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(s.endpoint), otlptracehttp.WithHeaders(s.headers)}
	if s.timeout > 0 {
		opts = append(opts, otlptracehttp.WithTimeout(s.timeout))
	}
	if s.gzip {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	} else {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	}
	if s.tls != nil {
		opts = append(opts, otlptracehttp.WithTLSClientConfig(s.tls))
	}
	return otlptracehttp.New(ctx, opts...)
}

// samplerOf is the SDK sampler of an OTEL_TRACES_SAMPLER value.
func samplerOf(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// Tracer is t as a runner.Tracer: nil (no tracing) when t is nil.
func (t *Tracing) Tracer() runner.Tracer {
	if t == nil {
		return nil
	}
	return t
}

// StartJob implements runner.Tracer: it begins the root span of a job
// execution: a new trace, or a child of s.Parent when that is a valid W3C
// traceparent (a sharded job's shards and gather continue the plan's
// trace); an invalid Parent starts a new trace.
func (t *Tracing) StartJob(s runner.JobSpan) runner.Span {
	red := s.Redact
	if red == nil {
		red = t.redact
	}
	a := attrs{redact: red}
	a.str(keyJobID, s.JobID)
	a.str(keyWorkflow, s.Workflow)
	a.str(keyResultsBranch, s.ResultsBranch)
	a.kv = append(a.kv, attribute.Bool(keyResumed, s.Resumed))
	parent := context.Background()
	opts := []trace.SpanStartOption{trace.WithAttributes(a.kv...)}
	if s.Parent != "" {
		parent = propagation.TraceContext{}.Extract(parent, propagation.MapCarrier{"traceparent": s.Parent})
	}
	if !trace.SpanContextFromContext(parent).IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, sp := t.tracer.Start(parent, "job", opts...)
	return &span{t: t, ctx: ctx, s: sp, redact: red}
}

// Shutdown flushes the spans not yet exported and stops the exporter,
// within the Config's ShutdownTimeout; a failure is a warning and is
// returned. Calls after the first do nothing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var err error
	t.closed.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		if err = t.provider.Shutdown(ctx); err != nil {
			// E.g. a collector answering 429/502 with Retry-After: the
			// exporter is still retrying when the bound ends.
			err = fmt.Errorf("tracing: could not flush the spans to %s within %s (the job's result stands): %w", t.exporter.endpoint, t.timeout, err)
			t.warn(err.Error())
		}
		if n := t.exporter.lost.Load(); n > 0 {
			t.warn(fmt.Sprintf("tracing: %d span(s) could not be exported to %s", n, t.exporter.endpoint))
		}
	})
	return err
}

// warningExporter reports export failures as warnings and drops the
// spans, so the SDK neither logs nor fails: the first failure is reported
// with its error, the total of lost spans at Shutdown.
type warningExporter struct {
	sdktrace.SpanExporter
	warn     func(string)
	endpoint string
	lost     atomic.Int64
	once     sync.Once
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *warningExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.lost.Add(int64(len(spans)))
		e.once.Do(func() {
			e.warn(fmt.Sprintf("tracing: could not export spans to %s (the job continues): %v", e.endpoint, err))
		})
	}
	return nil
}
