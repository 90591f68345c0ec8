package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/agentuser"
	"github.com/prodigy-action/prodigy-action/runner/procrecord"
)

// resumeOptions configures resumeJob.
type resumeOptions struct {
	Home  string
	JobID string
	// IncludeDLQ adds the job's reprocess-eligible DLQ items to the pending
	// items (de-duplicated by item id).
	IncludeDLQ bool
	// Run carries the remaining settings (Stderr, Hooks, Clock, …); the
	// workflow, repository, branch and parallelism come from the checkpoint.
	Run options
}

// resumeJob finishes an interrupted or failed job: items not yet done run
// (none twice: items whose merge reached the results branch before a crash
// are recognised by their merge commits), stale worktrees from a crash are
// removed, then reduce runs.
func resumeJob(ctx context.Context, ro resumeOptions) (*Result, error) {
	o := ro.Run
	o.Home = ro.Home
	o.defaults()
	j, cp, unlock, err := reopen(ctx, &o, ro.JobID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if cp.Status == StatusCompleted && !ro.IncludeDLQ {
		j.trees.RemoveDiscarded(j.trees.Discarded())
		j.logf("job %s already completed; nothing to resume (use --include-dlq to redrive its DLQ items)", j.id)
		res, err := stateResult(j.state, j.paths, false)
		if err != nil {
			return nil, err
		}
		res.OrphanedWorktrees = orEmpty(nil)
		if n, err := countDLQ(j.paths); err == nil {
			res.DLQCount = n
		}
		return res, nil
	}
	// recover first: it removes the DLQ records of items already merged,
	// so selection never picks them again.
	if err := j.recover(ctx, cp); err != nil {
		return nil, err
	}
	if o.Onto != "" {
		if err := j.mergeOnto(ctx, o.Onto); err != nil {
			return nil, err
		}
	}
	// The eligible DLQ records are paged into the job like a redrive's.
	next := func() ([]*jobstore.CheckpointItem, error) { return nil, nil }
	var added bool
	if ro.IncludeDLQ {
		pages, err := j.selection(nil, false).Pager(nil, 0)
		if err != nil {
			return nil, err
		}
		defer pages.Stop()
		if pages.More {
			j.logf("resume: adding the eligible DLQ items in pages of %d", pages.Size)
		} else {
			j.logf("resume: adding %d eligible DLQ item(s)", len(pages.First))
		}
		next, added = pages.Next, len(pages.First) > 0
	}
	if err := j.open(ctx, cp, true); err != nil {
		return nil, err
	}
	defer j.events.Close()
	if added {
		j.persisted("reduce to run again", j.state.UpdateHead(restartReduce))
	}
	return j.executePaged(ctx, next)
}

// beforeLock, when set (tests), runs in reopen between reading the
// checkpoint and locking the job.
var beforeLock func()

// reopen opens a job's state (its items stay on disk until needed,
// jobstore.OpenState) and workflow and locks the job; the job's state is
// that state. The checkpoint returned is the state's: it has no Items
// (nil); they are read through j.state. The function returned unlocks the job
// and closes the state.
func reopen(ctx context.Context, o *options, jobID string) (_ *job, _ *jobstore.Checkpoint, _ func(), err error) {
	p, err := findJob(o.Home, "", jobID)
	if err != nil {
		return nil, nil, nil, err
	}
	stamp := jobstore.CheckpointStamp(p)
	state, cp, err := jobstore.OpenState(p, o.Clock.Now)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = state.Close()
		}
	}()
	wf, wfWarning, err := redriveWorkflow(cp, p, o.WorkflowFile)
	if err != nil {
		return nil, nil, nil, usage(err)
	}
	git, err := gitops.New(cp.RepoDir, agentuser.GitOptions(o.Git, o.AgentUser))
	if err != nil {
		return nil, nil, nil, usage(fmt.Errorf("job %s: %w", cp.JobID, err))
	}
	o.Workflow = wf
	o.JobID = cp.JobID
	o.Isolation, o.Merge = Isolation(cp.Isolation), MergeMode(cp.Merge)
	if o.ClaudeCommand == "" || o.ClaudeCommand == "claude" {
		if cp.ClaudeCommand != "" {
			o.ClaudeCommand = cp.ClaudeCommand
		}
	}
	// The first run's Claude overrides, each replaced by one given now.
	o.Claude = claudecode.DecodeOverrides(cp.ClaudeOverrides).Merge(o.Claude)
	if o.ClaudeArgs == nil {
		o.ClaudeArgs = cp.ClaudeArgs
	}
	if len(o.Sparse) == 0 {
		o.Sparse = cp.Sparse // the first run's --sparse, not the workflow's
	}
	maxPar := cp.MaxParallel
	if o.MaxParallel > 0 {
		maxPar = o.MaxParallel
	}
	j, err := newJob(o, wf, git, p, cp.ResultsBranch, maxPar)
	if err != nil {
		return nil, nil, nil, usage(err)
	}
	if beforeLock != nil {
		beforeLock()
	}
	unlock, err := j.lock()
	if err != nil {
		return nil, nil, nil, err
	}
	// The checkpoint was read before the lock (its settings are needed to
	// open the job): a runner that held the lock until just now may have
	// written since. Its items and status are read again if so; the
	// settings above never change after the first run.
	if jobstore.CheckpointStamp(p) != stamp {
		_ = state.Close()
		if state, cp, err = jobstore.OpenState(p, o.Clock.Now); err != nil {
			unlock()
			return nil, nil, nil, err
		}
	}
	j.state = state
	if wfWarning != "" {
		j.warn(wfWarning)
	}
	if err := procrecord.EndLeftovers(p, j.logf); err != nil {
		unlock()
		return nil, nil, nil, err
	}
	// The state's files are released with the lock (end closes it first
	// when the job ran).
	return j, cp, func() { _ = j.state.Close(); unlock() }, nil
}

