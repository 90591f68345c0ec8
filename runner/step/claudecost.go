package step

import (
	"context"
	"fmt"
	"os"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/spend"
)

// accountedClaude runs a claude step (Runner.claude) within the
// item's budget and accounts its spend and provider errors: a step with
// nothing left of the item's reservation does not start; a run that ended
// error_max_budget_usd is ResourceExhausted (permanent when the item's
// budget is spent); a failed run that saw the provider rate-limit or
// overload is marked rate-limited for the attempt.
func (s *Runner) accountedClaude(ctx context.Context, st config.Step, sc *Context) (string, *Failure) {
	if left, capped := sc.Spend.Left(); capped && left <= spend.Epsilon {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Permanent: true,
			Message: fmt.Sprintf("%s: the item's budget (item_max_cost_usd) is spent; the claude step did not start", sc.label)}
	}
	var offset int64
	if fi, err := os.Stat(sc.Transcript); err == nil {
		offset = fi.Size()
	}
	out, f := s.claude(ctx, st, sc)
	s.fault(ctx, FaultClaudeDone, sc.label)
	if fi, err := os.Stat(sc.Transcript); f != nil && (err != nil || fi.Size() == offset) {
		return out, f // Claude Code wrote nothing: it never started a request
	}
	run, err := spend.ScanClaudeRun(sc.Transcript, offset)
	if err != nil {
		run = spend.ClaudeRun{CostInvalid: fmt.Sprintf("read the transcript: %v", err)}
	}
	if !run.Found && f == nil && run.CostInvalid == "" {
		return out, f // nothing ran that could have spent
	}
	counted := sc.Spend.Add(run)
	sc.claude = &run
	switch {
	case run.Found && run.CostInvalid == "":
		fmt.Fprintf(sc.Log, "--- claude step cost $%.4f (%d input, %d output tokens)\n", run.CostUSD, run.Tokens.Input, run.Tokens.Output)
	case run.CostInvalid != "":
		fmt.Fprintf(sc.Log, "--- claude step cost unknown (%s): counted as $%.4f, what was left of the item's budget\n", run.CostInvalid, counted)
	default:
		fmt.Fprintf(sc.Log, "--- claude step wrote no result: its cost counts as $%.4f, what was left of the item's budget\n", counted)
	}
	if f == nil || f.Interrupted {
		return out, f
	}
	if run.Subtype == spend.SubtypeMaxBudget {
		left, _ := sc.Spend.Left()
		f.Type = dlq.ErrorType{Kind: dlq.ResourceExhausted}
		f.Message = fmt.Sprintf("%s: Claude Code stopped at its budget (--max-budget-usd, error_max_budget_usd) [%s]", sc.label, f.Message)
		f.Permanent = f.Permanent || left <= spend.Epsilon
		return out, f
	}
	if run.RateLimit != "" && run.Subtype != "error_max_turns" {
		sc.Spend.MarkBusy("claude: "+run.RateLimit, run.RetryDelay, run.ResetsAt)
	}
	return out, f
}

// noteShellFailure marks s's attempt rate-limited when a rate_limit_on
// matcher matches the failed shell step f.
func noteShellFailure(s *spend.ItemSpend, f *Failure) {
	if f == nil || f.Interrupted {
		return
	}
	code := 0
	if f.Type.Kind == dlq.CommandFailed {
		code = f.Type.ExitCode
	}
	s.NoteShellFailure(code, f.Message+"\n"+brief.LastLines(f.Tail, 20))
}
