package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner/agentuser"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/progress"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/spend"
	"github.com/prodigy-action/prodigy-action/validate"
)

// runJob executes a workflow as a new job: setup in a parent worktree on the
// results branch, every item in its own agent worktree with retries, merges
// into the results branch, failures into the DLQ, then reduce. The user's
// checkout is never modified.
//
// It returns the job's Result and nil when the job completed (items in the
// DLQ do not fail it); a *UsageError when nothing was run; an error wrapping
// ErrJobFailed or ErrInterrupted (with a Result) otherwise.
func runJob(ctx context.Context, o options) (*Result, error) {
	o.defaults()
	j, head, err := prepare(ctx, &o)
	if err != nil {
		return nil, err
	}
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := j.create(ctx, &o, head); err != nil {
		j.rollback()
		return nil, err
	}
	defer j.events.Close()
	return j.execute(ctx, nil)
}

// prepare validates everything that can be checked before state exists.
func prepare(ctx context.Context, o *options) (*job, string, error) {
	wf := o.Workflow
	if wf == nil {
		return nil, "", usage(errors.New("no workflow given"))
	}
	if o.Home == "" {
		return nil, "", usage(errors.New("no state directory given"))
	}
	git, err := gitops.New(o.RepoDir, agentuser.GitOptions(o.Git, o.AgentUser))
	if err != nil {
		return nil, "", usage(err)
	}
	head, err := git.Head(ctx, git.TopLevel())
	if err != nil {
		return nil, "", usage(fmt.Errorf("repository %s has no commit to start from: %w", git.TopLevel(), err))
	}
	if o.JobID == "" {
		o.JobID = newJobID(o.Clock.Now())
	}
	if err := ValidJobID(o.JobID); err != nil {
		return nil, "", usage(err)
	}
	paths := Paths{Home: o.Home, Repo: jobstore.RepoKey(o.Home, git.TopLevel(), ""), JobID: o.JobID}
	if jobstore.HasCheckpoint(paths) {
		return nil, "", usage(fmt.Errorf("job %s already exists; use `resume %s`", o.JobID, o.JobID))
	}
	branch := o.Branch
	if branch == "" {
		branch = "prodigy/" + o.JobID
	}
	if err := git.ValidateBranchName(ctx, branch); err != nil {
		return nil, "", usage(fmt.Errorf("invalid results branch name %q", branch))
	}
	if ok, err := git.BranchExists(ctx, branch); err != nil {
		return nil, "", usage(err)
	} else if ok {
		return nil, "", usage(fmt.Errorf("results branch %s already exists; pick another --branch or --job-id", branch))
	}
	maxPar := o.MaxParallel
	if maxPar <= 0 {
		if maxPar, err = wf.ResolveMaxParallel(o.Getenv); err != nil {
			return nil, "", usage(err)
		}
	}
	if err := items.Check(validate.ItemOptions(wf, "", nil)); err != nil {
		return nil, "", usage(err)
	}
	if err := errors.Join(validate.Interpolation(wf)...); err != nil {
		return nil, "", usage(err)
	}
	j, err := newJob(o, wf, git, paths, branch, maxPar)
	if err != nil {
		return nil, "", usage(err)
	}
	return j, head, nil
}

