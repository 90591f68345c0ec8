package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// gatherOptions configures gatherJob.
type gatherOptions struct {
	// Run carries the engine settings (Home, RepoDir, Stderr, Clock, …);
	// the workflow, job id and results branch come from the plan.
	Run options
	// PlanDir is the plan directory.
	PlanDir string
	// Outputs are shard output directories, in any order.
	Outputs []string
	// Final closes every shard this gather can close: a shard whose output
	// is absent or unreadable is declared missing and one whose output
	// still has pending items is gathered as it is. Their items stay
	// pending for good (continue them with `plan --from-pending`), and
	// later shards are merged. Without it gather waits for them.
	Final bool
	// Reject maps item ids to the reason a reviewer rejected them (a review
	// gate before anything is published): their merges are left out of the
	// results branch and they go to the DLQ as ValidationFailed with the
	// reason, redrivable like any other failure. Only items of shards not
	// gathered yet can be rejected; an id not in the plan is a usage error.
	Reject map[string]string
}

// gatherJob completes a sharded job in the repository at Run.RepoDir (the
// planning repository or any clone holding the base; the base is fetched
// from base.bundle when missing).
//
// Every output is checked before anything is merged: it must carry the
// plan's id and job id, be a shard of the plan given once, list exactly
// that shard's items, and its bundle's item merges must be the merged
// items it lists; every file read has a size limit. An output that fails
// these checks is refused (a *UsageError naming it); one that cannot be
// read (no result.json, a corrupt bundle) counts as missing.
//
// Shards are then merged strictly in plan order, so the results branch
// tree and the DLQ are a function of the outputs, whatever order they
// arrive or are given in: a shard is merged only when every earlier shard
// is closed, and a shard is closed once gathered (its later outputs are
// ignored). A shard whose output is missing, or still has pending items,
// holds every later shard back (the error names them) until its output
// arrives or a Final gather declares it. For each shard the shard branch
// is merged into the results branch; when that merge conflicts the
// shard's item merges are replayed one at a time (items are known by
// their Prodigy-Item trailers), so only the items that conflict fail, as
// MergeConflict DLQ records. Every shard's DLQ records are imported into
// the job's DLQ (one record per item id; a redriven item's earlier history
// comes first). When every item has an outcome, reduce runs once with
// ${map.*} over all shards. Gathering the same outputs twice changes
// nothing; a gather killed at any moment is completed by running it again.
func gatherJob(ctx context.Context, g gatherOptions) (*Result, error) {
	o := g.Run
	o.defaults()
	o.Merge = MergeTree
	g.PlanDir = absPath(g.PlanDir)
	g.Outputs = slices.Clone(g.Outputs)
	for i, d := range g.Outputs {
		g.Outputs[i] = absPath(d) // git runs elsewhere: never relative
	}
	plan, err := LoadPlan(g.PlanDir)
	if err != nil {
		return nil, err
	}
	if o.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	git, err := gitops.New(o.RepoDir, agentGitOptions(&o))
	if err != nil {
		return nil, usage(err)
	}
	if err := plan.ensureBase(ctx, git, g.PlanDir); err != nil {
		return nil, err
	}
	wf, err := plan.workflow(g.PlanDir)
	if err != nil {
		return nil, err
	}
	o.JobID = plan.JobID
	paths := Paths{Home: o.Home, Repo: RepoKey(o.Home, git.TopLevel()), JobID: plan.JobID}
	j, err := newJob(&o, wf, git, paths, plan.ResultsBranch, plan.MaxParallel)
	if err != nil {
		return nil, usage(err)
	}
	j.traceParent = plan.TraceParent
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	gs, hasGS, err := jobstore.LoadGatherState(paths)
	if err != nil {
		return nil, err
	}
	if hasGS && gs.PlanID != plan.PlanID && !jobstore.HasCheckpoint(paths) {
		// An earlier gather died before its checkpoint: it gathered
		// nothing, so this plan's gather replaces it.
		hasGS, gs = false, &jobstore.GatherState{Closed: map[int]string{}}
	}
	if hasGS && gs.PlanID != plan.PlanID {
		return nil, usage(fmt.Errorf("%w: job %s in this repository is gathered from plan %s, not from plan %s in %s (another plan of the same job id): gather that plan's outputs, or discard the job first (`jobs discard %s`)",
			errForeignOutput, j.id, gs.PlanID, plan.PlanID, g.PlanDir, j.id))
	}
	if err := addRejections(plan, gs, !hasGS, g.Reject); err != nil {
		return nil, err
	}
	outs, unreadable, err := readShardOutputs(plan, g.Outputs)
	if err != nil {
		return nil, err
	}
	fetchStart := j.now()
	unreadable = append(unreadable, fetchShardOutputs(ctx, git, plan, outs, gs)...)
	j.logf("shard outputs fetched and verified in %s (%d at a time)", j.now().Sub(fetchStart).Round(time.Millisecond), fetchParallelism())
	if err := refusals(outs); err != nil {
		return nil, err
	}
	for _, u := range unreadable {
		j.warn(u)
	}
	if jobstore.HasCheckpoint(paths) {
		cp, err := jobstore.LoadCheckpoint(paths)
		if err != nil {
			return nil, err
		}
		if cp.Status == StatusCompleted {
			j.logf("job %s is already gathered; nothing to do", j.id)
			res := resultOf(cp)
			res.OrphanedWorktrees = orEmpty(nil)
			if n, err := countDLQ(paths); err == nil {
				res.DLQCount = n
			}
			return res, nil
		}
		if err := endJobLeftovers(paths, j.logf); err != nil {
			return nil, err
		}
		if err := j.resetUnstartedParent(ctx, cp); err != nil {
			return nil, err
		}
		if err := j.recover(ctx, cp); err != nil {
			return nil, err
		}
		if !hasGS {
			gs.PlanID = plan.PlanID
		}
		if err := j.open(ctx, cp, true); err != nil {
			return nil, err
		}
	} else {
		gs.PlanID = plan.PlanID
		if err := j.createGather(ctx, plan, gs); err != nil {
			return nil, err
		}
	}
	defer j.events.close()
	return j.gather(ctx, plan, outs, gs, g.Final)
}

