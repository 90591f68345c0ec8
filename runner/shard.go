package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// shardOptions configures runShard: Run carries the engine settings
// (Home, RepoDir, MaxParallel, Stderr, Clock, …; the workflow, job id and
// branch come from the plan), the spec the rest.
type shardOptions struct {
	Run options
	ShardSpec
}

// ShardResult is OUTDIR/result.json: the per-item outcomes `run --json`
// prints for the shard's items, plus where the shard branch starts and ends.
type ShardResult struct {
	*Result
	// PlanID is the id of the plan the shard ran: gather refuses outputs
	// of any other plan.
	PlanID string `json:"plan_id"`
	// Shard is the shard index.
	Shard int `json:"shard"`
	// BaseCommit is the plan's base commit.
	BaseCommit string `json:"base_commit"`
	// Head is the shard branch's tip; equal to BaseCommit when nothing
	// merged (then there is no shard.bundle).
	Head string `json:"head"`
	// StopReason says why the shard stopped launching items with some
	// still pending: a failure policy (on_item_failure: stop,
	// continue_on_failure: false, its part of max_failures,
	// failure_threshold) or its part of the budget. Running the shard
	// again cannot finish those items before the cause is fixed, so gather
	// closes such a shard instead of waiting for it. Empty otherwise.
	StopReason string `json:"stop_reason,omitempty"`
	// RunAttempt is ShardSpec.Attempt: the CI attempt that wrote this
	// output (absent when none was given).
	RunAttempt int `json:"run_attempt,omitempty"`
	// OutputSeq numbers the writes of one run of the shard's output: the
	// output is rewritten after every finished item, and of two outputs of
	// the same attempt the higher OutputSeq holds everything the lower one
	// does (and the final write has the highest).
	OutputSeq int `json:"output_seq,omitempty"`
}

// Files of a shard's output directory.
const (
	ShardBundleFile = "shard.bundle"
	ShardResultFile = "result.json"
	ShardEventsFile = "events.jsonl"
	ShardDLQDir     = "dlq"
)

// ShardBranch is the branch shard k of a results branch merges into.
func ShardBranch(resultsBranch string, k int) string {
	return resultsBranch + "/shard-" + strconv.Itoa(k)
}

// shardSuffix is added to the repository's state name for a shard's job:
// a shard's state is kept apart from the gatherer's state of the same job.
func shardSuffix(k int) string { return ".shard-" + strconv.Itoa(k) }

