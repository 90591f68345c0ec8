package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/guard"
	"github.com/prodigy-action/prodigy-action/spend"
)

// end records the job's final status, cleans up worktrees and returns
// the result.
func (j *job) end(cause error) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if serr := j.stateError(); serr != nil {
		// A checkpoint write failed: what is on disk is behind this run.
		cause = errors.Join(cause, fmt.Errorf("%w: %w; `resume %s` continues from the state on disk", ErrJobFailed, serr, j.id))
	}
	status := StatusCompleted
	switch {
	case cause == nil:
	case errors.Is(cause, ErrInterrupted):
		status = StatusInterrupted
	case errors.Is(cause, ErrBudgetExhausted):
		status = StatusBudgetExhausted
	case errors.Is(cause, ErrFailureStorm):
		status = StatusStoppedByBreaker
	default:
		status = StatusFailed
	}
	purge := j.trees.Detach(ctx, j.deferTeardown)
	j.steps.Close()
	j.cool.Finish()
	j.deadMu.Lock()
	dead := uniqueStrings(j.deadBranches)
	j.deadBranches = nil
	j.deadMu.Unlock()
	if len(dead) > 0 {
		if err := j.git.DeleteBranches(ctx, dead); err != nil {
			j.warn(fmt.Sprintf("could not delete %d agent branch(es): %v", len(dead), err))
		}
	}
	tip, ierr := j.checkIntegrity(ctx)
	if ierr != nil {
		if cause == nil || !errors.Is(cause, guard.ErrIntegrity) {
			cause = errors.Join(cause, ierr)
		}
		status = StatusFailed
	} else if tip == "" {
		tip, _ = j.git.ResolveRef(ctx, "refs/heads/"+j.branch) // nothing recorded to verify (an older job)
	}
	if status == StatusCompleted {
		if err := j.git.WorktreeRemove(ctx, j.parentDir); err != nil {
			j.orphan(j.parentDir, "", "", "", err)
		}
		_ = j.git.WorktreePrune(ctx)
	} else if j.mergeMode == MergeTree {
		// Keep the parent worktree for resume, consistent with its branch.
		if err := j.git.SyncWorktree(ctx, j.parentDir); err != nil {
			j.warn(fmt.Sprintf("could not update the parent worktree: %v", err))
		}
	}
	if unrec := j.unrecorded(); len(unrec) > 0 && status != StatusInterrupted {
		err := fmt.Errorf("%w: %d failed item(s) have no DLQ record yet (%s); `resume %s` writes them",
			ErrJobFailed, len(unrec), strings.Join(brief.FirstN(unrec, 10), ", "), j.id)
		if cause != nil {
			err = fmt.Errorf("%w; %w", cause, err)
		}
		cause, status = err, StatusFailed
	}
	elapsed := j.now().Sub(j.started).Milliseconds()
	cost := j.state.JobCostUSD()
	werr := j.state.UpdateHead(func(h *jobstore.CheckpointHead) {
		h.Status = status
		h.CostUSD = cost
		h.ElapsedMS += elapsed
		h.Error = ""
		if cause != nil {
			h.Error = cause.Error()
		}
	})
	j.prog.Stop()
	if err := j.store.Close(); err != nil {
		j.warn(fmt.Sprintf("DLQ: could not write its index: %v", err))
	}
	res, rerr := stateResult(j.state, j.paths, j.keepRows)
	if rerr != nil {
		// The items could not be read back: the counts still are.
		j.warn(rerr.Error())
	}
	if err := j.state.Close(); err != nil {
		j.warn(fmt.Sprintf("could not close the item data file: %v", err))
	}
	res.OrphanedWorktrees = j.orphans.List()
	res.FleetCooldowns = j.cool.Count()
	res.MaxCostUSD = j.budget.Max()
	if n, err := j.store.Count(); err == nil {
		res.DLQCount = n
	}
	res.TraceID = j.traceID
	res.Teardown = purge
	res.Storm = j.breaker.Tripped()
	if res.Storm == nil {
		res.Storm = j.shardStorm
	}
	res.ExecutionCostUSD = jobstore.RoundUSD(max(res.CostUSD-j.costAtOpen, 0))
	if ierr != nil {
		res.IntegrityError = ierr.Error()
	} else {
		res.ResultsTip = tip
	}
	if j.span != nil {
		j.endJobSpan(jobSpanEnd(res))
	}
	switch status {
	case StatusCompleted:
		j.events.Emit(event.JobCompleted{Successful: res.Successful, Failed: res.Failed, Skipped: res.Skipped, DurationMS: res.DurationMS})
	case StatusInterrupted:
		j.events.Emit(event.JobPaused{Pending: res.Pending})
	default:
		j.events.Emit(event.JobFailed{Error: res.Error, Pending: res.Pending})
	}
	j.logf("%s", summaryLine(res))
	j.logFailedItems(res)
	if dirExists(j.paths.LogsDir()) {
		j.logf("item output: `prodigy-action logs %s ITEM [--attempt N]` (kept in %s)", j.id, j.paths.LogsDir())
	}
	if werr != nil && cause == nil {
		cause = fmt.Errorf("%w: %w", ErrJobFailed, werr)
	}
	return res, cause
}

// rollback removes everything create wrote (an input error after setup:
// nothing half-written is left behind).
func (j *job) rollback() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j.endJobSpan(SpanEnd{Outcome: "rolled_back"})
	if j.events != nil {
		j.events.Close()
	}
	if j.trees != nil {
		j.trees.Close(ctx)
	}
	if j.steps != nil {
		j.steps.Close()
	}
	_ = j.git.WorktreeRemove(ctx, j.parentDir)
	_ = j.git.WorktreePrune(ctx)
	_ = j.git.DeleteBranch(ctx, j.branch)
	if j.state != nil {
		_ = j.state.Close()
	}
	if err := jobstore.RemoveJob(j.paths); err != nil {
		j.warn(fmt.Sprintf("could not remove all state of job %s: %v", j.id, err))
	}
}

func summaryLine(r *Result) string {
	line := fmt.Sprintf("job %s %s: %d total, %d succeeded, %d failed (DLQ %d), %d skipped, %d pending; results branch %s",
		r.JobID, r.Status, r.Total, r.Successful, r.Failed, r.DLQCount, r.Skipped, r.Pending, r.ResultsBranch)
	if r.CostUSD > 0 {
		line += fmt.Sprintf("; spent $%s (this run $%s): merged items $%s, lost to failures $%s", spend.FormatUSD(r.CostUSD),
			spend.FormatUSD(r.ExecutionCostUSD), spend.FormatUSD(r.MergedCostUSD), spend.FormatUSD(r.FailedCostUSD))
		if r.CostPerMergedUSD > 0 {
			line += fmt.Sprintf(", $%s per merged item", spend.FormatUSD(r.CostPerMergedUSD))
		}
	}
	return line
}

// uniqueStrings returns s sorted without duplicates.
func uniqueStrings(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// unrecorded lists the failed items whose DLQ record is not stored.
func (j *job) unrecorded() []string {
	var ids []string
	err := j.state.Scan(func(_ int, it *jobstore.CheckpointItem) bool {
		if it.State == ItemDLQ && it.PendingRecord != nil {
			ids = append(ids, strconv.Quote(it.ItemID))
		}
		return true
	})
	if err != nil {
		j.warn(err.Error())
	}
	return ids
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
