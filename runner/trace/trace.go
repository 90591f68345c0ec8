// Package trace is the model of the spans the engine (runner) reports to
// a Tracer: one execution of a job as nested spans, job → phase (setup,
// map, reduce) → item → attempt → step, with what is known when each
// starts and ends. Package telemetry implements Tracer with OpenTelemetry;
// runner names these types (runner.Tracer, runner.Span, …) as its own.
package trace

// Tracer receives the structure of one execution of a job (run, resume,
// redrive, shard, gather) as nested spans: job → phase (setup, map,
// reduce) → item → attempt → step. Package telemetry implements it with
// OpenTelemetry; Engine.Tracer nil traces nothing. The engine calls it
// synchronously when the work starts and ends, so spans carry the real
// wall-clock timing. Implementations must be safe for concurrent use: items
// run in parallel.
type Tracer interface {
	// StartJob begins the root span of a job execution.
	StartJob(s JobSpan) Span
}

// Span is one traced unit of work. Start and End may be called from
// several goroutines for different spans; End is called once.
type Span interface {
	// Start begins a child span.
	Start(s SpanStart) Span
	// End ends the span with its outcome.
	End(e SpanEnd)
	// TraceID is the span's trace id (32 hex digits), "" when the span is
	// not recorded (sampled out, tracing off).
	TraceID() string
}

// JobSpan describes a job execution's root span.
type JobSpan struct {
	JobID         string
	Workflow      string
	ResultsBranch string
	// Resumed is set for resumes, redrives and later shard or gather runs
	// of an existing job.
	Resumed bool
	// Parent is the W3C traceparent the job's span continues ("" starts a
	// new trace): a sharded job's shards and gather pass the plan's, so
	// the whole job is one trace with the plan's span as its root.
	Parent string
	// Redact is the job's redactor (environment values, the workflow's
	// `secrets:`): the tracer must pass every string attribute and status
	// message of this trace through it before anything leaves the process.
	Redact func(string) string
}

// SpanKind is the level of a span in the job's tree.
type SpanKind string

// Span kinds, outermost first.
const (
	SpanJob     SpanKind = "job"
	SpanPhase   SpanKind = "phase"
	SpanItem    SpanKind = "item"
	SpanAttempt SpanKind = "attempt"
	SpanStep    SpanKind = "step"
)

// SpanStart describes a span when it begins; fields that do not apply to
// its Kind are zero.
type SpanStart struct {
	Kind SpanKind
	// Phase is "setup", "map" or "reduce" (SpanPhase).
	Phase string
	// ItemID and ItemLabel name the item (SpanItem).
	ItemID, ItemLabel string
	// Attempt is the attempt's number, counted across runs of the job (SpanAttempt).
	Attempt int
	// Step is the step's label (`shell step 2`, `step "lint"`), StepKind
	// "shell", "claude" or "write_file", StepIndex its 1-based position (SpanStep).
	Step      string
	StepKind  string
	StepIndex int
	// Model is the model a claude step asked for (--model in the Claude
	// arguments), "" when not known.
	Model string
}

// SpanEnd is what is known about a span's work when it ends.
type SpanEnd struct {
	// Outcome is how the work ended: an item's final state (merged, dlq,
	// skipped, pending), an attempt's (succeeded, failed, rate_limited,
	// interrupted), a step's or phase's (succeeded, failed, interrupted),
	// the job's status.
	Outcome string
	// Error describes a failure; nil when the work succeeded. A span with
	// an Error has the error status.
	Error *SpanError
	// Attempts is the number of attempts an item made (SpanItem).
	Attempts int
	// CostUSD and the token counts are what the span's claude steps cost.
	CostUSD                   float64
	InputTokens, OutputTokens int64
	// Claude is set on the span of a claude step that reported a result.
	Claude bool
	// Models are the models a claude step used (its result's modelUsage).
	Models []string
	// Counts are the job's item counts (SpanJob).
	Counts *SpanCounts
}

// SpanError describes a failure on a span.
type SpanError struct {
	// Type is the error type (CommandFailed, Timeout, …).
	Type string
	// Message is the error text, already redacted by the engine.
	Message string
	// Signature is the failure's error_signature (items, attempts).
	Signature string
}

// SpanCounts are a job's item counts when it ends.
type SpanCounts struct {
	Total, Successful, Failed, Skipped, Pending int
}

// NoSpan is the span of an untraced job: every method does nothing.
type NoSpan struct{}

func (NoSpan) Start(SpanStart) Span { return NoSpan{} }
func (NoSpan) End(SpanEnd)          {}
func (NoSpan) TraceID() string      { return "" }

// Recorded reports whether s is a real span (what its end says is worth
// computing).
func Recorded(s Span) bool {
	_, none := s.(NoSpan)
	return s != nil && !none
}

// Or returns s, or a span that does nothing when s is nil.
func Or(s Span) Span {
	if s == nil {
		return NoSpan{}
	}
	return s
}

// TraceParenter is implemented by spans that can name themselves as a W3C
// traceparent, so other processes can continue their trace.
type TraceParenter interface {
	// TraceParent is the span's traceparent header value ("" when the
	// span is not recorded).
	TraceParent() string
}