// loadJobWorkflow reads the workflow from its original path (so fixes made
// since the run apply), falling back to the copy taken when the job started.
func loadJobWorkflow(cp *jobstore.Checkpoint, p Paths) (*config.Workflow, error) {
	if cp.WorkflowPath != "" {
		if _, err := os.Stat(cp.WorkflowPath); err == nil {
			return config.Load(cp.WorkflowPath)
		}
	}
	if _, err := os.Stat(p.WorkflowCopy()); err != nil {
		return nil, fmt.Errorf("job %s: workflow %s is gone and no copy was kept", cp.JobID, cp.WorkflowPath)
	}
	return config.Load(p.WorkflowCopy())
}

// recover makes the job's worktrees consistent after a crash: the parent
// worktree matches the results branch, stale agent worktrees and branches
// are removed, and items already merged are marked so.
func (j *job) recover(ctx context.Context, cp *jobstore.Checkpoint) error {
	j.removeStaleLocks()
	if err := j.recoverParent(ctx, cp); err != nil {
		return err
	}
	preserved := j.preservedWorktrees()
	entries, _ := os.ReadDir(j.paths.WorktreeRoot())
	for _, e := range entries {
		path := filepath.Join(j.paths.WorktreeRoot(), e.Name())
		if path == j.parentDir || preserved[path] || e.Name() == agentuser.HomesName {
			continue
		}
		if err := j.git.WorktreeRemove(ctx, path); err != nil {
			j.warn(fmt.Sprintf("could not remove stale worktree %s: %v", path, err))
		} else {
			j.logf("removed stale worktree %s", path)
		}
	}
	_ = j.git.WorktreePrune(ctx)
	if branches, err := j.git.Branches(ctx, "prodigy-agent/"+j.id+"/"); err == nil {
		var stale []string
		for _, b := range branches {
			if !preservedBranch(preserved, b) {
				stale = append(stale, b)
			}
		}
		if len(stale) > 0 {
			_ = j.git.DeleteBranches(ctx, stale)
		}
	}
	merged, err := j.mergedItems(ctx, cp)
	if err != nil {
		return err
	}
	store, err := openDLQ(j.paths, dlq.Options{Now: j.now, Warn: func(m string) { j.warn("DLQ: " + m) }})
	if err != nil {
		return fmt.Errorf("open the DLQ: %w", err)
	}
	// One pass over the items; rows that cannot need a change (most of a
	// large job's) are not decoded.
	maybe := func(row []byte) bool {
		return jobstore.RowHas(row, "state", string(ItemRunning)) || jobstore.RowHas(row, "spend_ceiling_usd") ||
			jobstore.RowHas(row, "pending_dlq_record") || (len(merged) > 0 && jobstore.RowHas(row, "state", string(ItemPending)))
	}
	err = j.state.Rewrite(maybe, func(it *jobstore.CheckpointItem) bool {
		changed := false
		if it.RecoverSpend() {
			changed = true
			j.logf("%s was running with a budget reservation when the job stopped: its reservation counts as spent ($%.4f in all)", it.ItemID, it.CostUSD)
		}
		if it.State == ItemRunning {
			changed = true
			pendingAgain(it)
		}
		if it.State == ItemPending && merged[it.ItemID] {
			changed = true
			foundMerged(it, j.foundMerges[it.ItemID])
			j.logf("%s was merged before the interruption; not running it again", it.ItemID)
		}
		return j.recordPending(store, it) || changed
	})
	if err != nil {
		return errors.Join(err, store.Close())
	}
	if cp.Status != StatusCompleted {
		cp.Error = ""
	}
	return j.reconcileDLQ(store, merged)
}