// createGather creates the gatherer's job in an order a crash cannot
// break: the gather state (the plan id), the workflow copy, the
// checkpoint (every plan item pending), then the results branch at the
// base (or as the planning repository left it) and its parent worktree
// (resetUnstartedParent redoes them when a crash came first), then the
// rest of the state.
func (j *job) createGather(ctx context.Context, plan *Plan, gs *jobstore.GatherState) error {
	ok, err := j.git.BranchExists(ctx, j.branch)
	if err != nil {
		return usage(err)
	}
	if ok {
		tip, rerr := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
		if rerr != nil {
			return rerr
		}
		if tip != plan.BaseCommit {
			return usage(fmt.Errorf("results branch %s exists at %s, not at the plan's base %s, and this repository has no gather state for job %s", j.branch, short(tip), short(plan.BaseCommit), j.id))
		}
	}
	if err := jobstore.SaveGatherState(j.paths, gs); err != nil {
		return err
	}
	ids := make([]string, 0, len(plan.Items))
	for _, it := range plan.Items {
		ids = append(ids, it.ID)
	}
	cp := planCheckpoint(j, plan, ids)
	if err := jobstore.SaveWorkflowCopy(j.paths, []byte(plan.Workflow)); err != nil {
		return err
	}
	if err := j.recordIntent(ctx, cp, FaultGatherIntent); err != nil {
		return err
	}
	if err := j.resetUnstartedParent(ctx, cp); err != nil {
		return err
	}
	return j.open(ctx, cp, false)
}

// recordIntent writes cp, the job's first checkpoint: from here on the job
// is listed, and running the same command again continues it.
func (j *job) recordIntent(ctx context.Context, cp *jobstore.Checkpoint, point string) error {
	j.state = jobstore.NewState(j.paths, cp, j.now)
	if err := j.state.Update(func(*jobstore.Checkpoint) {}); err != nil {
		return fmt.Errorf("record the job: %w", err)
	}
	fault(ctx, point, j.id)
	return nil
}

