package runner

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/spend"
)

// ErrBudgetExhausted: the job's spend budget could not cover the next
// item; unstarted items stay pending (exit 1, status budget_exhausted).
var ErrBudgetExhausted = spend.ErrExhausted

// StatusBudgetExhausted is the status of a job stopped by its budget.
const StatusBudgetExhausted = jobstore.StatusBudgetExhausted

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
	j.budget = spend.NewBudget(max, item, spent)
}

// admit reserves the item's budget and returns its runner (built from d); false when the
// job budget cannot cover it (the budget is then exhausted and the job
// stops starting items) or the job is stopping. The item is untouched
// then: it stays pending.
func (j *job) admit(d *itemDeps, row *jobstore.CheckpointItem) (*itemRunner, bool) {
	it := newItem(j.state, row)
	prior, base, tokens := it.spent()
	amount, ok := j.budget.Reserve(prior-base, func() bool { return j.stopping.Load() || j.halted() })
	if !ok {
		if j.budget.Exhausted() {
			j.stop("budget exhausted")
			j.budget.Wake()
		}
		return nil, false
	}
	ir := newItemRunner(d, it, int(j.agentSeq.Add(1)))
	if ir.dataErr != nil {
		j.budget.Release(amount, 0)
		j.stop(ir.dataErr.Error())
		return nil, false
	}
	ir.spend = spend.NewItemSpend(amount, j.budget.ItemMax() > 0, rateLimitMatchers(j.wf.RateLimit.On))
	ir.reservation, ir.priorCost, ir.priorTokens = amount, prior, tokens
	if err := j.cool.Gate(j.haltContext(), ir.announce); err != nil {
		j.budget.Release(amount, 0)
		return nil, false
	}
	return ir, true
}

// releaseBudget returns the unspent part of the item's reservation.
func (ir *itemRunner) releaseBudget() {
	spent, _, _ := ir.spend.Totals()
	ir.d.budget.Release(ir.reservation, spent)
}

// budgetError is the map phase's error when the budget stopped it
// (spend.ExhaustedError): how much was spent and how to continue. The
// suggested --max-cost-usd is what the pending items really need: the
// spend so far plus each pending item's reservation (its item budget less
// what it already spent of it, which is what admit reserves); without an
// item budget, the average spend of the items that spent anything, per
// pending item.
func (j *job) budgetError(left int) error {
	var spent, need, paid float64
	var payers int
	spent = j.state.JobCostUSD()
	// A row that cannot be read leaves the suggestion short; the error
	// still says what was spent.
	_ = j.state.Scan(func(_ int, it *jobstore.CheckpointItem) bool {
		switch {
		case it.State == ItemPending || it.State == ItemRunning:
			need += max(j.budget.ItemMax()-(it.CostUSD-it.CostBase), 0)
		case it.CostUSD > 0:
			paid += it.CostUSD
			payers++
		}
		return true
	})
	if j.budget.ItemMax() <= 0 && payers > 0 {
		need = float64(left) * paid / float64(payers)
	}
	return spend.ExhaustedError(j.id, spent, j.budget.Max(), need, left)
}

// startBudget sets up the job budget when the job (re)opens: an override
// is kept in the checkpoint; spent, the spend of earlier runs, counts.
func (j *job) startBudget(h *jobstore.CheckpointHead, spent float64) {
	if j.maxCost > 0 {
		h.MaxCostUSD = j.maxCost
	}
	j.initBudget(h.MaxCostUSD, spent)
	h.BudgetUSD = j.budget.Max()
}

// cost is the item's spend over all runs of the job.
func (ir *itemRunner) cost() float64 {
	spent, _, _ := ir.spend.Totals()
	return jobstore.RoundUSD(ir.priorCost + spent)
}

// savePhaseSpend adds what setup's or reduce's claude steps cost to the
// job's spend (checkpoint and budget). Phases have no reservation: their
// spend only counts against what items may reserve afterwards.
func (j *job) savePhaseSpend(s *spend.ItemSpend) {
	spent, _, n := s.Totals()
	if n == 0 {
		return
	}
	if err := j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.PhaseCostUSD = jobstore.RoundUSD(h.PhaseCostUSD + spent) }); err != nil {
		j.warn(fmt.Sprintf("could not checkpoint the cost of a setup or reduce step: %v", err))
	}
	if j.budget != nil {
		j.budget.Commit(spent)
	}
}

// rateLimitMatchers are the workflow's rate_limit_on entries for spend.
func rateLimitMatchers(on []config.RateLimitMatcher) []spend.RateLimitMatcher {
	out := make([]spend.RateLimitMatcher, 0, len(on))
	for _, m := range on {
		out = append(out, spend.RateLimitMatcher(m))
	}
	return out
}