// runShard runs shard K of a plan in the repository at Run.RepoDir (any
// clone; the base commit is fetched from base.bundle when missing) with
// the whole engine — worktrees, retries, on_item_failure, DLQ, events,
// checkpoint — merging into prodigy/<job_id>/shard-K from the base. It
// never runs reduce. Running it again after a crash or interrupt resumes
// the shard; after it completed it only rewrites the output.
//
// The output directory is written whenever the shard ran (failed and
// interrupted shards included, so finished items are not lost):
// shard.bundle (the shard branch without the base; absent when nothing
// merged), dlq/ (the shard's DLQ records in the seed's format), events.jsonl
// and, last, result.json. The error is as for Run: nil unless the shard
// itself failed (stop policy, thresholds) or was interrupted.
func runShard(ctx context.Context, so shardOptions) (*ShardResult, error) {
	o := so.Run
	o.defaults()
	o.Merge = MergeTree
	// A shard deletes its worktrees before it writes its output, as before.
	o.DeferTeardown = false
	so.PlanDir, so.OutDir = absPath(so.PlanDir), absPath(so.OutDir) // git runs elsewhere: never relative
	plan, err := LoadPlan(so.PlanDir)
	if err != nil {
		return nil, err
	}
	if so.Shard < 0 || so.Shard >= len(plan.Shards) {
		return nil, usage(fmt.Errorf("shard %d does not exist: the plan has shards 0 to %d", so.Shard, len(plan.Shards)-1))
	}
	if so.OutDir == "" {
		return nil, usage(errors.New("no output directory given"))
	}
	if o.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	git, err := gitops.New(o.RepoDir, agentGitOptions(&o))
	if err != nil {
		return nil, usage(err)
	}
	if err := plan.ensureBase(ctx, git, so.PlanDir); err != nil {
		return nil, err
	}
	wf, err := plan.workflow(so.PlanDir)
	if err != nil {
		return nil, err
	}
	shardWF := *wf
	shardWF.Reduce = nil // reduce runs once, in gather
	// The job-wide limits are the plan's parts for this shard.
	if part := plan.Shards[so.Shard].MaxFailures; part > 0 {
		shardWF.ErrorPolicy.MaxFailures = part
	}
	if part := plan.Shards[so.Shard].MaxCostUSD; part > 0 {
		o.MaxCostUSD = part
	}
	if ok, _ := git.BranchExists(ctx, plan.ResultsBranch); ok {
		return nil, usage(fmt.Errorf("branch %s exists here, so %s cannot be created: run the shard in another clone", plan.ResultsBranch, ShardBranch(plan.ResultsBranch, so.Shard)))
	}
	maxPar := plan.MaxParallel
	if o.MaxParallel > 0 {
		maxPar = o.MaxParallel
	}
	o.JobID = plan.JobID
	paths := Paths{Home: o.Home, Repo: RepoKey(o.Home, git.TopLevel(), shardSuffix(so.Shard)), JobID: plan.JobID}
	branch := ShardBranch(plan.ResultsBranch, so.Shard)
	j, err := newJob(&o, &shardWF, git, paths, branch, maxPar)
	if err != nil {
		return nil, usage(err)
	}
	j.traceParent = plan.TraceParent
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()

	// The output is written after an interrupt too (bounded in time), and
	// while the shard runs: after every finished item (shardlive.go).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	live := startShardLive(wctx, j, ShardResult{PlanID: plan.PlanID, Shard: so.Shard, BaseCommit: plan.BaseCommit, RunAttempt: so.Attempt}, so.OutDir, so.OutputLock, so.Written)
	res, runErr := j.runShard(ctx, plan, so.Shard, so.Continue)
	live.stop()
	if res == nil {
		return nil, runErr
	}
	if errors.Is(runErr, ErrBudgetExhausted) {
		runErr = fmt.Errorf("%w; this is shard %d's part ($%.2f) of the job budget: running the shard again does not add to it; gather (which closes this shard), then continue the pending items with `plan WORKFLOW --from-pending %s --max-cost-usd N`",
			runErr, so.Shard, plan.Shards[so.Shard].MaxCostUSD, plan.JobID)
	}
	sr := &ShardResult{Result: res, PlanID: plan.PlanID, Shard: so.Shard, BaseCommit: plan.BaseCommit, RunAttempt: so.Attempt}
	switch {
	case res.Pending == 0:
	case errors.Is(runErr, ErrBudgetExhausted):
		sr.StopReason = fmt.Sprintf("its part ($%.2f) of the job budget is spent", plan.Shards[so.Shard].MaxCostUSD)
	case j.stopping.Load():
		sr.StopReason = j.stopReason()
	}
	if err := live.write(wctx, sr); err != nil {
		return sr, errors.Join(runErr, fmt.Errorf("%w: write the shard output: %w", ErrJobFailed, err))
	}
	return sr, runErr
}