// resetUnstartedParent (re)creates the results branch at the base and its
// parent worktree when nothing has reached the branch yet (it is missing
// or at the base, and no item has an outcome): whatever a crash left of an
// earlier attempt (a branch without worktree, a half-made worktree
// directory) is replaced. A job that has started is left to recover.
func (j *job) resetUnstartedParent(ctx context.Context, cp *jobstore.Checkpoint) error {
	for _, it := range cp.Items {
		if it.State != ItemPending && it.State != ItemRunning {
			return nil
		}
	}
	exists, err := j.git.BranchExists(ctx, j.branch)
	if err != nil {
		return err
	}
	if exists {
		tip, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
		if err != nil {
			return err
		}
		if tip != cp.BaseCommit {
			return nil
		}
	}
	if err := j.git.WorktreeRemove(ctx, j.parentDir); err != nil {
		return fmt.Errorf("remove the parent worktree an interrupted run left: %w", err)
	}
	_ = j.git.WorktreePrune(ctx)
	if exists {
		err = j.git.WorktreeAddExisting(ctx, j.parentDir, j.branch)
	} else {
		err = j.git.WorktreeAdd(ctx, j.parentDir, j.branch, cp.BaseCommit)
	}
	if err != nil {
		return fmt.Errorf("create the parent worktree: %w", err)
	}
	fault(ctx, FaultParentCreated, j.id)
	return nil
}

// shardOutput is one shard's output directory, its result.json and, once
// fetched and verified, its DLQ records.
type shardOutput struct {
	dir        string
	res        *ShardResult
	records    map[string]dlq.DeadLetteredItem
	refused    error // errForeignOutput: the output is not this plan's
	unreadable error // the bundle or DLQ cannot be read: the shard counts as missing
}

// readShardOutputs maps shard index → output. An output without a
// readable result.json cannot be told apart, so it is only reported
// (unreadable; its shard then counts as missing); an output of another
// plan or job, with items other than its shard's, or a shard given twice,
// is refused (a usage error naming the output).
func readShardOutputs(plan *Plan, dirs []string) (map[int]*shardOutput, []string, error) {
	outs := map[int]*shardOutput{}
	var unreadable []string
	largest := 0 // result.json's limit: the largest shard's (the shard is not known before it is read)
	for _, sh := range plan.Shards {
		largest = max(largest, len(sh.Items))
	}
	for _, d := range dirs {
		data, err := readLimited(outputFile(d, ShardResultFile), shardResultLimit(largest))
		if errors.Is(err, errOutputTooLarge) {
			return nil, nil, usage(fmt.Errorf("%w: %w", errForeignOutput, err))
		}
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s is unreadable: %v", d, err))
			continue
		}
		var sr ShardResult
		if err := json.Unmarshal(data, &sr); err != nil || sr.Result == nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s: unreadable %s: %v", d, ShardResultFile, err))
			continue
		}
		if sr.JobID != plan.JobID {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s belongs to job %s, not %s", errForeignOutput, d, sr.JobID, plan.JobID))
		}
		if sr.PlanID != plan.PlanID {
			what := "plan " + sr.PlanID
			if sr.PlanID == "" {
				what = "no plan id"
			}
			return nil, nil, usage(fmt.Errorf("%w: shard output %s carries %s, not this plan's %s: it is the output of another plan of job %s (or not a shard output)", errForeignOutput, d, what, plan.PlanID, plan.JobID))
		}
		if sr.Shard < 0 || sr.Shard >= len(plan.Shards) {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s is shard %d; the plan has shards 0 to %d", errForeignOutput, d, sr.Shard, len(plan.Shards)-1))
		}
		if prev, dup := outs[sr.Shard]; dup {
			return nil, nil, usage(fmt.Errorf("shard %d given twice: %s and %s", sr.Shard, prev.dir, d))
		}
		if sr.BaseCommit != plan.BaseCommit {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s started from %s, not the plan's base %s", errForeignOutput, d, short(sr.BaseCommit), short(plan.BaseCommit)))
		}
		if err := checkOutputItems(d, plan.Shards[sr.Shard], &sr); err != nil {
			return nil, nil, usage(err)
		}
		outs[sr.Shard] = &shardOutput{dir: d, res: &sr}
	}
	return outs, unreadable, nil
}

