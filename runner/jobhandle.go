package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/runner/agentuser"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/procrecord"
)

// Job is a handle on one job for operations built on the engine rather
// than in it: the shard package runs one job's setup, items and reduce in
// different processes through it. Engine.SetupJob makes one for a new job
// whose setup runs here; Engine.OpenJob one for a job of an explicit
// identity whose state may already exist. A Job holds the job's lock until
// Close. Its methods are for one goroutine, but for those that say they
// are safe for concurrent use.
type Job struct {
	j      *job
	unlock func()
	origin string // SetupJob: the repository's HEAD
}

// OpenRepo opens the git checkout containing dir with the options of the
// engine's own git processes when agents run as a (Engine.Git, plus
// safe.directory when they run as another user).
func (e *Engine) OpenRepo(dir string, a Agents) (*gitops.Client, error) {
	o := e.options(a)
	return gitops.New(dir, agentuser.GitOptions(o.Git, o.AgentUser))
}

// SetupSpec is what Engine.SetupJob reads: a new job whose setup runs here
// and whose items run elsewhere.
type SetupSpec struct {
	// Workflow, RepoDir, JobID and Branch are as in RunSpec.
	Workflow *config.Workflow
	RepoDir  string
	JobID    string
	Branch   string
	// MaxParallel overrides map.max_parallel when > 0.
	MaxParallel int
	// MaxCostUSD is the job's budget; 0 keeps the workflow's.
	MaxCostUSD float64
	// Start is a branch the results branch starts from when it exists here
	// (the results branch of an earlier job this one builds on); "" or a
	// branch that does not exist starts from the repository's HEAD.
	Start string
}

// SetupJob creates a new job as Run does — checked as Run checks it, its
// checkpoint, results branch and parent worktree written in Run's order
// (FaultJobIntent, FaultJobCreated) — and runs nothing: the caller runs
// setup (Job.Setup), then removes the job but for its results branch
// (Job.Release) or entirely (Job.Discard). The job's state is marked as a
// plan's (jobstore.MarkPlanning) before its checkpoint is written, and what
// an earlier SetupJob of the same job id left when it was killed (parent
// worktree, agent and results branches, state) is removed first, so
// calling SetupJob again starts afresh. Errors are Run's: a *UsageError
// when nothing was written.
func (e *Engine) SetupJob(ctx context.Context, s SetupSpec) (*Job, error) {
	o := e.options(Agents{MaxParallel: s.MaxParallel})
	o.Workflow, o.RepoDir, o.JobID, o.Branch, o.MaxCostUSD = s.Workflow, s.RepoDir, s.JobID, s.Branch, s.MaxCostUSD
	o.defaults()
	if err := discardInterruptedPlan(ctx, &o); err != nil {
		return nil, err
	}
	j, head, err := prepare(ctx, &o)
	if err != nil {
		return nil, err
	}
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	start := head
	if s.Start != "" {
		if tip, err := j.git.ResolveRef(ctx, "refs/heads/"+s.Start); err == nil {
			start = tip
		}
	}
	if err := jobstore.MarkPlanning(j.paths); err != nil {
		unlock()
		return nil, err
	}
	if err := j.create(ctx, &o, start); err != nil {
		j.rollback()
		unlock()
		return nil, err
	}
	return &Job{j: j, unlock: unlock, origin: head}, nil
}

// discardInterruptedPlan removes what a SetupJob of the same job id killed
// before it finished left behind (its state is marked as a plan's): the
// parent worktree, the results and agent branches and the state, so
// planning again starts afresh. A job that is not an interrupted plan is
// left alone.
func discardInterruptedPlan(ctx context.Context, o *options) error {
	if o.JobID == "" || o.Home == "" || ValidJobID(o.JobID) != nil {
		return nil
	}
	git, err := gitops.New(o.RepoDir, agentuser.GitOptions(o.Git, o.AgentUser))
	if err != nil {
		return nil // prepare reports it
	}
	p := Paths{Home: o.Home, Repo: jobstore.RepoKey(o.Home, git.TopLevel(), ""), JobID: o.JobID}
	if !jobstore.IsPlanning(p) {
		return nil
	}
	if jobstore.Locked(p) {
		return usage(fmt.Errorf("job %s is being planned by another process", o.JobID))
	}
	branch := o.Branch
	if branch == "" {
		branch = "prodigy/" + o.JobID
	}
	if err := git.WorktreeRemove(ctx, p.ParentWorktree()); err != nil {
		return fmt.Errorf("remove the parent worktree of the interrupted plan of %s: %w", o.JobID, err)
	}
	_ = git.WorktreePrune(ctx)
	branches, _ := agentBranches(ctx, git, o.JobID)
	if ok, _ := git.BranchExists(ctx, branch); ok {
		branches = append(branches, branch)
	}
	if len(branches) > 0 {
		if err := git.DeleteBranches(ctx, branches); err != nil {
			return fmt.Errorf("delete the branches of the interrupted plan of %s: %w", o.JobID, err)
		}
	}
	return jobstore.RemoveJob(p)
}