// removeStaleLocks removes the lock files the job's own git processes left
// when a crash killed them mid-write (index.lock and HEAD.lock of the
// job's worktrees, the lock of the results branch and of its agent
// branches): git refuses to work while they exist. Resume calls it holding
// the job lock after ending every process an earlier run left, so no git
// process of the job can hold them; only files older than now are removed
// (file times come from the system clock, so this reads time.Now, not the
// injected clock). The user's checkout and other refs are never touched.
func (j *job) removeStaleLocks() {
	worktrees := []string{j.parentDir}
	if entries, err := os.ReadDir(j.paths.WorktreeRoot()); err == nil {
		for _, e := range entries {
			if p := filepath.Join(j.paths.WorktreeRoot(), e.Name()); p != j.parentDir {
				worktrees = append(worktrees, p)
			}
		}
	}
	removed, err := j.git.RemoveStaleLocks(worktrees, []string{"refs/heads/" + j.branch},
		[]string{"refs/heads/prodigy-agent/" + j.id + "/"}, time.Now())
	for _, p := range removed {
		j.logf("removed stale git lock %s (left by a git process killed with the earlier run)", p)
	}
	if err != nil {
		j.warn(err.Error())
	}
}

// recordPending brings an item's DLQ record in line with the checkpoint
// after a crash (under the state's lock): the record of a
// failed-unrecorded item is written (a write that fails again leaves the
// item unrecorded, which fails the job with a message); a pending record
// of an item no longer failed is dropped. It reports whether it changed
// the item.
func (j *job) recordPending(store *dlq.Store, it *jobstore.CheckpointItem) bool {
	if it.PendingRecord == nil {
		return false
	}
	if it.State != ItemDLQ {
		it.PendingRecord = nil
		return true
	}
	rec, err := dlq.Decode(it.PendingRecord)
	if err != nil {
		j.warn(fmt.Sprintf("the pending DLQ record of %s is unreadable: %v", it.ItemID, err))
		return false
	}
	if _, _, err := store.AddOnce(rec); err != nil {
		j.warn(fmt.Sprintf("could not write the missing DLQ record of %s: %v", it.ItemID, err))
		return false
	}
	dropRecorded(it)
	j.logf("wrote the missing DLQ record of %s", it.ItemID)
	return true
}

// reconcileDLQ removes the records of items whose merge is on the results
// branch (a crash between a redrive's merge and the record's removal), so
// they are never selected and merged again, and closes store.
func (j *job) reconcileDLQ(store *dlq.Store, merged map[string]bool) error {
	if idx, err := store.Index(); err == nil {
		for _, id := range idx.ItemIDs {
			if !merged[id] {
				continue
			}
			if err := store.Remove(id); err != nil {
				return errors.Join(fmt.Errorf("remove the DLQ record of merged item %s: %w", id, err), store.Close())
			}
			j.logf("%s is merged on the results branch; removed its DLQ record", id)
		}
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("write the DLQ index: %w", err)
	}
	return nil
}

