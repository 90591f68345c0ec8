package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/step"
)

// attemptWithWaits runs attempt number attempt; an attempt that failed
// because the provider rate-limited or was overloaded does not count: it
// starts the fleet cool-down (the provider's retry delay when known, else
// the item's backoff) and runs again after it, at most
// rate_limit.max_waits times per item. The item's spend is checkpointed
// after every run.
func (ir *itemRunner) attemptWithWaits(ctx context.Context, attempt int) *step.Failure {
	d := ir.d
	for {
		if err := d.cool.Gate(d.halt, nil); err != nil {
			return &step.Failure{Message: "interrupted", Interrupted: true}
		}
		ir.spend.BeginAttempt()
		f := ir.tracedAttempt(ctx, attempt)
		ir.saveSpend()
		if f == nil || f.Interrupted || f.Permanent {
			return f
		}
		reason, delay, resetsAt := ir.spend.RateLimited()
		if reason == "" {
			return f
		}
		maxWait := d.wf.RateLimit.MaxCooldown
		if maxWait <= 0 {
			maxWait = config.DefaultMaxCooldown
		}
		if !resetsAt.IsZero() {
			// A rejected subscription limit: wait until it resets, or, when
			// that is further away than rate_limit.max_cooldown, start
			// nothing more and leave the items pending for a resume.
			until := resetsAt.Sub(d.now())
			if until > maxWait {
				d.stop(fmt.Sprintf("the provider's limit (%s) resets at %s, in %s: longer than rate_limit.max_cooldown (%s); `resume %s` after that",
					reason, resetsAt.UTC().Format(time.RFC3339), until.Round(time.Minute), maxWait, d.jobID))
				fmt.Fprintf(ir.log, "--- %s until %s; the item stays pending\n", reason, resetsAt.UTC().Format(time.RFC3339))
				return &step.Failure{Message: "interrupted", Interrupted: true}
			}
			delay = max(until, time.Second)
		}
		if delay > maxWait {
			d.logf("⚠ %s: the provider asked to wait %s; clamped to rate_limit.max_cooldown (%s)", ir.it.id, delay.Round(time.Second), maxWait)
			delay = maxWait
		}
		if ir.waits >= d.wf.RateLimit.MaxWaits {
			d.logf("⚠ %s rate-limited again (%s) after %d wait(s) (rate_limit.max_waits); the attempt counts", ir.it.id, reason, ir.waits)
			return f
		}
		ir.waits++
		if delay <= 0 && d.policy.Backoff != nil {
			delay = d.policy.Backoff.Delay(ir.waits)
			if d.policy.MaxDelay > 0 {
				delay = min(delay, d.policy.MaxDelay)
			}
		}
		if delay <= 0 {
			delay = time.Second
		}
		msg := d.redact(f.Message)
		fmt.Fprintf(ir.log, "--- rate-limited (%s); not counted as an attempt; fleet cool-down %s\n", reason, delay)
		d.logf("⏳ %s rate-limited (%s): fleet cool-down %s; the attempt does not count (wait %d/%d)", ir.it.id, reason, delay, ir.waits, d.wf.RateLimit.MaxWaits)
		d.events.Emit(event.AgentRetrying{AgentID: ir.agentID, ItemID: ir.it.id, Attempt: ir.base + attempt, BackoffMS: delay.Milliseconds(), Error: msg})
		d.cool.Start(delay, reason)
	}
}

// saveSpend checkpoints the item's cost: what earlier runs spent plus
// this run's.
func (ir *itemRunner) saveSpend() {
	spent, tokens, n := ir.spend.Totals()
	if n == 0 {
		return
	}
	d, it := ir.d, ir.it
	d.persisted("item "+it.id+" cost", it.saveSpend(jobstore.RoundUSD(ir.priorCost+spent), ir.priorTokens.Add(jobstore.Tokens(tokens))))
}
