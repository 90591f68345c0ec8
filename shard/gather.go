package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// GatherSpec is what Gather reads: shard outputs merged into the job's
// results branch in plan order.
type GatherSpec struct {
	// RepoDir is a checkout of the plan's repository.
	RepoDir string
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

// Gather completes a sharded job in the repository at RepoDir (the
// planning repository or any clone holding the base; the base is fetched
// from base.bundle when missing).
//
// Every output is checked before anything is merged: it must carry the
// plan's id and job id, be a shard of the plan given once, list exactly
// that shard's items, and its bundle's item merges must be the merged
// items it lists; every file read has a size limit. An output that fails
// these checks is refused (a *runner.UsageError naming it); one that
// cannot be read (no result.json, a corrupt bundle) counts as missing.
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
func Gather(ctx context.Context, eng *runner.Engine, s GatherSpec) (*runner.Result, error) {
	s.PlanDir = absPath(s.PlanDir)
	s.Outputs = slices.Clone(s.Outputs)
	for i, d := range s.Outputs {
		s.Outputs[i] = absPath(d) // git runs elsewhere: never relative
	}
	plan, err := LoadPlan(s.PlanDir)
	if err != nil {
		return nil, err
	}
	if eng.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	git, err := eng.OpenRepo(s.RepoDir, runner.Agents{})
	if err != nil {
		return nil, usage(err)
	}
	if err := plan.ensureBase(ctx, git, s.PlanDir); err != nil {
		return nil, err
	}
	wf, err := plan.workflow(s.PlanDir)
	if err != nil {
		return nil, err
	}
	j, err := eng.OpenJob(runner.JobSpec{Repo: git, Workflow: wf, JobID: plan.JobID, Branch: plan.ResultsBranch,
		TraceParent: plan.TraceParent, Agents: runner.Agents{MaxParallel: plan.MaxParallel}})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	paths := j.Paths()
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
			errForeignOutput, j.ID(), gs.PlanID, plan.PlanID, s.PlanDir, j.ID()))
	}
	if err := addRejections(plan, gs, !hasGS, s.Reject); err != nil {
		return nil, err
	}
	outs, unreadable, err := readShardOutputs(plan, s.Outputs)
	if err != nil {
		return nil, err
	}
	fetchStart := j.Now()
	unreadable = append(unreadable, fetchShardOutputs(ctx, git, plan, outs, gs)...)
	j.Logf("shard outputs fetched and verified in %s (%d at a time)", j.Now().Sub(fetchStart).Round(time.Millisecond), fetchParallelism())
	if err := refusals(outs); err != nil {
		return nil, err
	}
	for _, u := range unreadable {
		j.Warn(u)
	}
	if jobstore.HasCheckpoint(paths) {
		done, err := j.Reopen(ctx)
		if err != nil {
			return nil, err
		}
		if done != nil {
			j.Logf("job %s is already gathered; nothing to do", j.ID())
			return done, nil
		}
		if !hasGS {
			gs.PlanID = plan.PlanID
		}
	} else {
		gs.PlanID = plan.PlanID
		if err := createGather(ctx, j, plan, gs); err != nil {
			return nil, err
		}
	}
	g := &gatherer{j: j, wf: wf, plan: plan, gs: gs, hooks: eng.Hooks}
	return g.gather(ctx, outs, s.Final)
}

// createGather creates the gatherer's job in an order a crash cannot
// break: the gather state (the plan id), the workflow copy, the
// checkpoint (every plan item pending), then the results branch at the
// base (or as the planning repository left it) and its parent worktree
// (runner.Job.Reopen redoes them when a crash came first), then the rest
// of the state.
func createGather(ctx context.Context, j *runner.Job, plan *Plan, gs *jobstore.GatherState) error {
	git := j.Git()
	ok, err := git.BranchExists(ctx, j.Branch())
	if err != nil {
		return usage(err)
	}
	if ok {
		tip, rerr := git.ResolveRef(ctx, "refs/heads/"+j.Branch())
		if rerr != nil {
			return rerr
		}
		if tip != plan.BaseCommit {
			return usage(fmt.Errorf("results branch %s exists at %s, not at the plan's base %s, and this repository has no gather state for job %s", j.Branch(), short(tip), short(plan.BaseCommit), j.ID()))
		}
	}
	if err := jobstore.SaveGatherState(j.Paths(), gs); err != nil {
		return err
	}
	ids := make([]string, 0, len(plan.Items))
	for _, it := range plan.Items {
		ids = append(ids, it.ID)
	}
	items := planItems(plan, ids)
	if err := jobstore.SaveWorkflowCopy(j.Paths(), []byte(plan.Workflow)); err != nil {
		return err
	}
	return j.Create(ctx, runner.CreateSpec{Base: plan.BaseCommit, Vars: plan.Vars, Items: items, Intent: runner.FaultGatherIntent})
}