// recoverParent makes the parent worktree exist and match the results
// branch. A job whose setup never completed (a crash while it was created
// or during setup) restarts setup cleanly: its parent worktree, whatever
// state a crash left it in, is recreated on the results branch reset to
// the base commit (nothing is merged before setup completes).
func (j *job) recoverParent(ctx context.Context, cp *jobstore.Checkpoint) error {
	exists, err := j.git.BranchExists(ctx, j.branch)
	if err != nil {
		return err
	}
	if !cp.SetupCompleted {
		if err := j.git.WorktreeRemove(ctx, j.parentDir); err != nil {
			return fmt.Errorf("remove the parent worktree to restart setup: %w", err)
		}
		_ = j.git.WorktreePrune(ctx)
		if exists {
			if err := j.git.ResetBranch(ctx, j.branch, cp.BaseCommit); err != nil {
				return fmt.Errorf("reset the results branch for setup: %w", err)
			}
			if err := j.git.WorktreeAddExisting(ctx, j.parentDir, j.branch); err != nil {
				return fmt.Errorf("recreate the parent worktree: %w", err)
			}
			return nil
		}
		if err := j.git.WorktreeAdd(ctx, j.parentDir, j.branch, cp.BaseCommit); err != nil {
			return fmt.Errorf("create the parent worktree: %w", err)
		}
		return nil
	}
	if !exists {
		return fmt.Errorf("job %s: results branch %s is gone; it holds the job's merged work, so the job cannot continue", j.id, j.branch)
	}
	if _, err := os.Stat(j.parentDir); errors.Is(err, fs.ErrNotExist) {
		_ = j.git.WorktreePrune(ctx)
		if err := j.git.WorktreeAddExisting(ctx, j.parentDir, j.branch); err != nil {
			return fmt.Errorf("recreate the parent worktree: %w", err)
		}
	} else if err := j.git.SyncWorktree(ctx, j.parentDir); err != nil {
		// A git killed while it updated the worktree (reduce's update, or
		// gather's in the background) leaves files its index does not
		// list, which the next update refuses to overwrite. The parent
		// holds nothing the results branch does not: it is made again.
		j.logf("the parent worktree could not be brought up to %s (%v); making it again from the branch", j.branch, err)
		if rerr := j.git.WorktreeRemove(ctx, j.parentDir); rerr != nil {
			return fmt.Errorf("update the parent worktree: %w", errors.Join(err, rerr))
		}
		_ = j.git.WorktreePrune(ctx)
		if aerr := j.git.WorktreeAddExisting(ctx, j.parentDir, j.branch); aerr != nil {
			return fmt.Errorf("recreate the parent worktree: %w", aerr)
		}
	}
	return nil
}

// mergedItems reads the Prodigy-Item trailers of the merge commits on the
// results branch's first-parent chain since the job's base commit (every
// merge into the results branch is on that chain).
func (j *job) mergedItems(ctx context.Context, cp *jobstore.Checkpoint) (map[string]bool, error) {
	ref := "refs/heads/" + j.branch
	stop, limit := cp.BaseCommit, 0
	if ok, err := j.git.CommitExists(ctx, cp.BaseCommit); err != nil || !ok {
		// A redrive in a fresh (shallow) clone may not have the original
		// base: read the branch's recent history instead.
		stop, limit = "", 10000
		if ok, err := j.git.BranchExists(ctx, ref); err != nil || !ok {
			return map[string]bool{}, nil
		}
	}
	log, err := j.git.FirstParentLog(ctx, ref, stop, limit)
	if err != nil {
		return nil, fmt.Errorf("read merged items: %w", err)
	}
	merged := map[string]bool{}
	for _, c := range log {
		if len(c.Parents) < 2 {
			continue
		}
		tr := c.Trailers()
		if jobs := gitops.TrailerValues(tr, "Prodigy-Job"); len(jobs) == 0 || jobs[0] != j.id {
			continue
		}
		for _, item := range gitops.TrailerValues(tr, "Prodigy-Item") {
			if id, err := strconv.Unquote(item); err == nil {
				merged[id] = true
				if j.foundMerges == nil {
					j.foundMerges = map[string]string{}
				}
				j.foundMerges[id] = c.ID
			}
		}
	}
	return merged, nil
}

// preservedWorktrees are failed worktrees kept for debugging
// (preserve_failed_worktrees), read from the job's DLQ records.
func (j *job) preservedWorktrees() map[string]bool {
	out := map[string]bool{}
	if !j.wf.PreserveFailedWorktrees {
		return out
	}
	store, err := openDLQ(j.paths, dlq.Options{})
	if err != nil {
		return out
	}
	defer store.Close() // read only: nothing to flush
	_ = store.Each(func(r dlq.DeadLetteredItem) error {
		if a := r.WorktreeArtifacts; a != nil && a.WorktreePath != "" {
			out[a.WorktreePath] = true
			out["branch:"+a.BranchName] = true
		}
		return nil
	})
	return out
}

func preservedBranch(p map[string]bool, b string) bool { return p["branch:"+b] }

func orEmpty(o []OrphanedWorktree) []OrphanedWorktree {
	if o == nil {
		return []OrphanedWorktree{}
	}
	return o
}
