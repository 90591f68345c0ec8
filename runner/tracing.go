package runner

import (
	"context"
	"errors"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
)

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

// noSpan is the span of an untraced job: every method does nothing.
type noSpan struct{}

func (noSpan) Start(SpanStart) Span { return noSpan{} }
func (noSpan) End(SpanEnd)          {}
func (noSpan) TraceID() string      { return "" }

// recorded reports whether s is a real span (what its end says is worth
// computing).
func recorded(s Span) bool {
	_, none := s.(noSpan)
	return s != nil && !none
}

// spanOr returns s, or a span that does nothing when s is nil.
func spanOr(s Span) Span {
	if s == nil {
		return noSpan{}
	}
	return s
}

// startJobSpan begins the job's root span (once per execution); the
// job's trace id is kept for its events and Result.
func (j *job) startJobSpan(resumed bool) {
	if j.tracer == nil || j.span != nil {
		return
	}
	j.span = j.tracer.StartJob(JobSpan{JobID: j.id, Workflow: j.wf.Name, ResultsBranch: j.branch, Resumed: resumed, Parent: j.traceParent, Redact: j.redact})
	if j.span == nil {
		return
	}
	j.traceID = j.span.TraceID()
}

// TraceParenter is implemented by spans that can name themselves as a W3C
// traceparent, so other processes can continue their trace.
type TraceParenter interface {
	// TraceParent is the span's traceparent header value ("" when the
	// span is not recorded).
	TraceParent() string
}

// spanTraceParent is sp's traceparent, "" when it has none.
func spanTraceParent(sp Span) string {
	if tp, ok := sp.(TraceParenter); ok && sp != nil {
		return tp.TraceParent()
	}
	return ""
}

// rootSpan is the job's span, or one that does nothing.
func (j *job) rootSpan() Span { return spanOr(j.span) }

// endJobSpan ends the job's root span (once).
func (j *job) endJobSpan(e SpanEnd) {
	if j.span == nil {
		return
	}
	j.span.End(e)
	j.span = nil
}

// spanError is the SpanError of a step failure (nil for none); the
// signature is the one its DLQ record would get.
func spanError(f *stepFailure, redact func(string) string) *SpanError {
	if f == nil {
		return nil
	}
	msg := redact(f.Message)
	t := f.Type
	if t.Kind == "" {
		t = dlq.Classify(msg)
	}
	return &SpanError{Type: t.String(), Message: msg, Signature: dlq.Signature(t, msg)}
}

// spanEnd is the end of a phase, attempt or step span: failed with f, or
// succeeded.
func spanEnd(f *stepFailure, redact func(string) string) SpanEnd {
	switch {
	case f == nil:
		return SpanEnd{Outcome: "succeeded"}
	case f.Interrupted:
		return SpanEnd{Outcome: "interrupted"}
	}
	return SpanEnd{Outcome: "failed", Error: spanError(f, redact)}
}

// phaseEnd is the end of a setup or reduce span.
func (j *job) phaseEnd(f *stepFailure) SpanEnd { return spanEnd(f, j.redact) }

// tracedOne runs one step (runOne) inside its span.
func (s *stepRunner) tracedOne(ctx context.Context, st config.Step, sc *stepContext) *stepFailure {
	if !recorded(sc.span) {
		return s.runOne(ctx, st, sc)
	}
	kind := stepKind(st)
	ss := SpanStart{Kind: SpanStep, Step: sc.label, StepKind: kind, StepIndex: sc.index}
	if kind == "claude" {
		ss.Model = flagValue(s.claudeCode.Args, "--model")
	}
	span := sc.span.Start(ss)
	sc.claude = nil
	f := s.runOne(ctx, st, sc)
	e := spanEnd(f, s.red.String)
	if run := sc.claude; run != nil && run.Found {
		e.Claude = true
		e.CostUSD = run.CostUSD
		e.InputTokens, e.OutputTokens = run.Tokens.Input, run.Tokens.Output
		if run.Models != "" {
			e.Models = strings.Split(run.Models, ",")
		}
	}
	sc.claude = nil
	span.End(e)
	return f
}

// stepKind is "shell", "claude" or "write_file".
func stepKind(st config.Step) string {
	switch {
	case st.Claude != "":
		return "claude"
	case st.WriteFile != nil:
		return "write_file"
	}
	return "shell"
}

// flagValue is the value of --name VALUE or --name=VALUE in args ("" when absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// tracedAttempt runs one attempt of the item (attempt) inside its span.
func (ir *itemRunner) tracedAttempt(ctx context.Context, attempt int) *stepFailure {
	if !recorded(ir.span) {
		return ir.attempt(ctx, attempt)
	}
	ir.attemptSpan = ir.span.Start(SpanStart{Kind: SpanAttempt, Attempt: ir.base + attempt})
	f := ir.attempt(ctx, attempt)
	ir.attemptSpan.End(ir.attemptSpanEnd(f))
	ir.attemptSpan = nil
	return f
}

// itemSpanEnd is the end of an item's span, from its checkpoint entry
// and this run's spend.
func (ir *itemRunner) itemSpanEnd() SpanEnd {
	o := ir.it.outcome()
	cost, tokens, _ := ir.spend.Totals()
	e := SpanEnd{Outcome: string(o.State), Attempts: o.Attempts, CostUSD: cost, InputTokens: tokens.Input, OutputTokens: tokens.Output}
	if o.State == ItemDLQ || o.State == ItemSkipped {
		e.Error = &SpanError{Type: o.ErrorType, Message: ir.d.redact(o.Error), Signature: ir.signature}
	}
	return e
}

// attemptSpanEnd is the end of an attempt's span: f is its failure (nil
// when it succeeded).
func (ir *itemRunner) attemptSpanEnd(f *stepFailure) SpanEnd {
	e := spanEnd(f, ir.d.redact)
	if f != nil && !f.Interrupted {
		if reason, _, _ := ir.spend.RateLimited(); reason != "" {
			e.Outcome = "rate_limited"
		}
	}
	if ir.spend != nil {
		e.CostUSD = ir.spend.AttemptCost()
	}
	return e
}

// jobSpanEnd is the end of the job's span from its Result.
func jobSpanEnd(res *Result) SpanEnd {
	e := SpanEnd{Outcome: string(res.Status), CostUSD: res.CostUSD,
		Counts: &SpanCounts{Total: res.Total, Successful: res.Successful, Failed: res.Failed, Skipped: res.Skipped, Pending: res.Pending}}
	for _, it := range res.Items {
		if it.Tokens != nil {
			e.InputTokens += it.Tokens.Input
			e.OutputTokens += it.Tokens.Output
		}
	}
	if res.Status != StatusCompleted && res.Error != "" {
		e.Error = &SpanError{Type: string(res.Status), Message: res.Error}
	}
	return e
}

// mapOutcome is the map phase's outcome from its error.
func mapOutcome(err error) string {
	switch {
	case err == nil:
		return "succeeded"
	case errors.Is(err, ErrInterrupted):
		return "interrupted"
	case errors.Is(err, ErrBudgetExhausted):
		return string(StatusBudgetExhausted)
	case errors.Is(err, ErrFailureStorm):
		return string(StatusStoppedByBreaker)
	}
	return "stopped"
}