// newJob builds the in-memory job (no state is written).
func newJob(o *options, wf *config.Workflow, git *gitops.Client, paths Paths, branch string, maxPar int) (*job, error) {
	bash, claude := "bash", o.ClaudeCommand
	if !o.noTools {
		var err error
		if bash, claude, err = lookTools(wf, o.ClaudeCommand); err != nil {
			return nil, err
		}
	}
	pol, err := itemPolicy(wf)
	if err != nil {
		return nil, err
	}
	au, err := agentuser.New(o.AgentUser, maxPar, paths.WorktreeRoot())
	if err != nil {
		return nil, err
	}
	grace := o.InterruptGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	killGrace := o.KillGrace
	if killGrace <= 0 {
		killGrace = procsup.DefaultKillGrace
	}
	j := &job{
		settings: settings{
			id: paths.JobID, paths: paths, wf: wf, branch: branch, parentDir: paths.ParentWorktree(), maxParallel: maxPar,
			maxCost:   o.MaxCostUSD,
			isolation: o.Isolation, mergeMode: o.Merge, itemPolicy: pol, agentTO: wf.Map.AgentTimeout, interruptGrace: grace,
			environ: o.Environ, clock: o.Clock, rand: o.Rand, started: o.Clock.Now(),
			requireItems: o.RequireItems, noItems: o.NoItems, tracer: o.Tracer, deferTeardown: o.DeferTeardown,
		},
		services: services{
			git:    git,
			steps:  &step.Runner{Git: git, Bash: bash, Claude: claudecode.Command{Path: claude, Args: o.ClaudeArgs, Workflow: wf.Claude, Overrides: o.Claude}, Grace: killGrace, Clock: o.Clock, Rand: o.Rand, Fault: fault},
			stderr: o.Stderr, hooks: o.Hooks, agents: au,
		},
	}
	j.cool = spend.NewCooldown(o.Clock, func(until time.Time, reason string) {
		j.events.Emit(event.FleetCooldownStarted{Until: until, Reason: reason})
	},
		func() { j.events.Emit(event.FleetCooldownEnded{}) })
	j.breaker = &spend.Breaker{Limit: wf.ErrorPolicy.CircuitBreaker}
	j.red = jobRedactor(o.Redactor, o.Environ, wf)
	j.redact = j.red.String
	j.steps.Red = j.red
	j.prog = progress.New(&j.logMu, o.Stderr, o.ProgressInterval, o.Clock.Now)
	j.trees, err = j.newTrees(o.Sparse)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// itemPolicy is the retry policy of map items: the configured one, the
// defaults for `on_item_failure: retry`, else a single attempt.
func itemPolicy(wf *config.Workflow) (retry.Policy, error) {
	rc, _ := validate.ItemRetryConfig(wf.ErrorPolicy)
	return validate.RetryPolicy(rc)
}

// create writes the job's initial state in an order a crash cannot break:
// the workflow copy, then the checkpoint (the job's intent: from here on
// `status` lists the job and `resume` finishes it), then the results
// branch and parent worktree (recover recreates them when a crash came
// first), then the rest of the state (open).
func (j *job) create(ctx context.Context, o *options, head string) error {
	now := j.now().UTC()
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: j.id, Repo: j.paths.Repo, RepoDir: j.git.TopLevel(),
		WorkflowPath: absPath(j.wf.Path), WorkflowName: j.wf.Name, ResultsBranch: j.branch, BaseCommit: head,
		ParentWorktree: j.parentDir, Isolation: string(j.isolation), Merge: string(j.mergeMode), MaxParallel: j.maxParallel,
		ClaudeCommand: o.ClaudeCommand, ClaudeArgs: o.ClaudeArgs, ClaudeOverrides: claudecode.EncodeOverrides(o.Claude), Sparse: j.trees.FlagSparse(),
		Status: StatusRunning, Phase: jobstore.PhaseSetup, StartedAt: now, Vars: map[string]string{}}, Items: []*jobstore.CheckpointItem{}}
	if data, err := os.ReadFile(j.wf.Path); err == nil {
		if err := jobstore.SaveWorkflowCopy(j.paths, j.red.Bytes(data)); err != nil {
			return err
		}
	}
	j.state = jobstore.NewState(j.paths, cp, j.now)
	if err := j.state.Update(func(*jobstore.Checkpoint) {}); err != nil {
		return fmt.Errorf("record the job: %w", err)
	}
	fault(ctx, FaultJobIntent, j.id)
	if err := j.trees.CreateParent(ctx, head); err != nil {
		return fmt.Errorf("create the parent worktree: %w", err)
	}
	fault(ctx, FaultJobCreated, j.id)
	return j.open(ctx, cp, false)
}

// open attaches the job to its checkpoint and opens logs, DLQ and orphans;
// resumed selects the job_resumed event over job_started.
func (j *job) open(ctx context.Context, cp *jobstore.Checkpoint, resumed bool) error {
	if j.state == nil {
		j.state = jobstore.NewState(j.paths, cp, j.now)
	}
	j.costAtOpen = j.state.JobCostUSD()
	j.state.RedactWith(j.red.JSON)
	j.guard = j.newGuard()
	j.events = event.Open(j.paths, j.now, func(m string) { j.warn(m) })
	j.events.Redact = j.red.JSON
	j.agentSeq.Store(int64(cp.NextAgent))
	store, err := openDLQ(j.paths, dlq.Options{
		Now:    j.now,
		Redact: j.red.JSON,
		Warn:   func(m string) { j.warn("DLQ: " + m) },
		OnEvict: func(ids []string) {
			j.events.Emit(event.DLQItemsEvicted{ItemIDs: ids, Count: len(ids)})
		},
	})
	if err != nil {
		return fmt.Errorf("open the DLQ: %w", err)
	}
	j.store = store
	j.loadDLQIDs(ctx)
	if j.orphans, err = jobstore.OpenOrphans(j.paths, cp.RepoDir); err != nil {
		return err
	}
	ident, err := j.git.IdentityEnv(ctx)
	if err != nil {
		return err
	}
	j.vars = map[string]string{}
	for k, v := range j.wf.Env {
		j.vars[k] = v
	}
	for k, v := range cp.Vars {
		j.vars[k] = v
	}
	env := step.WithEnv(filterEnv(j.environ), ident)
	env = append(env, step.EnvPairs(j.wf.Env)...)
	env = append(env, "PRODIGY_JOB_ID="+j.id, "PRODIGY_RESULTS_BRANCH="+j.branch, "GIT_TERMINAL_PROMPT=0")
	j.baseEnv = env
	j.state.ReadHead(func(h *jobstore.CheckpointHead) {
		j.rebase = resumed && h.Status == StatusCompleted && h.ResultsVerified != ""
	})
	if err := j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.Status = StatusRunning; j.startBudget(h, j.costAtOpen) }); err != nil {
		return err
	}
	j.startJobSpan(resumed)
	started := event.JobStarted{Workflow: j.wf.Name, ResultsBranch: j.branch, MaxParallel: j.maxParallel, TraceID: j.traceID}
	if resumed {
		j.events.Emit(event.JobResumed(started))
	} else {
		j.events.Emit(started)
	}
	return nil
}

// filterEnv drops variables that would confuse child git processes run in
// worktrees (a GIT_DIR inherited from a hook, for example).
func filterEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func newJobID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("mapreduce-%s-%s", now.UTC().Format("20060102_150405"), hex.EncodeToString(b[:]))
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