// gatherer is one gather of a plan's outputs into the job j.
type gatherer struct {
	j     *runner.Job
	wf    *config.Workflow // the plan's
	plan  *Plan
	gs    *jobstore.GatherState
	hooks runner.Hooks // the Engine's (nil: none)
	storm bool         // a shard's failure storm is recorded (j.SetStorm)
}

// gather merges and imports the shards in plan order (see Gather), then
// reduces when no item is left pending.
func (g *gatherer) gather(ctx context.Context, outs map[int]*shardOutput, final bool) (*runner.Result, error) {
	j, plan, gs := g.j, g.plan, g.gs
	// With reduce steps, the parent worktree follows the results branch
	// while shards merge (on the core the merges leave free), so reduce
	// does not check out every shard's files at once at the end.
	var follow *parentFollower
	if len(g.wf.Reduce) > 0 {
		follow = followParent(ctx, j)
	}
	end := func(cause error) (*runner.Result, error) {
		follow.stop()
		return j.End(cause)
	}
	var waiting, held, alsoMissing, closedOpen []string
	var stopped []int // shards closed because a policy stopped them
	mergeStart, merged := j.Now(), 0
	for _, sh := range plan.Shards {
		if ctx.Err() != nil {
			return end(fmt.Errorf("%w while gathering", runner.ErrInterrupted))
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
			if out.res.Storm != nil && !g.storm {
				j.SetStorm(out.res.Storm) // the first in plan order
				g.storm = true
			}
		case out.res.Pending > 0:
			why = fmt.Sprintf("output has %d pending item(s)", out.res.Pending)
		}
		if why != "" && !final && !slices.Contains(stopped, sh.Shard) {
			waiting = append(waiting, fmt.Sprintf("shard %d (%s)", sh.Shard, why))
			continue
		}
		if out != nil {
			if err := g.gatherShard(ctx, sh, out); err != nil {
				return end(fmt.Errorf("%w: gather shard %d: %w", runner.ErrJobFailed, sh.Shard, err))
			}
			merged++
			follow.poke()
		}
		reason := closedGathered
		if why != "" {
			reason = why
			closedOpen = append(closedOpen, fmt.Sprintf("shard %d (%s)", sh.Shard, why))
			if slices.Contains(stopped, sh.Shard) {
				j.Warn(fmt.Sprintf("shard %d %s: closed, its pending items stay pending", sh.Shard, why))
			} else {
				j.Warn(fmt.Sprintf("shard %d closed by a final gather (%s): its pending items stay pending", sh.Shard, why))
			}
		}
		gs.Closed[sh.Shard] = reason
		if err := jobstore.SaveGatherState(j.Paths(), gs); err != nil {
			return end(fmt.Errorf("%w: %w", runner.ErrJobFailed, err))
		}
		runner.Fault(ctx, runner.FaultGatherShardClosed, strconv.Itoa(sh.Shard))
	}
	if merged > 0 {
		j.Logf("%d shard(s) merged and imported in plan order in %s", merged, j.Now().Sub(mergeStart).Round(time.Millisecond))
	}
	c := j.Counts()
	pending := c.Pending
	if pending > 0 {
		var msg string
		if len(waiting) > 0 {
			msg = fmt.Sprintf("%d item(s) pending: waiting for %s", pending, strings.Join(brief.FirstN(waiting, 12), "; "))
			if len(alsoMissing) > 0 {
				msg += fmt.Sprintf("; output also missing: shard %s", strings.Join(brief.FirstN(alsoMissing, 12), ", shard "))
			}
			if len(held) > 0 {
				msg += fmt.Sprintf("; held back until then, to merge in plan order: shard(s) %s", strings.Join(brief.FirstN(held, 12), ", "))
			}
			msg += "; gather again with the missing output(s) (run the shard again to finish its pending items), or with --final to close those shards as they are"
		} else {
			fix := ""
			if len(stopped) > 0 {
				fix = "fix the cause of the stop, then "
			}
			msg = fmt.Sprintf("%d item(s) pending in closed shard(s) %s; %scontinue them with `plan WORKFLOW --from-pending %s --out DIR` (a new sharded job on this job's results)",
				pending, strings.Join(brief.FirstN(closedOpen, 12), "; "), fix, j.ID())
		}
		if g.storm && len(waiting) == 0 {
			// A shard's breaker stopped it: the gathered job is stopped by
			// the storm too (exit 3), resumable after the fix.
			return end(fmt.Errorf("%w: %s", runner.ErrFailureStorm, msg))
		}
		return end(fmt.Errorf("%w: %s", runner.ErrJobFailed, msg))
	}
	if why := jobWideStop(g.wf.ErrorPolicy, c); why != "" {
		return end(fmt.Errorf("%w: %s across the shards, so reduce did not run; fix the cause, then redrive the failed items with `dlq retry %s`", runner.ErrJobFailed, why, j.ID()))
	}
	follow.stop()
	// reduce brings the parent worktree up to the results branch first.
	if err := j.Reduce(ctx); err != nil {
		return end(err)
	}
	return end(nil)
}