// fetchShardOutputs fetches and verifies the bundle and reads the DLQ
// records of every output whose shard is not closed. An output that cannot
// be read is dropped from outs and reported; one that is not this plan's
// keeps its refusal (refusals).
//
// Outputs are independent: their bundles are imported side by side (only
// the ref updates take the repository's lock), then their branches are
// checked and their DLQ records read side by side, so gathering many
// shards does not wait on one core; merging stays in plan order (gather).
// Every bundle is imported before any branch is read: the in-process
// object reader indexes the new packs once, not once per shard.
func fetchShardOutputs(ctx context.Context, git *gitops.Client, plan *Plan, outs map[int]*shardOutput, gs *jobstore.GatherState) []string {
	var open []int
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if _, closed := gs.Closed[k]; !closed {
			open = append(open, k)
		}
	}
	for _, step := range []func(context.Context, *gitops.Client, *Plan, PlanShard, *shardOutput) error{importShardBundle, checkShardOutput} {
		var g errgroup.Group
		g.SetLimit(fetchParallelism())
		for _, k := range open {
			out := outs[k]
			if out.refused != nil || out.unreadable != nil {
				continue
			}
			g.Go(func() error {
				err := step(ctx, git, plan, plan.Shards[k], out)
				switch {
				case errors.Is(err, errForeignOutput):
					out.refused = err
				case err != nil:
					out.unreadable = err
				}
				return nil
			})
		}
		_ = g.Wait()
	}
	var unreadable []string
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if out := outs[k]; out.unreadable != nil {
			unreadable = append(unreadable, fmt.Sprintf("shard %d: output %s is unreadable: %v", k, out.dir, out.unreadable))
		}
	}
	return unreadable
}

// fetchParallelism is how many shard outputs are fetched and checked at
// once: the git children are CPU-bound, so one per core (at least 2, so a
// slow bundle read overlaps another's checks).
func fetchParallelism() int { return max(2, runtime.NumCPU()) }

// importShardBundle imports the output's bundle into the shard's ref
// (shardRef) unless the ref already holds the output's head (a gather
// waiting for an earlier shard sees the same outputs again).
func importShardBundle(ctx context.Context, git *gitops.Client, plan *Plan, sh PlanShard, out *shardOutput) error {
	sr := out.res
	if sr.Head == "" || sr.Head == plan.BaseCommit {
		return nil
	}
	if !isCommitID(sr.Head) {
		return fmt.Errorf("%w: %s: head %q is not a commit id", errForeignOutput, out.dir, sr.Head)
	}
	bundle := outputFile(out.dir, ShardBundleFile)
	if err := checkLimited(bundle, MaxShardBundleBytes); err != nil {
		if errors.Is(err, errOutputTooLarge) {
			return fmt.Errorf("%w: %w", errForeignOutput, err)
		}
		return err
	}
	ref := shardRef(plan.JobID, sh.Shard)
	if got, err := git.ResolveRef(ctx, ref); err == nil && got == sr.Head {
		return nil
	}
	return git.FetchBundle(ctx, bundle, "refs/heads/"+ShardBranch(plan.ResultsBranch, sh.Shard), ref)
}

// checkShardOutput checks the imported shard branch (verifyShardBranch)
// and reads the output's DLQ records.
func checkShardOutput(ctx context.Context, git *gitops.Client, plan *Plan, sh PlanShard, out *shardOutput) error {
	sr := out.res
	if sr.Head != "" && sr.Head != plan.BaseCommit {
		ref := shardRef(plan.JobID, sh.Shard)
		if got, err := git.ResolveRef(ctx, ref); err != nil || got != sr.Head {
			return fmt.Errorf("%s holds %s, result.json says %s", ShardBundleFile, short(got), short(sr.Head))
		}
		if err := verifyShardBranch(ctx, git, out.dir, ref, plan.BaseCommit, plan.JobID, sh, sr); err != nil {
			return err
		}
	}
	records, err := readShardDLQ(outputFile(out.dir, ShardDLQDir), sh)
	if err != nil {
		return err
	}
	out.records = records
	return nil
}

// refusals joins the refusals of outputs that are not this plan's, in
// shard order (a usage error: nothing is gathered).
func refusals(outs map[int]*shardOutput) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if outs[k].refused != nil {
			errs = append(errs, outs[k].refused)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return usage(errors.Join(errs...))
}

