package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// RunSpec is what Run reads: one shard of a plan run. The workflow, job
// id, branch and budget come from the plan.
type RunSpec struct {
	// RepoDir is a checkout of the plan's repository.
	RepoDir string
	// PlanDir is the plan directory (plan.json, base.bundle).
	PlanDir string
	// Shard is the shard index K.
	Shard int
	// OutDir receives shard.bundle, dlq/, events.jsonl and result.json.
	OutDir string
	// Continue is an earlier attempt's output directory of this shard
	// (e.g. the artifact a cancelled or timed-out attempt uploaded). When
	// the shard has no state here it starts from that output: its shard
	// branch from the output's head, its merged, failed and skipped items
	// not run again (their DLQ records imported). An output of another
	// shard, job or base is ignored with a warning. "" starts from the base.
	Continue string
	// Attempt is the CI's attempt number of this run of the shard (e.g.
	// GITHUB_RUN_ATTEMPT), written to result.json as run_attempt so that
	// a gatherer can tell a re-run's output from an earlier attempt's
	// whatever its artifact is called; 0 writes none.
	Attempt int
	// OutputLock, when set, is held while the output directory is written
	// (after every finished item and at the end): hold it to read a
	// consistent output, e.g. to upload it while the shard runs. Nil
	// uses a lock of the shard's own.
	OutputLock sync.Locker
	// Written, when set, is called after each complete write of the output
	// directory with its output_seq (1, 2, …; the final write has the
	// highest), without OutputLock held. It must not block for long: the
	// next write waits for it.
	Written func(seq int)
	// Agents says how the shard's agents run.
	Agents runner.Agents
}

// Result is OUTDIR/result.json: the per-item outcomes `run --json`
// prints for the shard's items, plus where the shard branch starts and ends.
type Result struct {
	*runner.Result
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
	// RunAttempt is RunSpec.Attempt: the CI attempt that wrote this
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
	BundleFile = "shard.bundle"
	ResultFile = "result.json"
	EventsFile = "events.jsonl"
	DLQDir     = "dlq"
)

// Branch is the branch shard k of a results branch merges into.
func Branch(resultsBranch string, k int) string {
	return resultsBranch + "/shard-" + strconv.Itoa(k)
}

// stateSuffix is added to the repository's state name for a shard's job:
// a shard's state is kept apart from the gatherer's state of the same job.
func stateSuffix(k int) string { return ".shard-" + strconv.Itoa(k) }

// Run runs shard K of a plan in the repository at RepoDir (any clone; the
// base commit is fetched from base.bundle when missing) with the whole
// engine — worktrees, retries, on_item_failure, DLQ, events, checkpoint —
// merging into prodigy/<job_id>/shard-K from the base. It never runs
// reduce, and deletes its worktrees before it writes its output whatever
// the Engine's DeferTeardown. Running it again after a crash or interrupt
// resumes the shard; after it completed it only rewrites the output.
//
// The output directory is written whenever the shard ran (failed and
// interrupted shards included, so finished items are not lost):
// shard.bundle (the shard branch without the base; absent when nothing
// merged), dlq/ (the shard's DLQ records in the seed's format), events.jsonl
// and, last, result.json. The error is as for runner.Engine.Run: nil unless
// the shard itself failed (stop policy, thresholds) or was interrupted.
func Run(ctx context.Context, eng *runner.Engine, s RunSpec) (*Result, error) {
	s.PlanDir, s.OutDir = absPath(s.PlanDir), absPath(s.OutDir) // git runs elsewhere: never relative
	plan, err := LoadPlan(s.PlanDir)
	if err != nil {
		return nil, err
	}
	if s.Shard < 0 || s.Shard >= len(plan.Shards) {
		return nil, usage(fmt.Errorf("shard %d does not exist: the plan has shards 0 to %d", s.Shard, len(plan.Shards)-1))
	}
	if s.OutDir == "" {
		return nil, usage(errors.New("no output directory given"))
	}
	if eng.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	git, err := eng.OpenRepo(s.RepoDir, s.Agents)
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
	shardWF := *wf
	shardWF.Reduce = nil // reduce runs once, in gather
	// The job-wide limits are the plan's parts for this shard.
	if part := plan.Shards[s.Shard].MaxFailures; part > 0 {
		shardWF.ErrorPolicy.MaxFailures = part
	}
	if ok, _ := git.BranchExists(ctx, plan.ResultsBranch); ok {
		return nil, usage(fmt.Errorf("branch %s exists here, so %s cannot be created: run the shard in another clone", plan.ResultsBranch, Branch(plan.ResultsBranch, s.Shard)))
	}
	a := s.Agents
	if a.MaxParallel <= 0 {
		a.MaxParallel = plan.MaxParallel
	}
	// A shard deletes its worktrees before it writes its output, and its
	// output is rewritten after every finished item (shardlive.go).
	live := newLive(Result{PlanID: plan.PlanID, Shard: s.Shard, BaseCommit: plan.BaseCommit, RunAttempt: s.Attempt}, s.OutDir, s.OutputLock, s.Written)
	se := *eng
	se.DeferTeardown = false
	se.Hooks = liveHooks{Hooks: eng.Hooks, kick: live.poke}
	j, err := se.OpenJob(runner.JobSpec{Repo: git, Workflow: &shardWF, JobID: plan.JobID, Branch: Branch(plan.ResultsBranch, s.Shard),
		StateSuffix: stateSuffix(s.Shard), MaxCostUSD: plan.Shards[s.Shard].MaxCostUSD, TraceParent: plan.TraceParent, Agents: a})
	if err != nil {
		return nil, err
	}
	defer j.Close()

	// The output is written after an interrupt too (bounded in time), and
	// while the shard runs.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	live.start(wctx, j)
	res, runErr := runJob(ctx, j, plan, s.Shard, s.Continue)
	live.stop()
	if res == nil {
		return nil, runErr
	}
	if errors.Is(runErr, runner.ErrBudgetExhausted) {
		runErr = fmt.Errorf("%w; this is shard %d's part ($%.2f) of the job budget: running the shard again does not add to it; gather (which closes this shard), then continue the pending items with `plan WORKFLOW --from-pending %s --max-cost-usd N`",
			runErr, s.Shard, plan.Shards[s.Shard].MaxCostUSD, plan.JobID)
	}
	sr := &Result{Result: res, PlanID: plan.PlanID, Shard: s.Shard, BaseCommit: plan.BaseCommit, RunAttempt: s.Attempt}
	switch why := j.StopReason(); {
	case res.Pending == 0:
	case errors.Is(runErr, runner.ErrBudgetExhausted):
		sr.StopReason = fmt.Sprintf("its part ($%.2f) of the job budget is spent", plan.Shards[s.Shard].MaxCostUSD)
	case why != "":
		sr.StopReason = why
	}
	if err := live.write(wctx, sr); err != nil {
		return sr, errors.Join(runErr, fmt.Errorf("%w: write the shard output: %w", runner.ErrJobFailed, err))
	}
	return sr, runErr
}

