package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/spend"
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
	defer j.events.close()
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
	git, err := gitops.New(o.RepoDir, agentGitOptions(o))
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
	paths := Paths{Home: o.Home, Repo: RepoKey(o.Home, git.TopLevel()), JobID: o.JobID}
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
	if err := items.Check(ItemOptions(wf, "", nil)); err != nil {
		return nil, "", usage(err)
	}
	if err := checkInterpolationErr(wf); err != nil {
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
	au, err := parseAgentUser(o.AgentUser, maxPar)
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
			steps:  &stepRunner{git: git, bash: bash, claudeCmd: claude, claudeArgs: o.ClaudeArgs, claudeWF: wf.Claude, claudeOver: o.Claude, grace: killGrace, clock: o.Clock, rand: o.Rand},
			stderr: o.Stderr, hooks: o.Hooks,
		},
	}
	if au != nil {
		j.agentUser = au
		if j.agentUIDs, err = au.uids(maxPar); err != nil {
			return nil, err
		}
	}
	j.cool = spend.NewCooldown(o.Clock, func(until time.Time, reason string) {
		j.events.emit(FleetCooldownStarted{Until: until, Reason: reason})
	},
		func() { j.events.emit(FleetCooldownEnded{}) })
	j.breaker = &spend.Breaker{Limit: wf.ErrorPolicy.CircuitBreaker}
	j.red = jobRedactor(o.Redactor, o.Environ, wf)
	j.redact = j.red.String
	j.steps.red = j.red
	j.prog = newProgress(&j.logMu, o.Stderr, o.ProgressInterval)
	j.trees, err = newWorktrees(worktreeDeps{git: j.git, paths: j.paths, parentDir: j.parentDir, branch: j.branch, wf: j.wf,
		isolation: j.isolation, mergeMode: j.mergeMode, clock: j.clock, rand: j.rand, job: j}, o.Sparse)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// itemPolicy is the retry policy of map items: the configured one, the