// gather merges and imports the shards in plan order (see Gather), then
// reduces when no item is left pending.
func (j *job) gather(ctx context.Context, plan *Plan, outs map[int]*shardOutput, gs *jobstore.GatherState, final bool) (*Result, error) {
	runCtx, stopGrace := j.graceContext(ctx)
	defer stopGrace()
	var waiting, held, alsoMissing, closedOpen []string
	var stopped []int // shards closed because a policy stopped them
	mergeStart, merged := j.now(), 0
	for _, sh := range plan.Shards {
		if ctx.Err() != nil {
			return j.end(fmt.Errorf("%w while gathering", ErrInterrupted))
		}
		if why, closed := gs.Closed[sh.Shard]; closed {
			if why != closedGathered {
				closedOpen = append(closedOpen, fmt.Sprintf("shard %d (%s)", sh.Shard, why))
			}
			continue
		}
		out := outs[sh.Shard]
		if len(waiting) > 0 {
			if out != nil && out.unreadable == nil {
				held = append(held, strconv.Itoa(sh.Shard))
			} else {
				alsoMissing = append(alsoMissing, strconv.Itoa(sh.Shard))
			}
			continue
		}
		var why string
		switch {
		case out == nil:
			why = "output missing"
		case out.unreadable != nil:
			why, out = "output unreadable", nil
		case out.res.Pending > 0 && out.res.StopReason != "":
			// Stopped by a policy: running the shard again cannot help
			// before a fix, so it is closed now (its items stay pending).
			why, stopped = "stopped: "+out.res.StopReason, append(stopped, sh.Shard)
			if out.res.Storm != nil && j.shardStorm == nil {
				j.shardStorm = out.res.Storm // the first in plan order
			}
		case out.res.Pending > 0:
			why = fmt.Sprintf("output has %d pending item(s)", out.res.Pending)
		}
		if why != "" && !final && !slices.Contains(stopped, sh.Shard) {
			waiting = append(waiting, fmt.Sprintf("shard %d (%s)", sh.Shard, why))
			continue
		}
		if out != nil {
			if err := j.gatherShard(ctx, plan, gs, sh, out); err != nil {
				return j.end(fmt.Errorf("%w: gather shard %d: %w", ErrJobFailed, sh.Shard, err))
			}
			merged++
		}
		reason := closedGathered
		if why != "" {
			reason = why
			closedOpen = append(closedOpen, fmt.Sprintf("shard %d (%s)", sh.Shard, why))
			if slices.Contains(stopped, sh.Shard) {
				j.warn(fmt.Sprintf("shard %d %s: closed, its pending items stay pending", sh.Shard, why))
			} else {
				j.warn(fmt.Sprintf("shard %d closed by a final gather (%s): its pending items stay pending", sh.Shard, why))
			}
		}
		gs.Closed[sh.Shard] = reason
		if err := jobstore.SaveGatherState(j.paths, gs); err != nil {
			return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
		}
		fault(ctx, FaultGatherShardClosed, strconv.Itoa(sh.Shard))
	}
	if merged > 0 {
		j.logf("%d shard(s) merged and imported in plan order in %s", merged, j.now().Sub(mergeStart).Round(time.Millisecond))
	}
	var pending int
	j.state.Read(func(cp *jobstore.Checkpoint) { pending = cp.Counts().Pending })
	if pending > 0 {
		var msg string
		if len(waiting) > 0 {
			msg = fmt.Sprintf("%d item(s) pending: waiting for %s", pending, strings.Join(firstN(waiting, 12), "; "))
			if len(alsoMissing) > 0 {
				msg += fmt.Sprintf("; output also missing: shard %s", strings.Join(firstN(alsoMissing, 12), ", shard "))
			}
			if len(held) > 0 {
				msg += fmt.Sprintf("; held back until then, to merge in plan order: shard(s) %s", strings.Join(firstN(held, 12), ", "))
			}
			msg += "; gather again with the missing output(s) (run the shard again to finish its pending items), or with --final to close those shards as they are"
		} else {
			fix := ""
			if len(stopped) > 0 {
				fix = "fix the cause of the stop, then "
			}
			msg = fmt.Sprintf("%d item(s) pending in closed shard(s) %s; %scontinue them with `plan WORKFLOW --from-pending %s --out DIR` (a new sharded job on this job's results)",
				pending, strings.Join(firstN(closedOpen, 12), "; "), fix, j.id)
		}
		if j.shardStorm != nil && len(waiting) == 0 {
			// A shard's breaker stopped it: the gathered job is stopped by
			// the storm too (exit 3), resumable after the fix.
			return j.end(fmt.Errorf("%w: %s", ErrFailureStorm, msg))
		}
		return j.end(fmt.Errorf("%w: %s", ErrJobFailed, msg))
	}
	if why := j.jobWideStop(); why != "" {
		return j.end(fmt.Errorf("%w: %s across the shards, so reduce did not run; fix the cause, then redrive the failed items with `dlq retry %s`", ErrJobFailed, why, j.id))
	}
	// reduce brings the parent worktree up to the results branch first.
	if err := j.reduce(ctx, runCtx); err != nil {
		return j.end(err)
	}
	return j.end(nil)
}