// runShard creates (or resumes) the shard's job and runs its items.
func (j *job) runShard(ctx context.Context, plan *Plan, k int, cont string) (*Result, error) {
	if jobstore.HasCheckpoint(j.paths) {
		cp, err := jobstore.LoadCheckpoint(j.paths)
		if err != nil {
			return nil, err
		}
		if cp.Status == StatusCompleted {
			j.logf("shard %d of job %s already completed; writing its output again", k, j.id)
			res := resultOf(cp)
			res.OrphanedWorktrees = orEmpty(nil)
			if n, err := countDLQ(j.paths); err == nil {
				res.DLQCount = n
			}
			return res, nil
		}
		if err := endJobLeftovers(j.paths, j.logf); err != nil {
			return nil, err
		}
		if err := j.resetUnstartedParent(ctx, cp); err != nil {
			return nil, err
		}
		if err := j.recover(ctx, cp); err != nil {
			return nil, err
		}
		if err := j.open(ctx, cp, true); err != nil {
			return nil, err
		}
		defer j.events.close()
		return j.execute(ctx, nil)
	}
	if ok, err := j.git.BranchExists(ctx, j.branch); err != nil {
		return nil, usage(err)
	} else if ok {
		return nil, usage(fmt.Errorf("branch %s already exists but this shard has no state here; delete the branch to run the shard again", j.branch))
	}
	start, prev := plan.BaseCommit, (*previousShard)(nil)
	if cont != "" {
		var err error
		if prev, err = readPreviousShard(plan, k, cont); err == nil {
			start, err = prev.start(ctx, j, plan, k)
		}
		if err != nil {
			j.warn(fmt.Sprintf("shard %d: not continuing from %s: %v; starting from the base", k, cont, err))
			start, prev = plan.BaseCommit, nil
		}
	}
	// The checkpoint first (the intent: running the shard again resumes
	// it), then the branch and parent worktree, then the rest.
	cp := planCheckpoint(j, plan, plan.Shards[k].Items)
	adopted := 0
	if prev != nil {
		adopted = prev.adopt(cp)
	}
	if err := j.recordIntent(ctx, cp, FaultShardIntent); err != nil {
		return nil, err
	}
	if prev != nil {
		// Continuing: the shard branch starts at the earlier attempt's head.
		if err := j.git.WorktreeAdd(ctx, j.parentDir, j.branch, start); err != nil {
			return nil, fmt.Errorf("create the shard's parent worktree: %w", err)
		}
	} else if err := j.resetUnstartedParent(ctx, cp); err != nil {
		return nil, err
	}
	if err := j.open(ctx, cp, false); err != nil {
		return nil, err
	}
	defer j.events.close()
	if prev != nil {
		if err := prev.importRecords(j, plan.Shards[k]); err != nil {
			j.warn(fmt.Sprintf("shard %d: DLQ records of %s not imported: %v", k, cont, err))
		}
		j.logf("shard %d of job %s: continuing from %s: %d of %d item(s) already final", k, j.id, cont, adopted, len(cp.Items))
	}
	j.logf("shard %d of job %s: %d item(s) from %s", k, j.id, len(cp.Items), short(start))
	return j.execute(ctx, nil)
}

// planCheckpoint is the initial checkpoint of a shard's or the gatherer's
// job: setup done (by plan), the given items pending. The workflow path is
// left empty and no copy is kept, so a shard's state cannot be continued by
// `resume` (which would run reduce): run `shard` again instead.
func planCheckpoint(j *job, plan *Plan, ids []string) *jobstore.Checkpoint {
	now := j.now().UTC()
	byID := make(map[string]PlanItem, len(plan.Items))
	for _, it := range plan.Items {
		byID[it.ID] = it
	}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: j.id, Repo: j.paths.Repo, RepoDir: j.git.TopLevel(),
		WorkflowName: j.wf.Name, ResultsBranch: j.branch, BaseCommit: plan.BaseCommit,
		ParentWorktree: j.parentDir, Isolation: string(j.isolation), Merge: string(j.mergeMode), MaxParallel: j.maxParallel,
		Status: StatusRunning, Phase: jobstore.PhaseMap, SetupCompleted: true, StartedAt: now,
		Vars: map[string]string{}}, Items: make([]*jobstore.CheckpointItem, 0, len(ids))}
	for k, v := range plan.Vars {
		cp.Vars[k] = v
	}
	for _, id := range ids {
		it := byID[id]
		cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: ItemOutcome{ItemID: id, State: ItemPending, Attempts: it.Attempts}, Index: it.Index, Data: it.Data})
	}
	return cp
}
