package runner

import (
	"context"
	"errors"

	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/runner/trace"
)

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

// spanTraceParent is sp's traceparent, "" when it has none.
func spanTraceParent(sp Span) string {
	if tp, ok := sp.(TraceParenter); ok && sp != nil {
		return tp.TraceParent()
	}
	return ""
}

// rootSpan is the job's span, or one that does nothing.
func (j *job) rootSpan() Span { return trace.Or(j.span) }

// endJobSpan ends the job's root span (once).
func (j *job) endJobSpan(e SpanEnd) {
	if j.span == nil {
		return
	}
	j.span.End(e)
	j.span = nil
}

// phaseEnd is the end of a setup or reduce span.
func (j *job) phaseEnd(f *step.Failure) SpanEnd { return step.SpanEnd(f, j.redact) }

// tracedAttempt runs one attempt of the item (attempt) inside its span.
func (ir *itemRunner) tracedAttempt(ctx context.Context, attempt int) *step.Failure {
	if !trace.Recorded(ir.span) {
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
func (ir *itemRunner) attemptSpanEnd(f *step.Failure) SpanEnd {
	e := step.SpanEnd(f, ir.d.redact)
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
	_ = res.EachItem(func(it ItemOutcome) error {
		if it.Tokens != nil {
			e.InputTokens += it.Tokens.Input
			e.OutputTokens += it.Tokens.Output
		}
		return nil
	})
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