// defaults for `on_item_failure: retry`, else a single attempt.
func itemPolicy(wf *config.Workflow) (retry.Policy, error) {
	rc, _ := ItemRetryConfig(wf.ErrorPolicy)
	return RetryPolicy(rc)
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
		ClaudeCommand: o.ClaudeCommand, ClaudeArgs: o.ClaudeArgs, ClaudeOverrides: claudeOverrides(o.Claude), Sparse: j.trees.flagSparse,
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
	if err := j.trees.createParent(ctx, head); err != nil {
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
	j.costAtOpen = cp.JobCost()
	j.state.RedactWith(j.red.JSON)
	j.events = openEventLog(j.paths, j.now, func(m string) { j.warn(m) })
	j.events.redact = j.red.JSON
	j.agentSeq.Store(int64(cp.NextAgent))
	store, err := openDLQ(j.paths, dlq.Options{
		Now:    j.now,
		Redact: j.red.JSON,
		Warn:   func(m string) { j.warn("DLQ: " + m) },
		OnEvict: func(ids []string) {
			j.events.emit(DLQItemsEvicted{ItemIDs: ids, Count: len(ids)})
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
	env := withEnv(filterEnv(j.environ), ident)
	env = append(env, envMap(j.wf.Env)...)
	env = append(env, "PRODIGY_JOB_ID="+j.id, "PRODIGY_RESULTS_BRANCH="+j.branch, "GIT_TERMINAL_PROMPT=0")
	j.baseEnv = env
	j.state.Read(func(cp *jobstore.Checkpoint) {
		j.rebase = resumed && cp.Status == StatusCompleted && cp.ResultsVerified != ""
	})
	if err := j.state.Update(func(cp *jobstore.Checkpoint) { cp.Status = StatusRunning; j.startBudget(cp) }); err != nil {
		return err
	}
	j.startJobSpan(resumed)
	started := JobStarted{Workflow: j.wf.Name, ResultsBranch: j.branch, MaxParallel: j.maxParallel, TraceID: j.traceID}
	if resumed {
		j.events.emit(JobResumed(started))
	} else {
		j.events.emit(started)
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
	procRec, err := openProcessRecord(j.paths)
	if err != nil {
		j.warn(err.Error() + " (a resume after a crash may not find this run's processes by their group)")
	}
	defer procRec.close()
	runCtx = withProcessRecord(runCtx, procRec)
	j.prog.start()
	defer j.prog.stop()

	var setupDone bool
	j.state.Read(func(cp *jobstore.Checkpoint) { setupDone = cp.SetupCompleted })
	if !setupDone {
		if len(j.wf.Setup) > 0 {
			j.announce(ctx, -1)
		}
		if err := j.setup(ctx, runCtx); err != nil {
			return j.end(err)
		}
		if err := j.loadItems(ctx); err != nil {
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
	if !setupDone || j.rebase || j.needsVerifiedTip() {
		// The engine made this tip (setup), or a completed run ended
		// there: what agents change from here on is checked
		// (integrity.go).
		if err := j.markVerified(ctx); err != nil {
			return j.end(err)
		}
	}
	j.auditBaseline(ctx)
	defer j.boundHeap()()
	var byID map[string]*jobstore.CheckpointItem
	for pages := 0; ; pages++ {
		page, err := next()
		if err != nil {
			return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
		}
		if len(page) == 0 && pages > 0 {
			break
		}
		var cands []*jobstore.CheckpointItem // nil: every item (the first page)
		if len(page) > 0 {
			err := j.state.UpdateItems(func(cp *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
				if byID == nil {
					byID = make(map[string]*jobstore.CheckpointItem, len(cp.Items))
					for _, it := range cp.Items {
						byID[it.ItemID] = it
					}
				}
				added := mergeItems(cp, page, byID, touch)
				if pages > 0 {
					cands = added
				}
			})
			if err != nil {
				return j.end(fmt.Errorf("%w: %w", ErrJobFailed, err))
			}
		}
		if err := j.mapPhase(ctx, runCtx, cands, pages > 0); err != nil {
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
		if err := j.reduce(ctx, runCtx); err != nil {
			return j.end(err)
		}
	}
	return j.end(nil)
}

// graceContext returns the context agents run under: when ctx ends
// (Ctrl-C, SIGTERM) running agents get a bounded grace period to finish.
func (j *job) graceContext(ctx context.Context) (context.Context, func()) {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		if j.interruptGrace < time.Millisecond { // the Action: stop at once
			j.logf("interrupt received: no new items start; running agents are stopped (SIGTERM, SIGKILL %s later)", j.steps.grace)
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

// setup runs the setup steps in the parent worktree under runCtx; ctx
// ending means an interrupt.
func (j *job) setup(ctx, runCtx context.Context) error {
	j.persisted("setup phase", j.state.Update(func(cp *jobstore.Checkpoint) { cp.Phase = jobstore.PhaseSetup }))
	if len(j.wf.Setup) > 0 {
		j.logf("setup: %d step(s) in %s", len(j.wf.Setup), j.parentDir)
		j.events.emit(PhaseStarted{Phase: jobstore.PhaseSetup})
		vars := j.baseVars()
		span := j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseSetup})
		sc := &stepContext{dir: j.parentDir, vars: vars, env: j.baseEnv, log: j.phaseLog("setup"), transcript: filepath.Join(j.paths.Logs("_setup"), "attempt-1.jsonl"), spend: &spend.ItemSpend{}, span: span}
		f := j.steps.run(runCtx, j.wf.Setup, sc)
		j.savePhaseSpend(sc.spend)
		span.End(j.phaseEnd(f))
		if f != nil {
			if f.Interrupted || ctx.Err() != nil {
				return fmt.Errorf("%w during setup", ErrInterrupted)
			}
			return fmt.Errorf("%w: setup step %q failed: %s", ErrJobFailed, oneLine(f.Step, 120), f.Message)
		}
		captured := map[string]string{}
		for k, v := range vars {
			if s, ok := v.(string); ok && j.vars[k] != s {
				captured[k] = s
			}
		}
		j.persisted("setup values", j.state.Update(func(cp *jobstore.Checkpoint) {
			for k, v := range captured {
				cp.Vars[k] = v
				j.vars[k] = v
			}
		}))
		j.events.emit(PhaseCompleted{Phase: jobstore.PhaseSetup})
	}
	return nil
}

// loadItems runs the input pipeline in the parent worktree.
func (j *job) loadItems(ctx context.Context) error {
	opts := ItemOptions(j.wf, j.parentDir, j.baseEnv)
	opts.Input = j.resolveInput(opts.Input)
	// Items are streamed from the input (items.Each) and their data goes
	// straight to the job's items.jsonl: only their small state stays in
	// memory.
	var list []*jobstore.CheckpointItem
	var spoolErr error
	var err error
	fields := newItemFields(j.wf.Map.AgentTemplate)
	if !j.noItems {
		_, err = items.Each(ctx, opts, func(it items.Item) error {
			fields.add(it.Data)
			ci := &jobstore.CheckpointItem{ItemOutcome: ItemOutcome{ItemID: it.ID, Label: ItemLabel(it.ID, it.Data, j.wf.Map.IDField), State: ItemPending}, Index: it.Index, Data: it.Data}
			if spoolErr = j.state.SpoolItem(ci); spoolErr != nil {
				return spoolErr
			}
			list = append(list, ci)
			return nil
		})
	}
	switch {
	case spoolErr != nil:
		return fmt.Errorf("%w: %w", ErrJobFailed, spoolErr)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%w while loading items", ErrInterrupted)
	case err != nil && strings.Contains(err.Error(), j.parentDir):
		// The parent worktree is the job's internal copy: name paths
		// relative to the repository, and say which version was read.
		where := fmt.Sprintf("in HEAD of %s and in its working tree", j.git.TopLevel())
		if len(j.wf.Setup) > 0 {
			where = fmt.Sprintf("in results branch %s after setup; it starts from HEAD of %s", j.branch, j.git.TopLevel())
		}
		msg := strings.ReplaceAll(err.Error(), j.parentDir+string(filepath.Separator), "")
		return usage(fmt.Errorf("map.input: %s (looked %s)", msg, where))
	case err != nil:
		return usage(fmt.Errorf("map.input: %w", err))
	}
	if err := fields.err(); err != nil {
		return usage(err)
	}
	if len(j.wf.Setup) == 0 {
		j.announce(ctx, len(list))
	}
	j.logf("map: %d item(s), max_parallel %d, %s isolation, %s merge", len(list), min(j.maxParallel, max(len(list), 1)), j.isolation, j.mergeMode)
	return j.state.Update(func(cp *jobstore.Checkpoint) {
		cp.SetupCompleted = true
		cp.Phase = jobstore.PhaseMap
		cp.Items = slices.Clip(list)
	})
}

// resolveInput lets a relative input file that only exists in the user's
// checkout (untracked, not in HEAD) still be found.
func (j *job) resolveInput(in string) string {
	if in == "" || filepath.IsAbs(in) || strings.ContainsAny(in, " \t|;&$<>()") {
		return in
	}
	if _, err := os.Stat(filepath.Join(j.parentDir, in)); err == nil {
		return in
	}
	alt := filepath.Join(j.git.TopLevel(), in)
	if st, err := os.Stat(alt); err == nil && !st.IsDir() {
		return alt
	}
	return in
}

// mergeItems adds redriven items to the checkpoint (byID indexes its
// items and is kept current), replacing existing entries with the same id;
// touch is called before an existing item changes. It returns the
// checkpoint items that are now pending because of extra.
func mergeItems(cp *jobstore.Checkpoint, extra []*jobstore.CheckpointItem, byID map[string]*jobstore.CheckpointItem, touch func(*jobstore.CheckpointItem)) []*jobstore.CheckpointItem {
	var added []*jobstore.CheckpointItem
	for _, e := range extra {
		if cur, ok := byID[e.ItemID]; ok {
			if cur.PendingRecord != nil {
				// Its newest failures are still not in the DLQ: it stays
				// failed-unrecorded (the job reports it) rather than lose them.
				continue
			}
			touch(cur)
			added = append(added, cur)
			cur.State = ItemPending
			cur.Data, cur.DataOff, cur.DataLen = e.Data, 0, 0
			// The redrive's budget starts at the record's failure_count;
			// attempts an interrupted earlier redrive ran count against it.
			cur.BudgetBase = e.Attempts
			cur.Lost = 0 // lost attempts before the budget began are in BudgetBase
			cur.CostBase = cur.CostUSD
			if e.Attempts > cur.Attempts {
				cur.Attempts = e.Attempts
			}
			continue
		}
		e.BudgetBase = e.Attempts
		e.Index = len(cp.Items)
		cp.Items = append(cp.Items, e)
		byID[e.ItemID] = e
		added = append(added, e)
	}
	return added
}

// baseVars is the interpolation scope shared by every step: workflow env
// and setup captures.
func (j *job) baseVars() interp.Vars {
	v := make(interp.Vars, len(j.vars)+8)
	for k, s := range j.vars {
		v[k] = s
	}
	return v
}

func (j *job) total() int {
	var n int
	j.state.Read(func(cp *jobstore.Checkpoint) { n = len(cp.Items) })
	return n
}

// phaseLog returns a writer for setup/reduce output: streamed to stderr
// with a prefix.
func (j *job) phaseLog(phase string) *prefixWriter {
	return &prefixWriter{j: j, prefix: "[" + phase + "] "}
}

// reduce runs the reduce steps in the parent worktree with ${map.*}, under
// runCtx; ctx ending means an interrupt. Progress is checkpointed per
// step: after a crash or an interrupt only the steps not recorded as done
// run, with the captures of the done ones. A step that was killed
// mid-way runs again from the start; if it had moved the results branch
// (committed), the branch is first moved back to where it was when the
// step started, so the step finds the same tree as the first time (and
// never "nothing to commit").
func (j *job) reduce(ctx, runCtx context.Context) error {
	var done bool
	j.state.Read(func(cp *jobstore.Checkpoint) { done = cp.ReduceCompleted })
	if done {
		return nil
	}
	var inReduce bool
	j.state.Read(func(cp *jobstore.Checkpoint) { inReduce = cp.ReduceStepHead != "" || cp.ReduceStepsDone > 0 })
	if !inReduce {
		// Once, when the map phase is over: reduce never runs on a branch
		// agents rewrote. A resumed reduce was checked before it began.
		if _, err := j.checkIntegrity(runCtx); err != nil {
			return err
		}
	}
	j.persisted("reduce phase", j.state.Update(func(cp *jobstore.Checkpoint) { cp.Phase = jobstore.PhaseReduce }))
	if j.mergeMode == MergeTree {
		if err := j.git.SyncWorktree(runCtx, j.parentDir); err != nil {
			return fmt.Errorf("%w: update the parent worktree before reduce: %w", ErrJobFailed, err)
		}
	}
	if len(j.wf.Reduce) > 0 {
		if err := j.reduceSteps(ctx, runCtx); err != nil {
			return err
		}
	}
	if err := j.markVerified(runCtx); err != nil {
		return err
	}
	j.auditBaseline(runCtx) // reduce may configure git; agents are done
	return j.state.Update(func(cp *jobstore.Checkpoint) { cp.ReduceCompleted = true; cp.Phase = jobstore.PhaseDone })
}

// reduceSteps runs the reduce steps not yet recorded as done, one at a
// time, checkpointing each.
func (j *job) reduceSteps(ctx, runCtx context.Context) error {
	var (
		res      *Result
		first    int
		stepHead string
		captured map[string]string
	)
	j.state.Read(func(cp *jobstore.Checkpoint) {
		res = resultOf(cp)
		first, stepHead = cp.ReduceStepsDone, cp.ReduceStepHead
		captured = maps.Clone(cp.ReduceVars)
	})
	n := len(j.wf.Reduce)
	if first >= n {
		return nil
	}
	results, _ := json.Marshal(res.Items)
	vars := j.baseVars()
	vars["map.total"] = res.Total
	vars["map.successful"] = res.Successful
	vars["map.failed"] = res.Failed
	vars["map.skipped"] = res.Skipped
	vars["map.results"] = json.RawMessage(results)
	for k, v := range captured {
		vars[k] = v
	}
	env := append(append([]string{}, j.baseEnv...),
		fmt.Sprintf("PRODIGY_MAP_TOTAL=%d", res.Total), fmt.Sprintf("PRODIGY_MAP_SUCCESSFUL=%d", res.Successful),
		fmt.Sprintf("PRODIGY_MAP_FAILED=%d", res.Failed))
	if first > 0 {
		j.logf("reduce: %d of %d step(s) done before; continuing with step %d", first, n, first+1)
	} else {
		j.logf("reduce: %d step(s) (%d succeeded, %d failed, %d skipped)", n, res.Successful, res.Failed, res.Skipped)
	}
	if stepHead != "" {
		head, err := j.git.ResolveRef(runCtx, "refs/heads/"+j.branch)
		if err != nil {
			return fmt.Errorf("%w: resolve the results branch: %w", ErrJobFailed, err)
		}
		if head != stepHead {
			if err := j.git.ResetHard(runCtx, j.parentDir, stepHead); err != nil {
				return fmt.Errorf("%w: move the results branch back to where reduce step %d started: %w", ErrJobFailed, first+1, err)
			}
			j.logf("reduce: step %d had changed the results branch before it was interrupted; it runs again from %s", first+1, shortSHA(stepHead))
		}
	}
	j.events.emit(PhaseStarted{Phase: jobstore.PhaseReduce})
	span := j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseReduce})
	var failed *stepFailure
	defer func() { span.End(j.phaseEnd(failed)) }()
	for i := first; i < n; i++ {
		head, err := j.git.ResolveRef(runCtx, "refs/heads/"+j.branch)
		if err != nil {
			return fmt.Errorf("%w: resolve the results branch: %w", ErrJobFailed, err)
		}
		// The previous step (or the verified map phase) left head: what
		// this step commits above it is reduce's own (integrity.go).
		if err := j.state.Update(func(cp *jobstore.Checkpoint) { cp.ReduceStepHead, cp.ResultsVerified = head, head }); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
		before := maps.Clone(vars)
		sc := &stepContext{dir: j.parentDir, vars: vars, env: env, log: j.phaseLog("reduce"), first: i, total: n,
			transcript: filepath.Join(j.paths.Logs("_reduce"), "attempt-1.jsonl"), spend: &spend.ItemSpend{}, span: span}
		f := j.steps.run(runCtx, j.wf.Reduce[i:i+1], sc)
		j.savePhaseSpend(sc.spend)
		if f != nil {
			failed = f
			if f.Interrupted || ctx.Err() != nil {
				return fmt.Errorf("%w during reduce", ErrInterrupted)
			}
			return fmt.Errorf("%w: reduce step %q failed: %s", ErrJobFailed, oneLine(f.Step, 120), f.Message)
		}
		fault(ctx, FaultReduceStepDone, strconv.Itoa(i+1))
		newVars := map[string]string{}
		for k, v := range vars {
			s, ok := v.(string)
			if old, had := before[k].(string); ok && (!had || old != s) {
				newVars[k] = s
			}
		}
		if err := j.state.Update(func(cp *jobstore.Checkpoint) {
			cp.ReduceStepsDone = i + 1
			cp.ReduceStepHead = ""
			if len(newVars) > 0 && cp.ReduceVars == nil {
				cp.ReduceVars = map[string]string{}
			}
			maps.Copy(cp.ReduceVars, newVars)
		}); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
	}
	j.events.emit(PhaseCompleted{Phase: jobstore.PhaseReduce})
	return nil
}

// restartReduce makes reduce run again from its first step (a redrive
// added items after reduce had run).
func restartReduce(cp *jobstore.Checkpoint) {
	cp.ReduceCompleted = false
	cp.ReduceStepsDone = 0
	cp.ReduceStepHead = ""
	cp.ReduceVars = nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

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
	purge := j.trees.detach(ctx, j.deferTeardown)
	j.steps.values.close()
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
		if cause == nil || !errors.Is(cause, errIntegrity) {
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
			ErrJobFailed, len(unrec), strings.Join(firstN(unrec, 10), ", "), j.id)
		if cause != nil {
			err = fmt.Errorf("%w; %w", cause, err)
		}
		cause, status = err, StatusFailed
	}
	elapsed := j.now().Sub(j.started).Milliseconds()
	werr := j.state.Update(func(cp *jobstore.Checkpoint) {
		cp.Status = status
		cp.CostUSD = cp.JobCost()
		cp.ElapsedMS += elapsed
		cp.Error = ""
		if cause != nil {
			cp.Error = cause.Error()
		}
	})
	j.prog.stop()
	if err := j.store.Close(); err != nil {
		j.warn(fmt.Sprintf("DLQ: could not write its index: %v", err))
	}
	var res *Result
	j.state.Read(func(cp *jobstore.Checkpoint) { res = resultOf(cp) })
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
	j.endJobSpan(jobSpanEnd(res))
	switch status {
	case StatusCompleted:
		j.events.emit(JobCompleted{Successful: res.Successful, Failed: res.Failed, Skipped: res.Skipped, DurationMS: res.DurationMS})
	case StatusInterrupted:
		j.events.emit(JobPaused{Pending: res.Pending})
	default:
		j.events.emit(JobFailed{Error: res.Error, Pending: res.Pending})
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
		j.events.close()
	}
	if j.trees != nil {
		j.trees.close(ctx)
	}
	if j.steps != nil {
		j.steps.values.close()
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
		line += fmt.Sprintf("; spent $%s (this run $%s): merged items $%s, lost to failures $%s", formatUSD(r.CostUSD),
			formatUSD(r.ExecutionCostUSD), formatUSD(r.MergedCostUSD), formatUSD(r.FailedCostUSD))
		if r.CostPerMergedUSD > 0 {
			line += fmt.Sprintf(", $%s per merged item", formatUSD(r.CostPerMergedUSD))
		}
	}
	return line
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

// uniqueStrings returns s sorted without duplicates.
func uniqueStrings(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// unrecorded lists the failed items whose DLQ record is not stored.
func (j *job) unrecorded() []string {
	var ids []string
	j.state.Read(func(cp *jobstore.Checkpoint) {
		for _, it := range cp.Items {
			if it.State == ItemDLQ && it.PendingRecord != nil {
				ids = append(ids, strconv.Quote(it.ItemID))
			}
		}
	})
	return ids
}

// firstN returns s, or its first n entries and a count of the rest.
func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}

// bigJob is the item count from which a job says what heap bound it set.
const bigJob = 100_000

// heapBoundEvery is how often boundHeap follows the live heap.
const heapBoundEvery = 2 * time.Second

// boundHeap keeps the job's process near its live memory. A job's live
// heap is small and grows slowly (the checkpoint's items, go-git's object
// cache, bounded at 16 MiB), but each item allocates megabytes that die at
// once (trees decoded for a merge, index reads), and with Go's default GC
// target alone the heap's high-water mark, and so the peak RSS, rose with
// the job's length (47 MiB after 1,000 items, 127 MiB after 10,000); for a
// job of a million items, whose items stay in memory, it would reach about
// twice their size between collections. Unless GOGC or GOMEMLIMIT is set,
// it keeps a soft memory limit of 1.25 times the live heap plus 32 MiB
// (64 MiB from bigJob items: the result such a job ends with needs about
// half the items' size again): set after a collection when the job starts,
// then, below bigJob items, moved every heapBoundEvery to follow the live
// heap the runtime measured at its last collection, so a heap that grows
// with the job never makes the collector run without pause (a limit fixed
// at the start doubled the CLI's CPU per item at 10,000 items). The
// returned function stops it and restores the previous limit (call it when
// the job ends).
func (j *job) boundHeap() func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	slack := uint64(32 << 20)
	if j.total() >= bigJob {
		slack = 64 << 20
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.GC()
		live := liveHeap()
		debug.SetMemoryLimit(int64(live*5/4 + slack))
		if j.total() >= bigJob {
			j.logf("map: %d item(s) in memory: heap %d MiB, soft memory limit %d MiB", j.total(), live>>20, (live*5/4+slack)>>20)
			// Its items are most of its heap and were all loaded: the
			// limit stays (bench/scale's 1M job is measured with it).
			<-ctx.Done()
			return
		}
		// A real ticker, not the job's clock: this tunes the runtime
		// and must not spin under a test's clock that never waits.
		t := time.NewTicker(heapBoundEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				debug.SetMemoryLimit(int64(liveHeap()*5/4 + slack))
			}
		}
	}()
	return func() {
		stop()
		<-done
		debug.SetMemoryLimit(prev)
	}
}

// liveHeap is the heap the runtime found live at its last collection
// (runtime/metrics has it since Go 1.21, below the module's floor).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