// agentBranches lists the job's agent branches (prodigy-agent/<job_id>/…).
func agentBranches(ctx context.Context, git *gitops.Client, jobID string) ([]string, error) {
	names, err := git.Branches(ctx, "prodigy-agent/"+jobID+"/")
	if err != nil {
		return nil, fmt.Errorf("list the agent branches of %s: %w", jobID, err)
	}
	return names, nil
}

// Setup runs a SetupJob's setup phase and loads its items, as Run does
// before its map phase (running agents get the Engine's InterruptGrace
// after an interrupt). A failed setup is ErrJobFailed, an input error a
// *UsageError; the caller then calls Discard. With from (the checkpoint of
// an earlier job this one continues) neither runs: from's captured values
// become the job's and it has no items.
func (j *Job) Setup(ctx context.Context, from *jobstore.Checkpoint) error {
	if from != nil {
		return j.j.state.Update(func(cp *jobstore.Checkpoint) {
			for k, v := range from.Vars {
				cp.Vars[k] = v
			}
		})
	}
	runCtx, stopGrace := j.j.graceContext(ctx)
	defer stopGrace()
	if err := j.j.setup(runCtx); err != nil {
		return err
	}
	return j.j.loadItems(ctx, "")
}

// Origin is the repository's HEAD when SetupJob created the job ("" for
// OpenJob's).
func (j *Job) Origin() string { return j.origin }

// Release removes a SetupJob's job but for its results branch, which stays
// where setup left it: the job's span ends (outcome "planned"), its event
// log closes, FaultPlanWritten fires (what the caller wrote from the job is
// on disk, the job still exists), then its worktrees and state are removed
// (failures are warnings).
func (j *Job) Release(ctx context.Context) {
	jb := j.j
	jb.endJobSpan(SpanEnd{Outcome: "planned"})
	jb.events.Close()
	fault(ctx, FaultPlanWritten, jb.id)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	jb.trees.Close(cctx)
	jb.steps.Close()
	_ = jb.git.WorktreeRemove(cctx, jb.parentDir)
	_ = jb.git.WorktreePrune(cctx)
	if err := jb.store.Close(); err != nil {
		jb.warn(fmt.Sprintf("DLQ: %v", err))
	}
	if err := jobstore.RemoveJob(jb.paths); err != nil {
		jb.warn(fmt.Sprintf("could not remove the planning state of job %s: %v", jb.id, err))
	}
}

// Discard removes everything SetupJob wrote (results branch, worktrees,
// state): nothing half-made is left behind.
func (j *Job) Discard() { j.j.rollback() }

// JobSpec is what Engine.OpenJob reads: a job of an explicit identity
// whose items were planned elsewhere.
type JobSpec struct {
	// Repo is the checkout the job works in (Engine.OpenRepo, with the
	// same Agents.User).
	Repo *gitops.Client
	// Workflow is what the job runs, reduce included: a job whose reduce
	// runs elsewhere is given one without reduce steps.
	Workflow *config.Workflow
	// JobID names the job; Branch is its results branch.
	JobID  string
	Branch string
	// StateSuffix is added to the repository's state name
	// (jobstore.RepoKey): jobs of one id in one repository keep their
	// state apart by it.
	StateSuffix string
	// MaxCostUSD is the job's budget when > 0 (kept in its checkpoint);
	// else the checkpoint's or the workflow's.
	MaxCostUSD float64
	// TraceParent is a W3C traceparent the job's span continues ("" starts
	// a trace).
	TraceParent string
	// Agents says how agents run; Agents.MaxParallel, the job's
	// parallelism, must be > 0.
	Agents Agents
}

