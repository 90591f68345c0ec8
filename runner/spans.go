package runner

import "github.com/prodigy-action/prodigy-action/runner/trace"

// The span model of package trace, named by runner (Engine.Tracer).
type (
	Tracer        = trace.Tracer
	Span          = trace.Span
	JobSpan       = trace.JobSpan
	SpanKind      = trace.SpanKind
	SpanStart     = trace.SpanStart
	SpanEnd       = trace.SpanEnd
	SpanError     = trace.SpanError
	SpanCounts    = trace.SpanCounts
	TraceParenter = trace.TraceParenter
)

// Span kinds, outermost first (trace.SpanJob, …).
const (
	SpanJob     = trace.SpanJob
	SpanPhase   = trace.SpanPhase
	SpanItem    = trace.SpanItem
	SpanAttempt = trace.SpanAttempt
	SpanStep    = trace.SpanStep
)