// runJob creates (or resumes) the shard's job and runs its items.
func runJob(ctx context.Context, j *runner.Job, plan *Plan, k int, cont string) (*runner.Result, error) {
	if jobstore.HasCheckpoint(j.Paths()) {
		done, err := j.Reopen(ctx)
		if err != nil {
			return nil, err
		}
		if done != nil {
			j.Logf("shard %d of job %s already completed; writing its output again", k, j.ID())
			return done, nil
		}
		return j.Run(ctx)
	}
	git := j.Git()
	if ok, err := git.BranchExists(ctx, j.Branch()); err != nil {
		return nil, usage(err)
	} else if ok {
		return nil, usage(fmt.Errorf("branch %s already exists but this shard has no state here; delete the branch to run the shard again", j.Branch()))
	}
	start, prev := plan.BaseCommit, (*previousShard)(nil)
	if cont != "" {
		var err error
		if prev, err = readPreviousShard(plan, k, cont); err == nil {
			start, err = prev.start(ctx, j, plan, k)
		}
		if err != nil {
			j.Warn(fmt.Sprintf("shard %d: not continuing from %s: %v; starting from the base", k, cont, err))
			start, prev = plan.BaseCommit, nil
		}
	}
	// The checkpoint first (the intent: running the shard again resumes
	// it), then the branch and parent worktree, then the rest.
	items := planItems(plan, plan.Shards[k].Items)
	adopted := 0
	if prev != nil {
		adopted = prev.adopt(items)
	}
	cs := runner.CreateSpec{Base: plan.BaseCommit, Vars: plan.Vars, Items: items, Intent: runner.FaultShardIntent}
	if prev != nil {
		cs.Start = start // continuing: the shard branch starts at the earlier attempt's head
	}
	if err := j.Create(ctx, cs); err != nil {
		return nil, err
	}
	if prev != nil {
		if err := prev.importRecords(j, plan.Shards[k]); err != nil {
			j.Warn(fmt.Sprintf("shard %d: DLQ records of %s not imported: %v", k, cont, err))
		}
		j.Logf("shard %d of job %s: continuing from %s: %d of %d item(s) already final", k, j.ID(), cont, adopted, len(items))
	}
	j.Logf("shard %d of job %s: %d item(s) from %s", k, j.ID(), len(items), short(start))
	return j.Run(ctx)
}

// planItems are the checkpoint items of a shard's or the gatherer's job:
// the given items of the plan, pending, in the order given.
func planItems(plan *Plan, ids []string) []*jobstore.CheckpointItem {
	byID := make(map[string]PlanItem, len(plan.Items))
	for _, it := range plan.Items {
		byID[it.ID] = it
	}
	out := make([]*jobstore.CheckpointItem, 0, len(ids))
	for _, id := range ids {
		it := byID[id]
		out = append(out, &jobstore.CheckpointItem{ItemOutcome: runner.ItemOutcome{ItemID: id, State: jobstore.ItemPending, Attempts: it.Attempts}, Index: it.Index, Data: it.Data})
	}
	return out
}