// OpenJob builds the job's handle and takes its lock; it writes nothing.
// Its merges are MergeTree's. A workflow the engine cannot run here (no
// bash or Claude command, a bad retry policy or agent user) is a
// *UsageError, as is a job whose lock another process holds. The caller
// then continues the job's state (Reopen) or creates it (Create).
func (e *Engine) OpenJob(s JobSpec) (*Job, error) {
	o := e.options(s.Agents)
	o.defaults()
	o.Merge = MergeTree
	o.JobID, o.MaxCostUSD = s.JobID, s.MaxCostUSD
	if o.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	paths := Paths{Home: o.Home, Repo: jobstore.RepoKey(o.Home, s.Repo.TopLevel(), s.StateSuffix), JobID: s.JobID}
	j, err := newJob(&o, s.Workflow, s.Repo, paths, s.Branch, s.Agents.MaxParallel)
	if err != nil {
		return nil, usage(err)
	}
	j.traceParent = s.TraceParent
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	return &Job{j: j, unlock: unlock}, nil
}

// Reopen continues an OpenJob's job from its checkpoint (the caller checked
// it has one: jobstore.HasCheckpoint(Paths())). A job that completed is
// not opened: its result is returned as done. Otherwise what an earlier
// execution left is put right as resume does — its processes ended, a
// results branch and parent worktree nothing has reached yet made again
// (FaultParentCreated), the worktrees recovered — and the job is opened
// (job_resumed).
func (j *Job) Reopen(ctx context.Context) (done *Result, err error) {
	jb := j.j
	cp, err := jobstore.LoadCheckpoint(jb.paths)
	if err != nil {
		return nil, err
	}
	if cp.Status == StatusCompleted {
		res := resultOf(cp)
		res.OrphanedWorktrees = orEmpty(nil)
		if n, err := countDLQ(jb.paths); err == nil {
			res.DLQCount = n
		}
		return res, nil
	}
	if err := procrecord.EndLeftovers(jb.paths, jb.logf); err != nil {
		return nil, err
	}
	if err := jb.resetUnstartedParent(ctx, cp); err != nil {
		return nil, err
	}
	jb.state = jobstore.NewState(jb.paths, cp, jb.now)
	if err := jb.recover(ctx, cp); err != nil {
		return nil, err
	}
	return nil, jb.open(ctx, cp, true)
}

// CreateSpec is the first state of an OpenJob's job (Job.Create): setup is
// done (elsewhere), its items are in the map phase.
type CreateSpec struct {
	// Base is the commit the job's results start from (the checkpoint's
	// base_commit).
	Base string
	// Start, when set, is the commit the results branch is created at
	// instead of Base (results an earlier attempt made).
	Start string
	// Vars are setup's captured values.
	Vars map[string]string
	// Items are the job's items in input order, pending or final (an
	// earlier attempt's outcomes); the checkpoint owns them from then on.
	Items []*jobstore.CheckpointItem
	// Intent is the fault point fired once the checkpoint is on disk
	// (FaultShardIntent, FaultGatherIntent).
	Intent string
}

// Create writes the job's first state in an order a crash cannot break:
// the checkpoint (the job's intent: from here on Reopen continues it; the
// Intent fault point fires), then the results branch and parent worktree —
// at Start when it is given, else made at Base (FaultParentCreated) unless
// something reached the branch, as Reopen would — then the rest of the
// state (job_started).
func (j *Job) Create(ctx context.Context, s CreateSpec) error {
	jb := j.j
	cp := jb.newCheckpoint(s)
	if err := jb.recordIntent(ctx, cp, s.Intent); err != nil {
		return err
	}
	if s.Start != "" {
		if err := jb.git.WorktreeAdd(ctx, jb.parentDir, jb.branch, s.Start); err != nil {
			return fmt.Errorf("create the parent worktree: %w", err)
		}
	} else if err := jb.resetUnstartedParent(ctx, cp); err != nil {
		return err
	}
	return jb.open(ctx, cp, false)
}

