package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/memlimit"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/procrecord"
)

// execute runs the remaining phases: setup (if not done), item loading,
// map over the pending items (plus extra, for redrives), reduce.
func (j *job) execute(ctx context.Context, extra []*jobstore.CheckpointItem) (*Result, error) {
	done := false
	return j.executePaged(ctx, func() ([]*jobstore.CheckpointItem, error) {
		if done {
			return nil, nil
		}
		done = true
		return extra, nil
	})
}

// executePaged is execute with the extra items in pages: next returns
// the next page (nil at the end). Each page is added to the checkpoint
// through the journal (its data to items.jsonl) and mapped before the
// next is asked for, so the items' data is never all in memory. Pages not
// yet asked for when the job is interrupted or stops are not in it.
func (j *job) executePaged(ctx context.Context, next func() ([]*jobstore.CheckpointItem, error)) (*Result, error) {
	runCtx, stopGrace := j.graceContext(ctx)
	defer stopGrace()
	procRec, err := procrecord.Open(j.paths)
	if err != nil {
		j.warn(err.Error() + " (a resume after a crash may not find this run's processes by their group)")
	}
	defer procRec.Close()
	runCtx = procrecord.With(runCtx, procRec)
	j.prog.Start()
	defer j.prog.Stop()

	var setupDone bool
	j.state.ReadHead(func(h *jobstore.CheckpointHead) { setupDone = h.SetupCompleted })
	if !j.keepRows {
		// From here on only the items running are held in memory.
		j.state.EvictRows()
	}
	if !setupDone {
		if len(j.wf.Setup) > 0 {
			j.announce(ctx, -1)
		}
		if err := j.setup(runCtx); err != nil {
			return j.end(err)
		}
		// The engine made this tip (setup): what agents change from here
		// on is checked (package runner/guard). It is recorded with the items.
		tip, err := j.resultsTip(ctx)
		if err != nil {
			return j.end(err)
		}
		if err := j.loadItems(ctx, tip); err != nil {
			j.rollback()
			return nil, err
		}
		if j.total() == 0 && !j.noItems {
			if err := j.warnNoItems(); err != nil {
				j.rollback()
				return nil, err
			}
		}
	}
	if setupDone && (j.rebase || j.guard.NeedsVerifiedTip()) {
		// A completed run ended at this tip, or no agent has run on it
		// yet: what agents change from here on is checked.
		if err := j.markVerified(ctx); err != nil {
			return j.end(err)
		}
	}
	j.guard.AuditBaseline(ctx)
	held := 0 // only the running items are in memory (EvictRows)
	if j.keepRows {
		held = j.total()
	}
	defer memlimit.Bound(held, j.logf)()
	var byID *itemIndex
	for pages := 0; ; pages++ {
		page, err := next()
		if err != nil {
			return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
		}
		if len(page) == 0 && pages > 0 {
			break
		}
		var cands []int // nil: every item (the first page)
		if len(page) > 0 {
			if byID == nil {
				if byID, err = newItemIndex(j.state, filepath.Dir(j.paths.Checkpoint())); err != nil {
					return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
				}
				defer byID.close()
			}
			ids := make([]string, len(page))
			for k, e := range page {
				ids[k] = e.ItemID
			}
			at, err := byID.lookup(ids)
			if err != nil {
				return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
			}
			err = j.state.UpdateItemsAt(at, func(items jobstore.ItemsAt, touch func(*jobstore.CheckpointItem)) {
				added := mergeItems(items, page, byID, touch)
				if pages > 0 {
					cands = added
				}
			})
			if err != nil {
				return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
			}
		}
		if err := j.mapPhase(runCtx, cands, pages > 0); err != nil {
			return j.end(err)
		}
		if len(page) == 0 {
			break
		}
		if ctx.Err() != nil {
			return j.end(fmt.Errorf("%w: the DLQ records not yet selected stay in the DLQ; continue with `dlq retry %s`", ErrInterrupted, j.id))
		}
	}
	if !j.noItems && !j.skipReduce {
		if err := j.reduce(runCtx); err != nil {
			return j.end(err)
		}
	}
	return j.end(nil)
}

// graceContext returns the context agents run under: when ctx ends
// (Ctrl-C, SIGTERM) running agents get a bounded grace period to finish.
func (j *job) graceContext(ctx context.Context) (context.Context, func()) {
	j.halt = ctx
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		if j.interruptGrace < time.Millisecond { // the Action: stop at once
			j.logf("interrupt received: no new items start; running agents are stopped (SIGTERM, SIGKILL %s later)", j.steps.Grace)
		} else {
			j.logf("interrupt received: no new items start; running agents get %s to finish (interrupt again to abort)", j.interruptGrace)
		}
		t := time.NewTimer(j.interruptGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			cancel(errInterrupted)
		}
	}()
	return runCtx, func() { close(done); cancel(nil) }
}
