package runner

import (
	"context"
	"fmt"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"

	"golang.org/x/sync/errgroup"
)

// mapPhase runs every pending item (of cands, positions in the
// checkpoint, when only is set, else of the checkpoint), in position
// order, at most maxParallel at once, each through its itemRunner under
// ctx (the run context). It stops starting items when the job halts
// (interrupt) or a failure policy says stop; items not started stay
// pending in the checkpoint. The checkpoint is rewritten first only when
// the phase changes or items left running by a crash become pending.
// Items are found as admission reaches them, not listed first, and held
// in memory only while they run (jobstore.State.Hold): a large job's
// first item starts without a pass over its items.
func (j *job) mapPhase(ctx context.Context, cands []int, only bool) (err error) {
	var phase bool
	j.state.ReadHead(func(h *jobstore.CheckpointHead) { phase = h.Phase != jobstore.PhaseMap })
	n := len(cands)
	if !only {
		c := j.state.Counts()
		n = c.Pending + c.Running
		if c.Running > 0 {
			// Left running by a dead process: pending again, written
			// with the phase below before anything starts.
			err := j.state.Rewrite(func(row []byte) bool { return jobstore.RowHas(row, "state", string(ItemRunning)) },
				func(it *jobstore.CheckpointItem) bool {
					if it.State != ItemRunning {
						return false
					}
					pendingAgain(it)
					return true
				})
			if err != nil {
				return fmt.Errorf("%w: %w", ErrJobFailed, err)
			}
			phase = true
		}
	}
	if phase {
		if err = j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseMap }); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
	}
	if n == 0 {
		return nil
	}
	if err := j.agents.Prepare(ctx, j.git.CommonDir()); err != nil {
		return fmt.Errorf("%w: %w", ErrJobFailed, err)
	}
	j.events.Emit(event.PhaseStarted{Phase: jobstore.PhaseMap, Items: n})
	if head, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch); err == nil {
		j.trees.Warm(ctx, min(j.maxParallel, n), head)
	}
	j.prog.Begin(n)
	j.mapSpan = j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseMap})
	defer func() { j.mapSpan.End(SpanEnd{Outcome: mapOutcome(err)}) }()
	deps := j.itemDeps()
	next := j.pendingItems(cands, only)
	var g errgroup.Group
	g.SetLimit(min(j.maxParallel, n))
	for {
		if j.halted() || j.stopping.Load() {
			break
		}
		pos, err := next()
		if err != nil {
			j.stop(err.Error())
			break
		}
		if pos < 0 {
			break
		}
		g.Go(func() error {
			if j.halted() || j.stopping.Load() {
				return nil
			}
			row, err := j.state.Hold(pos)
			if err != nil {
				j.stop(err.Error())
				return nil
			}
			defer j.state.Release(row)
			ir, ok := j.admit(deps, row)
			if !ok {
				return nil
			}
			ir.run(ctx)
			return nil
		})
	}
	_ = g.Wait()
	j.events.Emit(event.PhaseCompleted{Phase: jobstore.PhaseMap})
	left := j.state.Counts().Pending
	switch {
	case j.halted() && left > 0:
		return fmt.Errorf("%w: %d item(s) pending; continue with `resume %s`", ErrInterrupted, left, j.id)
	case j.budget.Exhausted() && left > 0:
		return j.budgetError(left)
	case j.breaker.Tripped() != nil:
		return j.stormError(left)
	case j.stopping.Load():
		return fmt.Errorf("%w: %s; %d item(s) left pending", ErrJobFailed, j.stopReason(), left)
	}
	return nil
}

// pendingItems returns the positions of the items mapPhase runs, one per
// call (-1 at the end): of cands when only is set, else of the whole
// checkpoint, found as they are asked for (rows that are not pending or
// running are not decoded). An item left running by a dead process is
// made pending first.
func (j *job) pendingItems(cands []int, only bool) func() (int, error) {
	runnable := func(it *jobstore.CheckpointItem) bool { return it.State == ItemPending || it.State == ItemRunning }
	maybe := func(row []byte) bool {
		return jobstore.RowHas(row, "state", string(ItemPending), string(ItemRunning))
	}
	from, k := 0, 0
	seen := map[int]bool{}
	return func() (int, error) {
		for {
			var pos int
			if only {
				if k >= len(cands) {
					return -1, nil
				}
				pos, k = cands[k], k+1
				if seen[pos] {
					continue
				}
				seen[pos] = true
				ok, err := j.state.Check(pos, runnable)
				if err != nil {
					return -1, err
				}
				if !ok {
					continue // no longer pending
				}
			} else {
				p, err := j.state.Next(from, maybe, runnable)
				if err != nil || p < 0 {
					return -1, err
				}
				pos, from = p, p+1
			}
			return pos, nil
		}
	}
}