// newCheckpoint is the initial checkpoint of an OpenJob's job. The
// workflow path is left empty and no copy is kept, so `resume` cannot
// continue the job with another workflow.
func (j *job) newCheckpoint(s CreateSpec) *jobstore.Checkpoint {
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: j.id, Repo: j.paths.Repo, RepoDir: j.git.TopLevel(),
		WorkflowName: j.wf.Name, ResultsBranch: j.branch, BaseCommit: s.Base,
		ParentWorktree: j.parentDir, Isolation: string(j.isolation), Merge: string(j.mergeMode), MaxParallel: j.maxParallel,
		Status: StatusRunning, Phase: jobstore.PhaseMap, SetupCompleted: true, StartedAt: j.now().UTC(),
		Vars: map[string]string{}}, Items: s.Items}
	for k, v := range s.Vars {
		cp.Vars[k] = v
	}
	if cp.Items == nil {
		cp.Items = []*jobstore.CheckpointItem{}
	}
	return cp
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

// Run runs what the job has left as Engine.Run does after setup — its
// pending items (the map phase), then its reduce phase (with no reduce
// steps in the workflow only its checks run) — and ends it (see End).
func (j *Job) Run(ctx context.Context) (*Result, error) {
	defer j.j.events.Close()
	j.j.keepRows = true
	return j.j.execute(ctx, nil)
}

// StopReason says why the job stopped starting items (a failure policy,
// its budget, a failure storm, a checkpoint it could not write), "" when
// it did not stop. Safe for concurrent use.
func (j *Job) StopReason() string {
	if !j.j.stopping.Load() {
		return ""
	}
	return j.j.stopReason()
}

// Result is the job's result as its checkpoint holds it now: counts and
// every item's outcome. Safe for concurrent use, also while Run runs.
func (j *Job) Result() *Result {
	res, err := stateResult(j.j.state, j.j.paths, true)
	if err != nil {
		j.j.warn(err.Error())
	}
	return res
}

// Counts tallies the job's items by state (no item is read).
func (j *Job) Counts() jobstore.Counts { return j.j.state.Counts() }

// ReadCheckpoint calls fn with the job's checkpoint, which fn must not
// change. The items it points to may be read after fn returns while the
// job runs nothing (no Run in progress); a change of one of them goes
// through Import, which finds the state's current value. It fails, without
// calling fn, when an item cannot be read back. Safe for concurrent use.
func (j *Job) ReadCheckpoint(fn func(cp *jobstore.Checkpoint)) error { return j.j.state.Read(fn) }

// ItemData is the JSON value of one of the checkpoint's items (read from
// the job's item spool when the checkpoint does not hold it).
func (j *Job) ItemData(it *jobstore.CheckpointItem) (json.RawMessage, error) {
	return j.j.state.ItemData(it)
}

// Imported is an outcome one of the job's items reached elsewhere, for
// Import.
type Imported struct {
	// Item is the checkpoint's item (from ReadCheckpoint).
	Item *jobstore.CheckpointItem
	// Outcome replaces the item's outcome.
	Outcome ItemOutcome
	// Record is the item's DLQ record to store (nil: none).
	Record *dlq.DeadLetteredItem
	// Event is emitted to the job's events once Record is stored (nil:
	// none).
	Event event.Event
}

// Import records outcomes of the job's items reached elsewhere. First, in
// order, each item's DLQ record is stored — through the DLQ's merge of
// records, so attempts the stored record already holds are never added
// twice and importing again changes nothing (dlq_item_added when it added
// any) — and its event emitted. Then one checkpoint write gives every item
// its outcome, clears its failed attempts and keeps as its pending record
// the record that could not be stored (warned about: the item is
// failed-unrecorded until a later import or resume writes it). A crash
// between the two leaves the records stored and the outcomes not: importing
// again completes it. The hooks are not told (the caller decides when).
// It returns the ids of the items whose record was not stored.
func (j *Job) Import(items []Imported) ([]string, error) {
	jb := j.j
	pending := make([]json.RawMessage, len(items))
	var unrecorded []string
	for i, im := range items {
		pending[i] = jb.importRecord(im.Record)
		if im.Event != nil {
			jb.events.Emit(im.Event)
		}
		if pending[i] != nil {
			unrecorded = append(unrecorded, im.Item.ItemID)
		}
	}
	// Only the given items are written (journal entries; the snapshot is
	// rewritten when the journal outgrows it), so the writes of many
	// imports do not grow with the job.
	err := jb.state.UpdateItems(func(cp *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
		for i, im := range items {
			it := cp.Current(im.Item)
			touch(it)
			it.ItemOutcome = im.Outcome
			it.PendingRecord, it.Failures = pending[i], nil
		}
	})
	return unrecorded, err
}

