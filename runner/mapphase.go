package runner

import (
	"context"
	"fmt"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"

	"golang.org/x/sync/errgroup"
)

// mapPhase runs every pending item (of cands when only is set, else of
// the checkpoint), at most maxParallel at once, each through its
// itemRunner under ctx (the run context). It stops starting items when
// the job halts (interrupt) or a failure policy says stop; items not started stay
// pending in the checkpoint. The checkpoint is rewritten first only when
// the phase changes or items left running by a crash become pending.
func (j *job) mapPhase(ctx context.Context, cands []*jobstore.CheckpointItem, only bool) (err error) {
	var pending, stale []*jobstore.CheckpointItem
	var phase bool
	j.state.Read(func(cp *jobstore.Checkpoint) {
		phase = cp.Phase != jobstore.PhaseMap
		if !only {
			cands = cp.Items
		}
		for _, it := range cands {
			if it.State == ItemPending || it.State == ItemRunning {
				pending = append(pending, it)
				if it.State == ItemRunning {
					stale = append(stale, it)
				}
			}
		}
	})
	if phase || len(stale) > 0 {
		err = j.state.Update(func(cp *jobstore.Checkpoint) {
			cp.Phase = jobstore.PhaseMap
			for _, it := range stale {
				pendingAgain(it)
			}
		})
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if err := j.agents.Prepare(ctx, j.git.CommonDir()); err != nil {
		return fmt.Errorf("%w: %w", ErrJobFailed, err)
	}
	j.events.Emit(event.PhaseStarted{Phase: jobstore.PhaseMap, Items: len(pending)})
	if head, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch); err == nil {
		j.trees.Warm(ctx, min(j.maxParallel, len(pending)), head)
	}
	j.prog.Begin(len(pending))
	j.mapSpan = j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseMap})
	defer func() { j.mapSpan.End(SpanEnd{Outcome: mapOutcome(err)}) }()
	deps := j.itemDeps()
	var g errgroup.Group
	g.SetLimit(min(j.maxParallel, len(pending)))
	for _, it := range pending {
		if j.halted() || j.stopping.Load() {
			break
		}
		g.Go(func() error {
			if j.halted() || j.stopping.Load() {
				return nil
			}
			ir, ok := j.admit(deps, it)
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
