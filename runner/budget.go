package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// ErrBudgetExhausted: the job's spend budget could not cover the next
// item; unstarted items stay pending (exit 1, status budget_exhausted).
var ErrBudgetExhausted = errors.New("budget exhausted")

// StatusBudgetExhausted is the status of a job stopped by its budget.
const StatusBudgetExhausted = jobstore.StatusBudgetExhausted

// jobBudget reserves item budgets from the job budget: an item starts
// only when its reservation fits in what the job has left after the spend
// of finished items (all runs of the job) and the reservations of running
// ones; the unspent part of a reservation is released when the item ends.
// So the job's spend stays within its budget as long as Claude Code keeps
// each step within its --max-budget-usd. Safe for concurrent use.
type jobBudget struct {
	mu   sync.Mutex
	cond *sync.Cond
	// max is the job budget and item the item budget; 0 = none.
	max, item float64
	// committed is the spend of items not running; reserved the
	// reservations of running ones.
	committed, reserved float64
	active              int
	exhausted           bool
}

func newJobBudget(max, item, spent float64) *jobBudget {
	b := &jobBudget{max: max, item: item, committed: spent}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// reserve takes the reservation of an item that already spent prior (in
// earlier runs). When it does not fit but items are running, it waits for
// them to release theirs; it returns false, and the budget is exhausted,
// when it cannot fit, or at once when stop() says the job is stopping.
func (b *jobBudget) reserve(prior float64, stop func() bool) (float64, bool) {
	amount := 0.0
	if b.item > 0 {
		amount = max(b.item-prior, 0)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if stop() || b.exhausted {
			return 0, false
		}
		fits := b.max == 0 || (b.committed+b.reserved+amount <= b.max+budgetEpsilon && b.committed < b.max-budgetEpsilon)
		if fits {
			b.reserved += amount
			b.active++
			return amount, true
		}
		if b.active == 0 {
			b.exhausted = true
			return 0, false
		}
		b.cond.Wait()
	}
}

// release ends a reservation; spent is what the item spent in this run.
func (b *jobBudget) release(amount, spent float64) {
	b.mu.Lock()
	b.reserved -= amount
	b.committed += spent
	b.active--
	b.mu.Unlock()
	b.cond.Broadcast()
}

// wake lets waiting reservations see that the job is stopping.
func (b *jobBudget) wake() { b.cond.Broadcast() }

func (b *jobBudget) isExhausted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exhausted
}

// initBudget sets the budget a job runs with: --max-cost-usd (the spec or,
// for a resume, the checkpoint) over the workflow's budget.max_cost_usd.
func (j *job) initBudget(override, spent float64) {
	var max, item float64
	if b := j.wf.Budget; b != nil {
		max, item = b.MaxCostUSD, b.ItemMaxCostUSD
	}
	if override > 0 {
		max = override
	}
	j.budget = newJobBudget(max, item, spent)
}

// admit reserves the item's budget and returns its runner; false when the
// job budget cannot cover it (the budget is then exhausted and the job
// stops starting items) or the job is stopping. The item is untouched
// then: it stays pending.
func (j *job) admit(ctx context.Context, it *jobstore.CheckpointItem) (*itemRunner, bool) {
	var (
		prior  float64
		tokens jobstore.Tokens
	)
	var base float64
	j.state.Read(func(*jobstore.Checkpoint) {
		prior, base = it.CostUSD, it.CostBase
		if it.Tokens != nil {
			tokens = *it.Tokens
		}
	})
	amount, ok := j.budget.reserve(prior-base, func() bool { return j.stopping.Load() || ctx.Err() != nil })
	if !ok {
		if j.budget.isExhausted() {
			j.stop("budget exhausted")
			j.budget.wake()
		}
		return nil, false
	}
	ir := j.newItemRunner(it)
	if ir.dataErr != nil {
		j.budget.release(amount, 0)
		j.stop(ir.dataErr.Error())
		return nil, false
	}
	ir.spend = &itemSpend{reserved: amount, capped: j.budget.item > 0, matchers: j.wf.RateLimit.On}
	ir.reservation, ir.priorCost, ir.priorTokens = amount, prior, tokens
	if err := j.cool.gate(ctx, ir.announce); err != nil {
		j.budget.release(amount, 0)
		return nil, false
	}
	return ir, true
}

// releaseBudget returns the unspent part of the item's reservation.
func (ir *itemRunner) releaseBudget() {
	spent, _, _ := ir.spend.totals()
	ir.j.budget.release(ir.reservation, spent)
}

// budgetError is the map phase's error when the budget stopped it: how
// much was spent and how to continue. The suggested --max-cost-usd is what
// the pending items really need: the spend so far plus each pending item's
// reservation (its item budget less what it already spent of it, which is
// what admit reserves); without an item budget, the average spend of the
// items that spent anything, per pending item.
func (j *job) budgetError(left int) error {
	var spent, need, paid float64
	var payers int
	j.state.Read(func(cp *jobstore.Checkpoint) {
		spent = cp.JobCost()
		for _, it := range cp.Items {
			switch {
			case it.State == ItemPending || it.State == ItemRunning:
				need += max(j.budget.item-(it.CostUSD-it.CostBase), 0)
			case it.CostUSD > 0:
				paid += it.CostUSD
				payers++
			}
		}
	})
	if j.budget.item <= 0 && payers > 0 {
		need = float64(left) * paid / float64(payers)
	}
	next := "a higher --max-cost-usd"
	if need > 0 {
		// Rounded up, so that the suggestion suffices.
		next = fmt.Sprintf("--max-cost-usd %s", formatUSD(math.Ceil((spent+need)*1e4-1e-6)/1e4))
	}
	return fmt.Errorf("%w: spent $%s of the $%s job budget; %d item(s) left pending, never started; "+
		"continue with `resume %s %s`", ErrBudgetExhausted, formatUSD(spent), formatUSD(j.budget.max), left, j.id, next)
}

// formatUSD prints a dollar amount with two decimals, or up to four when
// it has them ($0.0246, not $0.02).
func formatUSD(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', 4, 64)
	for range 2 {
		s = strings.TrimSuffix(s, "0")
	}
	return s
}

// startBudget sets up the job budget when the job (re)opens: an override
// is kept in the checkpoint; the spend of earlier runs counts.
func (j *job) startBudget(cp *jobstore.Checkpoint) {
	if j.maxCost > 0 {
		cp.MaxCostUSD = j.maxCost
	}
	j.initBudget(cp.MaxCostUSD, cp.JobCost())
	cp.BudgetUSD = j.budget.max
}

// cost is the item's spend over all runs of the job.
func (ir *itemRunner) cost() float64 {
	spent, _, _ := ir.spend.totals()
	return jobstore.RoundUSD(ir.priorCost + spent)
}

// savePhaseSpend adds what setup's or reduce's claude steps cost to the
// job's spend (checkpoint and budget). Phases have no reservation: their
// spend only counts against what items may reserve afterwards.
func (j *job) savePhaseSpend(s *itemSpend) {
	spent, _, n := s.totals()
	if n == 0 {
		return
	}
	if err := j.state.Update(func(cp *jobstore.Checkpoint) { cp.PhaseCostUSD = jobstore.RoundUSD(cp.PhaseCostUSD + spent) }); err != nil {
		j.warn(fmt.Sprintf("could not checkpoint the cost of a setup or reduce step: %v", err))
	}
	if j.budget != nil {
		j.budget.mu.Lock()
		j.budget.committed += spent
		j.budget.mu.Unlock()
	}
}