// closedGathered is the GatherState reason of a shard gathered whole.
const closedGathered = "gathered"

var errUnreadableShard = errors.New("unreadable shard output")

// gatherShard merges one shard's branch (fetched and verified by
// fetchShardOutputs) and records its items' outcomes. Merging a shard
// already merged changes nothing, so a gather killed between the merge and
// the import does it again.
func (g *gatherer) gatherShard(ctx context.Context, sh PlanShard, out *shardOutput) error {
	j, plan, git := g.j, g.plan, g.j.Git()
	sr := out.res
	conflicts := map[string]string{} // item id → conflict message
	rejected := rejectedIn(g.gs, sh, sr)
	if sr.Head != "" && sr.Head != plan.BaseCommit {
		ref := shardRef(j.ID(), sh.Shard)
		msg := fmt.Sprintf("Merge shard %d of job %s\n\nProdigy-Job: %s\nProdigy-Shard: %d\n", sh.Shard, j.ID(), j.ID(), sh.Shard)
		var err error
		if len(rejected) == 0 {
			_, err = git.MergeTree(ctx, "refs/heads/"+j.Branch(), ref, msg)
		} else {
			j.Logf("shard %d has %d item(s) rejected in review; replaying the others one by one", sh.Shard, len(rejected))
			err = &gitops.MergeConflictError{}
		}
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc):
			if len(rejected) == 0 {
				j.Logf("shard %d conflicts with the results branch (%s); replaying its items one by one", sh.Shard, strings.Join(mc.Files, ", "))
			}
			if conflicts, err = g.replayShard(ctx, ref, rejected); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			j.Logf("merged shard %d (%d item(s))", sh.Shard, len(sh.Items))
		}
		runner.Fault(ctx, runner.FaultGatherShardMerged, strconv.Itoa(sh.Shard))
	}
	return g.importShard(sh, sr, conflicts, rejected, out.records)
}

// replayShard applies the shard's item merges onto the results branch one
// at a time; it returns the items whose merge conflicts.
func (g *gatherer) replayShard(ctx context.Context, ref string, skip map[string]string) (map[string]string, error) {
	j, git := g.j, g.j.Git()
	merges, err := git.FirstParentMerges(ctx, g.plan.BaseCommit, ref)
	if err != nil {
		return nil, err
	}
	conflicts := map[string]string{}
	for _, m := range merges {
		id, ok := itemTrailer(m.Message, j.ID())
		label := "merge " + short(m.OID)
		if ok {
			label = "item " + id
			if _, rejected := skip[id]; rejected {
				j.Logf("✗ %s rejected in review: left out of %s", id, j.Branch())
				continue
			}
		}
		_, err := git.ReplayMerge(ctx, "refs/heads/"+j.Branch(), m.OID, label, m.Message)
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc) && ok:
			msg := fmt.Sprintf("merge conflict merging %s into %s", label, j.Branch())
			if len(mc.Files) > 0 {
				msg += ": " + strings.Join(mc.Files, ", ")
			}
			conflicts[id] = msg
			j.Logf("✗ %s conflicts with another shard: %s", id, strings.Join(mc.Files, ", "))
		case err != nil:
			return nil, err
		}
	}
	return conflicts, nil
}
