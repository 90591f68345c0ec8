package runner

import (
	"context"
	"fmt"
	"os"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/dlqselect"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/validate"
)

// retryDLQ (`dlq retry`) re-runs the selected DLQ records' item_data through
// the job's real workflow in its results branch: agent template, merge,
// cleanup, then reduce. Successes leave the DLQ; failures stay with their
// history extended. An interrupted redrive loses no record (records are
// only removed after success) and a second call continues.
func retryDLQ(ctx context.Context, ro retryOptions) (*Result, error) {
	if ro.Signature != "" {
		return retryCluster(ctx, ro)
	}
	if ro.Sample != 0 {
		return nil, usage(fmt.Errorf("--sample needs --signature"))
	}
	o := ro.Run
	o.Home = ro.Home
	if ro.Parallel > 0 {
		o.MaxParallel = ro.Parallel
	} else if o.MaxParallel <= 0 {
		o.MaxParallel = 10
	}
	o.defaults()
	var filter *items.Filter
	if ro.Filter != "" {
		f, err := items.CompileFilter(ro.Filter)
		if err != nil {
			return nil, usage(fmt.Errorf("--filter: %w", err))
		}
		filter = f
	}
	o.noTools = ro.DryRun
	j, cp, unlock, err := reopen(ctx, &o, ro.JobID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	attempts := ro.MaxRetries
	if attempts <= 0 {
		attempts = 3
	}
	if j.itemPolicy.Backoff == nil || j.wf.ErrorPolicy.Retry == nil {
		pol, err := validate.RetryPolicy(ptr(config.DefaultRetryConfig()))
		if err != nil {
			return nil, err
		}
		j.itemPolicy = pol
	}
	j.itemPolicy.Attempts = attempts
	if ro.DryRun {
		// Read-only: items already merged on the results branch (a crash
		// after a redrive's merge) are left out, as a real redrive would.
		merged, err := j.mergedItems(ctx, cp)
		if err != nil {
			return nil, err
		}
		// Stream the selection: only the selected items' outcomes (no
		// item_data) are kept, and none at all with ro.Selected. The
		// result is the plan alone (issue 27): total and pending are
		// the selected items, nothing has succeeded, failed or been
		// skipped yet; the job's own totals are `status`'s.
		res := countedResult(cp, j.state.Counts())
		res.Items = []ItemOutcome{}
		res.Total, res.Successful, res.Failed, res.Skipped, res.Pending = 0, 0, 0, 0, 0
		// dlq_count is the number of records streamed, not the index's:
		// loading the index of a large DLQ would double the dry run's peak.
		res.DLQCount, err = j.selection(filter, ro.Force).Each(merged, func(it *jobstore.CheckpointItem) error {
			if ro.Items != nil && !ro.Items[it.ItemID] {
				return nil
			}
			res.Pending++
			res.Total++
			if ro.Selected != nil {
				return ro.Selected(it.ItemOutcome)
			}
			res.Items = append(res.Items, it.ItemOutcome)
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.OrphanedWorktrees = orEmpty(nil)
		return res, nil
	}
	// recover (re)creates the parent worktree; a redrive that ends before
	// it opens the job (a usage error, nothing selected) removes it again
	// when the job had none, so exit 2 or "nothing to retry" leaves the
	// repository's worktrees as they were.
	_, statErr := os.Stat(j.parentDir)
	hadParent, opened := statErr == nil, false
	defer func() {
		if !hadParent && !opened {
			if err := j.git.WorktreeRemove(context.WithoutCancel(ctx), j.parentDir); err != nil {
				j.warn(fmt.Sprintf("could not remove the parent worktree %s: %v", j.parentDir, err))
			}
		}
	}()
	// recover before selecting: it removes the records of items whose
	// merge reached the results branch, so none is merged twice.
	if err := j.recover(ctx, cp); err != nil {
		return nil, err
	}
	if o.Onto != "" {
		if err := j.mergeOnto(ctx, o.Onto); err != nil {
			return nil, err
		}
	}
	// The selection is streamed and paged into the job: a page of records
	// is selected (its item data goes to the job's items.jsonl), mapped,
	// then the next page is read. One page is read ahead, to know whether
	// there is anything to do and whether there is more than one page.
	pages, err := j.selection(filter, ro.Force).Pager(ro.Items, ro.BatchSize)
	if err != nil {
		return nil, err
	}
	defer pages.Stop()
	if n := j.state.Counts(); len(pages.First) == 0 && cp.Status != StatusCompleted && !cp.ReduceCompleted && n.Pending+n.Running == 0 && !ro.SkipReduce {
		// Nothing to redrive, but an earlier run left the job with every
		// item done and reduce unfinished (a redrive killed in its reduce):
		// finish the reduce, as resume would.
		j.logf("no DLQ records of job %s to retry; finishing the job an earlier run left %s", j.id, cp.Status)
		if err := j.open(ctx, cp, true); err != nil {
			return nil, err
		}
		defer j.events.Close()
		return j.execute(ctx, nil)
	}
	if len(pages.First) == 0 {
		// Nothing to redrive: reduce does not run again and nothing changes.
		j.warn(fmt.Sprintf("!!! no DLQ records of job %s match (eligible only unless --force): nothing to retry, reduce not run", j.id))
		res, err := stateResult(j.state, j.paths, false)
		if err != nil {
			return nil, err
		}
		res.Items, res.outcomes = []ItemOutcome{}, nil
		res.OrphanedWorktrees = orEmpty(nil)
		if n, err := countDLQ(j.paths); err == nil {
			res.DLQCount = n
		}
		return res, nil
	}
	opened = true
	if err := j.open(ctx, cp, true); err != nil {
		return nil, err
	}
	defer j.events.Close()
	j.persisted("redrive start", j.state.UpdateHead(func(h *jobstore.CheckpointHead) {
		restartReduce(h)
		h.MaxParallel = j.maxParallel
	}))
	if !pages.More {
		j.logf("redriving %d DLQ item(s) of job %s with %d attempt(s) each, %d in parallel", len(pages.First), j.id, attempts, j.maxParallel)
	} else {
		j.logf("redriving the DLQ items of job %s in pages of %d, with %d attempt(s) each, %d in parallel", j.id, pages.Size, attempts, j.maxParallel)
	}
	j.skipReduce = ro.SkipReduce
	return j.executePaged(ctx, pages.Next)
}

// selection is the job's DLQ records a redrive runs again
// (package runner/dlqselect).
func (j *job) selection(filter *items.Filter, force bool) dlqselect.Selection {
	return dlqselect.Selection{Paths: j.paths, Filter: filter, Force: force, IDField: j.wf.Map.IDField,
		Warn: j.warn, Usage: usage}
}

// DefaultRedriveBatch is how many DLQ records a redrive pages into its
// job at a time (RedriveSpec.BatchSize).
const DefaultRedriveBatch = dlqselect.DefaultBatch

func ptr[T any](v T) *T { return &v }

// clearFromDLQ removes a succeeded item's record, if it has one.
func (j *job) clearFromDLQ(itemID string) {
	if !j.inDLQ[itemID] {
		return
	}
	if err := j.store.Remove(itemID); err != nil {
		j.warn(fmt.Sprintf("item %s succeeded but its DLQ record could not be removed: %v", itemID, err))
		return
	}
	j.events.Emit(event.DLQItemRemoved{ItemID: itemID})
}

// loadDLQIDs remembers which items have a DLQ record when the job starts.
func (j *job) loadDLQIDs(ctx context.Context) {
	j.inDLQ = map[string]bool{}
	idx, err := j.store.Index()
	if err != nil {
		return
	}
	for _, id := range idx.ItemIDs {
		j.inDLQ[id] = true
	}
}
