package telemetry

import (
	"context"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/prodigy-action/prodigy-action/runner"
)

// Attribute keys of prodigy-action's spans (the gen_ai.* and error.type
// keys are OpenTelemetry semantic conventions).
const (
	keyJobID          = "prodigy.job.id"
	keyWorkflow       = "prodigy.workflow.name"
	keyResultsBranch  = "prodigy.results_branch"
	keyResumed        = "prodigy.job.resumed"
	keyPhase          = "prodigy.phase"
	keyItemID         = "prodigy.item.id"
	keyItemLabel      = "prodigy.item.label"
	keyAttempt        = "prodigy.attempt"
	keyAttempts       = "prodigy.attempts"
	keyStep           = "prodigy.step.name"
	keyStepKind       = "prodigy.step.kind"
	keyStepIndex      = "prodigy.step.index"
	keyOutcome        = "prodigy.outcome"
	keyErrorMessage   = "prodigy.error.message"
	keyErrorSignature = "prodigy.error.signature"
	keyCost           = "prodigy.cost_usd"
	keyInputTokens    = "prodigy.tokens.input"
	keyOutputTokens   = "prodigy.tokens.output"
	keyItemsTotal     = "prodigy.items.total"
	keyItemsMerged    = "prodigy.items.successful"
	keyItemsFailed    = "prodigy.items.failed"
	keyItemsSkipped   = "prodigy.items.skipped"
	keyItemsPending   = "prodigy.items.pending"
	// keyGenAISystem is the older name of gen_ai.provider.name, still read
	// by many backends.
	keyGenAISystem = "gen_ai.system"
	// agentName is gen_ai.agent.name of claude steps.
	agentName = "claude-code"
)

// maxAttrLen bounds a string attribute (bytes); longer values are cut
// after redaction, so a cut never splits a secret the redactor would have
// recognised.
const maxAttrLen = 4096

// span is a runner.Span backed by an OpenTelemetry span.
type span struct {
	t      *Tracing
	ctx    context.Context
	s      trace.Span
	redact func(string) string
}

// Start implements runner.Span.
func (p *span) Start(ss runner.SpanStart) runner.Span {
	a := attrs{redact: p.redact}
	name := string(ss.Kind)
	kind := trace.SpanKindInternal
	switch ss.Kind {
	case runner.SpanPhase:
		name = ss.Phase
		a.str(keyPhase, ss.Phase)
	case runner.SpanItem:
		a.str(keyItemID, ss.ItemID)
		if ss.ItemLabel != "" && ss.ItemLabel != ss.ItemID {
			a.str(keyItemLabel, ss.ItemLabel)
		}
	case runner.SpanAttempt:
		a.kv = append(a.kv, attribute.Int(keyAttempt, ss.Attempt))
	case runner.SpanStep:
		a.str(keyStep, ss.Step)
		a.str(keyStepKind, ss.StepKind)
		a.kv = append(a.kv, attribute.Int(keyStepIndex, ss.StepIndex))
		if ss.StepKind == "claude" {
			name = "invoke_agent " + agentName
			kind = trace.SpanKindClient
			a.kv = append(a.kv, semconv.GenAIOperationNameInvokeAgent, semconv.GenAIProviderNameAnthropic,
				attribute.String(keyGenAISystem, "anthropic"), semconv.GenAIAgentName(agentName))
			if ss.Model != "" {
				a.str(string(semconv.GenAIRequestModelKey), ss.Model)
			}
		}
	}
	ctx, sp := p.t.tracer.Start(p.ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(a.kv...))
	return &span{t: p.t, ctx: ctx, s: sp, redact: p.redact}
}

// End implements runner.Span.
func (p *span) End(e runner.SpanEnd) {
	a := attrs{redact: p.redact}
	a.str(keyOutcome, e.Outcome)
	if e.Attempts > 0 {
		a.kv = append(a.kv, attribute.Int(keyAttempts, e.Attempts))
	}
	if e.CostUSD != 0 || e.Claude {
		a.kv = append(a.kv, attribute.Float64(keyCost, e.CostUSD))
	}
	if e.Claude {
		a.kv = append(a.kv, semconv.GenAIUsageInputTokens(int(e.InputTokens)), semconv.GenAIUsageOutputTokens(int(e.OutputTokens)))
		if len(e.Models) > 0 {
			a.str(string(semconv.GenAIResponseModelKey), strings.Join(e.Models, ","))
		}
	} else if e.InputTokens != 0 || e.OutputTokens != 0 {
		a.kv = append(a.kv, attribute.Int64(keyInputTokens, e.InputTokens), attribute.Int64(keyOutputTokens, e.OutputTokens))
	}
	if c := e.Counts; c != nil {
		a.kv = append(a.kv, attribute.Int(keyItemsTotal, c.Total), attribute.Int(keyItemsMerged, c.Successful),
			attribute.Int(keyItemsFailed, c.Failed), attribute.Int(keyItemsSkipped, c.Skipped), attribute.Int(keyItemsPending, c.Pending))
	}
	if err := e.Error; err != nil {
		if err.Type != "" {
			a.str(string(semconv.ErrorTypeKey), err.Type)
		}
		a.str(keyErrorMessage, err.Message)
		if err.Signature != "" {
			a.str(keyErrorSignature, err.Signature)
		}
		p.s.SetStatus(codes.Error, a.clean(err.Message))
	}
	p.s.SetAttributes(a.kv...)
	p.s.End()
}

// TraceID implements runner.Span: "" when the span is not sampled.
func (p *span) TraceID() string {
	sc := p.s.SpanContext()
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceParent implements runner.TraceParenter: the span as a W3C
// traceparent, "" when it is not sampled.
func (p *span) TraceParent() string {
	if !p.s.SpanContext().IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(p.ctx, c)
	return c["traceparent"]
}

// attrs collects attributes; every string passes redact, then is bounded.
type attrs struct {
	kv     []attribute.KeyValue
	redact func(string) string
}

func (a *attrs) str(key, v string) {
	a.kv = append(a.kv, attribute.String(key, a.clean(v)))
}

// clean redacts v and cuts it to maxAttrLen bytes (on a rune boundary).
func (a *attrs) clean(v string) string {
	v = a.redact(v)
	if len(v) > maxAttrLen {
		cut := maxAttrLen
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return v
}