// closedGathered is the GatherState reason of a shard gathered whole.
const closedGathered = "gathered"

var errUnreadableShard = errors.New("unreadable shard output")

func checkpointItems(cp *jobstore.Checkpoint) map[string]*jobstore.CheckpointItem {
	m := make(map[string]*jobstore.CheckpointItem, len(cp.Items))
	for _, it := range cp.Items {
		m[it.ItemID] = it
	}
	return m
}

// gatherShard merges one shard's branch (fetched and verified by
// fetchShardOutputs) and records its items' outcomes. Merging a shard
// already merged changes nothing, so a gather killed between the merge and
// the import does it again.
func (j *job) gatherShard(ctx context.Context, plan *Plan, gs *jobstore.GatherState, sh PlanShard, out *shardOutput) error {
	sr := out.res
	conflicts := map[string]string{} // item id → conflict message
	rejected := rejectedIn(gs, sh, sr)
	if sr.Head != "" && sr.Head != plan.BaseCommit {
		ref := shardRef(j.id, sh.Shard)
		msg := fmt.Sprintf("Merge shard %d of job %s\n\nProdigy-Job: %s\nProdigy-Shard: %d\n", sh.Shard, j.id, j.id, sh.Shard)
		var err error
		if len(rejected) == 0 {
			_, err = j.git.MergeTree(ctx, "refs/heads/"+j.branch, ref, msg)
		} else {
			j.logf("shard %d has %d item(s) rejected in review; replaying the others one by one", sh.Shard, len(rejected))
			err = &gitops.MergeConflictError{}
		}
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc):
			if len(rejected) == 0 {
				j.logf("shard %d conflicts with the results branch (%s); replaying its items one by one", sh.Shard, strings.Join(mc.Files, ", "))
			}
			if conflicts, err = j.replayShard(ctx, plan, ref, rejected); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			j.logf("merged shard %d (%d item(s))", sh.Shard, len(sh.Items))
		}
		fault(ctx, FaultGatherShardMerged, strconv.Itoa(sh.Shard))
	}
	return j.importShard(plan, sh, sr, conflicts, rejected, out.records)
}

// replayShard applies the shard's item merges onto the results branch one
// at a time; it returns the items whose merge conflicts.
func (j *job) replayShard(ctx context.Context, plan *Plan, ref string, skip map[string]string) (map[string]string, error) {
	merges, err := j.git.FirstParentMerges(ctx, plan.BaseCommit, ref)
	if err != nil {
		return nil, err
	}
	conflicts := map[string]string{}
	for _, m := range merges {
		id, ok := itemTrailer(m.Message, j.id)
		label := "merge " + short(m.OID)
		if ok {
			label = "item " + id
			if _, rejected := skip[id]; rejected {
				j.logf("✗ %s rejected in review: left out of %s", id, j.branch)
				continue
			}
		}
		_, err := j.git.ReplayMerge(ctx, "refs/heads/"+j.branch, m.OID, label, m.Message)
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc) && ok:
			msg := fmt.Sprintf("merge conflict merging %s into %s", label, j.branch)
			if len(mc.Files) > 0 {
				msg += ": " + strings.Join(mc.Files, ", ")
			}
			conflicts[id] = msg
			j.logf("✗ %s conflicts with another shard: %s", id, strings.Join(mc.Files, ", "))
		case err != nil:
			return nil, err
		}
	}
	return conflicts, nil
}

// itemTrailer reads the Prodigy-Item trailer of a merge made by job jobID.
func itemTrailer(msg, jobID string) (string, bool) {
	var job, item string
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, "Prodigy-Job: "); ok {
			job = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Prodigy-Item: "); ok {
			item = strings.TrimSpace(v)
		}
	}
	if job != jobID || item == "" {
		return "", false
	}
	id, err := strconv.Unquote(item)
	return id, err == nil
}

