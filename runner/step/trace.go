package step

import (
	"context"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner/trace"
)

// spanError is the SpanError of a step failure (nil for none); the
// signature is the one its DLQ record would get.
func spanError(f *Failure, redact func(string) string) *trace.SpanError {
	if f == nil {
		return nil
	}
	msg := redact(f.Message)
	t := f.Type
	if t.Kind == "" {
		t = dlq.Classify(msg)
	}
	return &trace.SpanError{Type: t.String(), Message: msg, Signature: dlq.Signature(t, msg)}
}

// SpanEnd is the end of a phase, attempt or step span: failed with f, or
// succeeded.
func SpanEnd(f *Failure, redact func(string) string) trace.SpanEnd {
	switch {
	case f == nil:
		return trace.SpanEnd{Outcome: "succeeded"}
	case f.Interrupted:
		return trace.SpanEnd{Outcome: "interrupted"}
	}
	return trace.SpanEnd{Outcome: "failed", Error: spanError(f, redact)}
}

// tracedOne runs one step (runOne) inside its span.
func (s *Runner) tracedOne(ctx context.Context, st config.Step, sc *Context) *Failure {
	if !trace.Recorded(sc.Span) {
		return s.runOne(ctx, st, sc)
	}
	kind := stepKind(st)
	ss := trace.SpanStart{Kind: trace.SpanStep, Step: sc.label, StepKind: kind, StepIndex: sc.index}
	if kind == "claude" {
		ss.Model = flagValue(s.Claude.Args, "--model")
	}
	span := sc.Span.Start(ss)
	sc.claude = nil
	f := s.runOne(ctx, st, sc)
	e := SpanEnd(f, s.Red.String)
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
