package runner

import (
	"context"
	"fmt"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"

	"golang.org/x/sync/errgroup"
)

// mapPhase runs every pending item (of cands, positions in the
// checkpoint, when only is set, else of the checkpoint), at most
// maxParallel at once, each through its itemRunner under ctx (the run
// context). It stops starting items when the job halts (interrupt) or a
// failure policy says stop; items not started stay pending in the
// checkpoint. The checkpoint is rewritten first only when the phase
// changes or items left running by a crash become pending. Items are
// held in memory only while they run (jobstore.State.Hold).
func (j *job) mapPhase(ctx context.Context, cands []int, only bool) (err error) {
	var pending, stale []int
	var phase bool
	j.state.ReadHead(func(h *jobstore.CheckpointHead) { phase = h.Phase != jobstore.PhaseMap })
	var want map[int]bool
	if only {
		want = make(map[int]bool, len(cands))
		for _, pos := range cands {
			want[pos] = true
		}
	}
	serr := j.state.Scan(func(pos int, it *jobstore.CheckpointItem) bool {
		if only && !want[pos] {
			return true
		}
		if it.State == ItemPending || it.State == ItemRunning {
			pending = append(pending, pos)
			if it.State == ItemRunning {
				stale = append(stale, pos)
			}
		}
		return true
	})
	if serr != nil {
		return fmt.Errorf("%w: %w", ErrJobFailed, serr)
	}
	if phase || len(stale) > 0 {
		err = j.state.Update(func(cp *jobstore.Checkpoint) {
			cp.Phase = jobstore.PhaseMap
			for _, pos := range stale {
				pendingAgain(cp.Items[pos])
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
			row, err := j.state.Hold(it)
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