// readShardDLQ reads a shard's dlq/ directory: item id → record. Each
// record file is size-limited and must be a record of one of the shard's
// items, once; there cannot be more files than items.
func readShardDLQ(dir string, sh PlanShard) (map[string]dlq.DeadLetteredItem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]dlq.DeadLetteredItem{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(entries) > len(sh.Items) {
		return nil, fmt.Errorf("%w: %s holds %d files; shard %d has %d items", errForeignOutput, dir, len(entries), sh.Shard, len(sh.Items))
	}
	ours := make(map[string]bool, len(sh.Items))
	for _, id := range sh.Items {
		ours[id] = true
	}
	out := make(map[string]dlq.DeadLetteredItem, len(entries))
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := readLimited(filepath.Join(dir, e.Name()), MaxShardRecordBytes)
		if errors.Is(err, errOutputTooLarge) {
			return nil, fmt.Errorf("%w: %w", errForeignOutput, err)
		}
		if err != nil {
			return nil, err
		}
		r, err := dlq.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("DLQ record %s: %w", e.Name(), err)
		}
		if !ours[r.ItemID] {
			return nil, fmt.Errorf("%w: DLQ record %s is of item %q, not an item of shard %d", errForeignOutput, filepath.Join(dir, e.Name()), r.ItemID, sh.Shard)
		}
		if _, dup := out[r.ItemID]; dup {
			return nil, fmt.Errorf("%w: %s holds two records of item %q", errForeignOutput, dir, r.ItemID)
		}
		out[r.ItemID] = r
	}
	return out, nil
}

// importShard records the outcomes of a shard's items in the checkpoint
// and its DLQ records (and the merge conflicts found by the replay) in
// the job's DLQ. Items already final are left alone.
func (j *job) importShard(plan *Plan, sh PlanShard, sr *ShardResult, conflicts, rejected map[string]string, records map[string]dlq.DeadLetteredItem) error {
	outcomes := make(map[string]ItemOutcome, len(sr.Items))
	for _, it := range sr.Items {
		outcomes[it.ItemID] = it
	}
	planItems := make(map[string]PlanItem, len(plan.Items))
	for _, it := range plan.Items {
		planItems[it.ID] = it
	}
	var cpItems map[string]*jobstore.CheckpointItem
	j.state.Read(func(cp *jobstore.Checkpoint) { cpItems = checkpointItems(cp) })
	ids := append([]string(nil), sh.Items...)
	sort.SliceStable(ids, func(a, b int) bool { return cpItems[ids[a]].Index < cpItems[ids[b]].Index })
	type change struct {
		cur     *jobstore.CheckpointItem
		oc      ItemOutcome
		pending json.RawMessage // the DLQ record not stored (failed-unrecorded)
	}
	var changes []change
	var unrecorded []string
	for _, id := range ids {
		cur := cpItems[id]
		oc, ok := outcomes[id]
		if cur == nil || !ok || (cur.State != ItemPending && cur.State != ItemRunning) {
			continue
		}
		pi := planItems[id]
		var pending json.RawMessage
		switch oc.State {
		case ItemMerged:
			if why, bad := rejected[id]; bad {
				t := dlq.ErrorType{Kind: dlq.ValidationFailed}
				msg := "rejected in review: " + why
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.now().UTC(), Type: &t, Message: msg, Step: "review",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s: a reviewer rejected the item's result", sh.Shard, j.id)},
				}}})
				pending = j.importRecord(withPrior(j, pi, rec))
				oc.State, oc.Error, oc.ErrorType = ItemDLQ, msg, t.String()
				j.events.emit(AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: false})
			} else if msg, bad := conflicts[id]; bad {
				t := dlq.ErrorType{Kind: dlq.MergeConflict}
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.now().UTC(), Type: &t, Message: msg, Step: "merge",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s", sh.Shard, j.id)},
				}}})
				pending = j.importRecord(withPrior(j, pi, rec))
				oc.State, oc.Error, oc.ErrorType = ItemDLQ, msg, t.String()
				j.events.emit(AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: dlq.ReprocessEligible(t, msg)})
			}
		case ItemDLQ:
			var rec *dlq.DeadLetteredItem
			if r, ok := records[id]; ok {
				rec = &r
			} else {
				j.warn(fmt.Sprintf("shard %d: item %s failed but its output has no DLQ record", sh.Shard, id))
			}
			pending = j.importRecord(withPrior(j, pi, rec))
		case ItemSkipped:
		default:
			continue // pending in the shard: stays pending
		}
		if pending != nil {
			unrecorded = append(unrecorded, strconv.Quote(id))
		}
		changes = append(changes, change{cur, oc, pending})
	}
	// One checkpoint write per shard, after the DLQ writes: an item whose
	// record could not be stored is failed-unrecorded (the job fails naming
	// it when it ends); `resume` or a later gather writes the record. Only
	// the shard's items are written (journal entries; the snapshot is
	// rewritten when the journal outgrows it), so a gather's writes do not
	// grow with the job times the shards. A crash in between leaves some
	// of them imported: gathering again imports the rest.
	err := j.state.UpdateItems(func(_ *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
		for _, c := range changes {
			touch(c.cur)
			idx, data := c.cur.Index, c.cur.Data
			c.cur.ItemOutcome = c.oc
			c.cur.Index, c.cur.Data = idx, data
			c.cur.PendingRecord, c.cur.Failures = c.pending, nil
		}
	})
	if err != nil {
		return err
	}
	if len(unrecorded) > 0 {
		j.warn(fmt.Sprintf("shard %d: %d DLQ record(s) not written (%s); they stay failed-unrecorded in the checkpoint and gathering again or `resume %s` writes them",
			sh.Shard, len(unrecorded), strings.Join(firstN(unrecorded, 10), ", "), j.id))
	}
	for _, c := range changes {
		j.hooks.ItemFinished(c.cur.ItemOutcome, "")
	}
	return nil
}