// importRecord stores rec (nil: nothing to store) in the job's DLQ
// through dlq.Store.AddOnce, so attempts the stored record already holds are never
// added twice (an import interrupted after the DLQ write and before the
// checkpoint write is done again). When the write fails it warns and
// returns the encoded record, which the caller keeps in the checkpoint as
// the item's pending record.
func (j *job) importRecord(rec *dlq.DeadLetteredItem) json.RawMessage {
	if rec == nil || len(rec.FailureHistory) == 0 {
		return nil
	}
	stored, added, err := j.store.AddOnce(*rec)
	if err == nil {
		if added {
			j.events.Emit(event.DLQItemAdded{ItemID: stored.ItemID, ErrorSignature: stored.ErrorSignature, FailureCount: stored.FailureCount})
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

// SetStorm records the failure storm that stopped part of the job
// elsewhere (a shard's breaker): End reports it as Result.Storm unless the
// job's own breaker tripped.
func (j *Job) SetStorm(s *Storm) { j.j.shardStorm = s }

// Reduce runs the job's reduce phase as Run does once no item is pending:
// the integrity check, the parent worktree brought up to the results
// branch when there are reduce steps, the reduce steps (after an interrupt
// they get the Engine's InterruptGrace), the results marked verified. It
// does not end the job.
func (j *Job) Reduce(ctx context.Context) error {
	runCtx, stopGrace := j.j.graceContext(ctx)
	defer stopGrace()
	return j.j.reduce(runCtx)
}

// SyncParent brings the job's parent worktree up to the results branch as
// it is now (what Reduce does first), so that Reduce has less left to do:
// a caller merging results one part at a time calls it between parts (in a
// goroutine of its own, while it merges the next). It reads the branch once
// and writes only the parent worktree and its index; it may run
// concurrently with merges through Git and with Import, not with Run,
// Reduce or End.
func (j *Job) SyncParent(ctx context.Context) error {
	return j.j.git.SyncWorktree(ctx, j.j.parentDir)
}

// End ends the job: its final status follows cause (nil: completed;
// ErrInterrupted: interrupted; ErrBudgetExhausted, ErrFailureStorm:
// stopped so; else failed), its worktrees are cleaned up and its event log
// closed. It returns the job's result and cause joined with what ending
// found (a checkpoint write that failed, an integrity problem, failed
// items without a DLQ record).
func (j *Job) End(cause error) (*Result, error) {
	defer j.j.events.Close()
	return j.j.end(cause)
}

// Close releases the job's lock (closing its event log first when it is
// still open). Call it once, when done with the job.
func (j *Job) Close() {
	if j.j.events != nil {
		j.j.events.Close()
	}
	j.unlock()
}

// ID is the job's id.
func (j *Job) ID() string { return j.j.id }

// Branch is the job's results branch.
func (j *Job) Branch() string { return j.j.branch }

// Paths is where the job's state is.
func (j *Job) Paths() Paths { return j.j.paths }

// Git is the job's git client (its repository).
func (j *Job) Git() *gitops.Client { return j.j.git }

// Redactor is the job's redactor: the Engine's plus the workflow's
// secrets. Everything the caller writes from the job goes through it.
func (j *Job) Redactor() *redact.Redactor { return j.j.red }

// TraceParent is the W3C traceparent of the job's span while it is traced
// (after SetupJob, Create or Reopen), so other processes can continue its
// trace; "" when it is not.
func (j *Job) TraceParent() string { return spanTraceParent(j.j.span) }

// Now is the time on the Engine's clock.
func (j *Job) Now() time.Time { return j.j.now() }

// Logf prints a log line to the Engine's Stderr (redacted). Safe for
// concurrent use.
func (j *Job) Logf(format string, args ...any) { j.j.logf(format, args...) }

// Warn logs a warning and passes it to the Engine's hooks. Safe for
// concurrent use.
func (j *Job) Warn(msg string) { j.j.warn(msg) }

// Fault calls the fault hook (SetFaultHook) at point with detail: packages
// built on the engine fire their own fault points with it.
func Fault(ctx context.Context, point, detail string) { fault(ctx, point, detail) }
