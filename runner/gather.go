package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// gatherOptions configures gatherJob: Run carries the engine settings
// (Home, RepoDir, Stderr, Clock, …; the workflow, job id and results
// branch come from the plan), the spec the rest.
type gatherOptions struct {
	Run options
	GatherSpec
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
	if err := j.reduce(runCtx); err != nil {
		return j.end(err)
	}
	return j.end(nil)
}

// closedGathered is the GatherState reason of a shard gathered whole.
const closedGathered = "gathered"

var errUnreadableShard = errors.New("unreadable shard output")

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