// importRecord stores rec (nil: nothing to store) in the job's DLQ
// through addRecord, so attempts the stored record already holds are never
// added twice (a gather interrupted after the DLQ write and before the
// checkpoint write imports the shard again). When the write fails it warns
// and returns the encoded record, which the caller keeps in the checkpoint
// as the item's pending record.
func (j *job) importRecord(rec *dlq.DeadLetteredItem) json.RawMessage {
	if rec == nil || len(rec.FailureHistory) == 0 {
		return nil
	}
	stored, added, err := addRecord(j.store, *rec)
	if err == nil {
		if added {
			j.events.emit(DLQItemAdded{ItemID: stored.ItemID, ErrorSignature: stored.ErrorSignature, FailureCount: stored.FailureCount})
		}
		return nil
	}
	enc, eerr := dlq.Encode(*rec)
	if eerr != nil {
		// Not storable either way: the item is counted as failed.
		j.warn(fmt.Sprintf("could not add item %s to the DLQ (the item is still counted as failed): %v; encode: %v", rec.ItemID, err, eerr))
		return nil
	}
	j.warn(fmt.Sprintf("could not add item %s to the DLQ: %v", rec.ItemID, err))
	return enc
}

// withPrior returns the record to store for a failed plan item: a
// redriven item's earlier DLQ record (from the plan) with rec's new
// failures after it, so the history is kept in attempt order; rec alone
// for a first run; the earlier record alone when the shard's output has
// no record. nil when there is neither.
func withPrior(j *job, pi PlanItem, rec *dlq.DeadLetteredItem) *dlq.DeadLetteredItem {
	if len(pi.Record) == 0 {
		return rec
	}
	prior, err := dlq.Decode(pi.Record)
	if err != nil {
		j.warn(fmt.Sprintf("plan record of %s: %v", pi.ID, err))
		return rec
	}
	if rec == nil {
		return &prior
	}
	out := *rec
	if len(out.ItemData) == 0 || string(out.ItemData) == "null" {
		out.ItemData = prior.ItemData
	}
	out.FailureHistory = append(slices.Clone(prior.FailureHistory), rec.FailureHistory...)
	out.FailureCount = prior.FailureCount + uint32(len(rec.FailureHistory))
	if !prior.FirstAttempt.IsZero() && (out.FirstAttempt.IsZero() || prior.FirstAttempt.Before(out.FirstAttempt)) {
		out.FirstAttempt = prior.FirstAttempt
	}
	if prior.LastAttempt.After(out.LastAttempt) {
		out.LastAttempt = prior.LastAttempt
	}
	if out.WorktreeArtifacts == nil {
		out.WorktreeArtifacts = prior.WorktreeArtifacts
	}
	return &out
}
