package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/runner/trace"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
	"github.com/prodigy-action/prodigy-action/spend"
)

// itemRunner runs one item in this process: all its attempts, the merge,
// cleanup and the on_item_failure policy. One per item; d holds what it
// uses of its job (settings, shared services) and how it reports to it.
type itemRunner struct {
	d  *itemDeps
	it *item
	// agentNum numbers the item's agent (agent-N), unique across the runs
	// of the job.
	agentNum int
	data     any
	// raw is the item's data as stored (data holds it too); dataErr says
	// why it could not be read.
	raw     json.RawMessage
	dataErr error
	agentID string
	branch  string
	// base is the number of attempts made by earlier runs of the job (or
	// failure_count of a redriven record), so attempt numbers continue.
	base     int
	attempts int
	// failures are the item's failed attempts not yet in a DLQ record:
	// those persisted by earlier runs, then this run's. failedNow counts
	// this run's.
	failures  []dlq.Failure
	failedNow int
	tree      *worktree.Tree
	log       *procsup.TailBuffer
	commits   int
	lastLog   string
	// artifacts of the last failed attempt
	uncommitted, errorLogs string
	// wall-clock split of the item's time
	tPrepare, tSteps, tMerge, tCleanup time.Duration
	began                              time.Time
	// spend is the item's cost in this run; reservation what it reserved
	// from the job budget (budget.go).
	spend       *spend.ItemSpend
	reservation float64
	priorCost   float64
	priorTokens jobstore.Tokens
	// waits counts the item's rate-limited attempts (ratelimit.go).
	waits int
	// mergeCommit is the results branch commit that holds the item's work
	// after a successful attempt (package runner/guard).
	mergeCommit string
	// span is the item's span, attemptSpan its current attempt's
	// (tracing.go); signature the error_signature it failed with.
	span, attemptSpan Span
	signature         string
	// attemptLog is the current attempt's output log (Paths.AttemptLog).
	attemptLog string
}

// run takes the item to a final state (merged, skipped, dlq) or back to
// pending when the job is interrupted. ctx is what agents run under; no
// new attempt starts once the job halts (an interrupt; ctx outlives that
// by the interrupt grace period).
func (ir *itemRunner) run(ctx context.Context) {
	d, it := ir.d, ir.it
	defer ir.releaseBudget()
	ir.span = trace.Or(d.mapSpan).Start(SpanStart{Kind: SpanItem, ItemID: it.id, ItemLabel: it.label})
	if trace.Recorded(ir.span) {
		defer func() { ir.span.End(ir.itemSpanEnd()) }()
	}
	ir.began = time.Now()
	start := d.now()

	// The attempt budget spans interruptions: attempts persisted by earlier
	// runs of the job count against it.
	pol := d.policy
	left := max(pol.Attempts, 1) - it.attemptsSpent()
	var err error
	if left <= 0 && len(ir.failures) > 0 {
		// Every attempt ran before a crash; only the outcome is missing.
		err = errors.New(ir.failures[len(ir.failures)-1].Message)
	} else {
		pol.Attempts = max(left, 1)
		err = retry.Do(d.halt, pol, retry.Options{Clock: d.clock, Rand: d.rand, OnAttempt: func(a retry.Attempt) {
			if a.Final {
				return
			}
			msg := d.redact(errText(a.Err))
			d.events.Emit(event.AgentRetrying{AgentID: ir.agentID, ItemID: it.id, Attempt: ir.base + a.Number + 1, BackoffMS: a.Delay.Milliseconds(), Error: msg})
			d.logf("↻ %s attempt %d failed (%s); retrying in %s", d.itemName(it), ir.base+a.Number, brief.OneLine(msg, 160), roundDelay(a.Delay))
			fault(ctx, FaultBackoff, it.id)
		}}, func(_ context.Context, attempt int) error {
			ir.attempts = attempt
			if attempt > 1 {
				// The first attempt was marked by announce.
				ir.markInFlight(ir.base + attempt)
			}
			began := d.now()
			f := ir.attemptWithWaits(ctx, attempt)
			if f == nil {
				return nil
			}
			if f.Interrupted {
				return retry.Permanent(errInterrupted)
			}
			ir.recordFailure(ir.failureOf(attempt, f, d.now().Sub(began)))
			if f.Permanent {
				return retry.Permanent(f)
			}
			return f
		})
	}
	duration := d.now().Sub(start)

	switch {
	case err == nil:
		fault(ctx, FaultItemMerged, it.id)
		cs := ir.release(ctx, false)
		d.clearFromDLQ(it.id)
		ir.finish(ItemMerged, "", "", duration, nil)
		d.events.Emit(event.AgentCompleted{AgentID: ir.agentID, ItemID: it.id, DurationMS: duration.Milliseconds(), Commits: ir.commits, JSONLogLocation: event.StrOrNil(ir.lastLog), CleanupStatus: cs, Attempts: ir.attempts, CostUSD: ir.cost()})
	case errors.Is(err, errInterrupted) || ir.failedNow < ir.attempts || (d.halted() && errors.Is(err, d.halt.Err())):
		ir.release(ctx, false)
		d.persisted("item "+it.id+" back to pending", it.backToPending())
		d.prog.Interrupted()
		d.logf("⏸ %s interrupted; it stays pending for resume", d.itemName(it))
	default:
		ir.failed(ctx, err, duration)
	}
}

// announce marks the item running and reports its agent's start (admit
// calls it when no fleet cool-down is on).
func (ir *itemRunner) announce() {
	d, it := ir.d, ir.it
	// The item's first attempt of this run starts now (run makes one
	// unless every attempt of its budget already ran): one journal write
	// marks both.
	var first inFlightAttempt
	if max(d.policy.Attempts, 1)-it.attemptsSpent() > 0 || len(ir.failures) == 0 {
		first = ir.inFlight(ir.base + 1)
	}
	var ceiling float64
	if ir.reservation > 0 {
		ceiling = jobstore.RoundUSD(ir.priorCost + ir.reservation)
	}
	d.persisted("item "+it.id+" started", it.start(ir.agentNum, first, ceiling))
	d.prog.Started()
	d.events.Emit(event.AgentStarted{AgentID: ir.agentID, ItemID: it.id, Attempt: ir.base + 1, Branch: ir.branch})
}

// newItemRunner returns the runner of item it, whose agent is agent-n
// (unique across runs of the job), with the attempts earlier runs
// persisted.
func newItemRunner(d *itemDeps, it *item, n int) *itemRunner {
	agentID := fmt.Sprintf("agent-%d", n)
	ir := &itemRunner{
		d:        d,
		it:       it,
		agentNum: n,
		agentID:  agentID,
		branch:   fmt.Sprintf("prodigy-agent/%s/%s", d.jobID, agentID),
		log:      procsup.NewTailBuffer(256 << 10),
	}
	ir.raw, ir.dataErr = d.state.ItemData(it.row)
	ir.data = ir.raw
	var running inFlightAttempt
	ir.failures, running = it.history()
	if running.attempt > 0 {
		lost := ir.lostAttempt(running)
		// The process running the job died during this attempt: it ran,
		// so it is one failure_history entry; the crash is not the item's
		// fault, so it does not spend the item's attempt budget.
		ir.failures = append(ir.failures, *lost)
		enc, err := json.Marshal(*lost)
		if err != nil {
			d.warn(fmt.Sprintf("encode the lost attempt %d of %s: %v", lost.Attempt, it.id, err))
		}
		if err := it.attemptLost(lost.Attempt, enc); err != nil {
			d.warn(fmt.Sprintf("could not checkpoint the lost attempt %d of %s: %v", lost.Attempt, it.id, err))
		}
		d.logf("%s: attempt %d was running when the process running the job died; it is recorded as failed and does not count against the item's attempts", d.itemName(it), lost.Attempt)
	}
	ir.base = it.attempts()
	return ir
}

// markInFlight durably marks attempt n of the item as started; a write
// that fails is the job's state error (persisted), like every other.
func (ir *itemRunner) markInFlight(n int) {
	ir.d.persisted(fmt.Sprintf("item %s attempt %d started", ir.it.id, n), ir.it.attemptStarted(ir.inFlight(n)))
}

// inFlight is attempt n of the item's agent, starting now.
func (ir *itemRunner) inFlight(n int) inFlightAttempt {
	now := ir.d.now().UTC()
	return inFlightAttempt{attempt: n, agent: ir.agentID, since: &now}
}

// attempt runs the agent template once in a clean worktree and merges the
// agent's commits. A nil result means the attempt succeeded.
func (ir *itemRunner) attempt(ctx context.Context, attempt int) *step.Failure {
	d := ir.d
	if d.agentTO > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d.agentTO, errAgentTimeout)
		defer cancel()
	}
	n := ir.base + attempt
	// Every attempt's output is kept per item (jobstore.CreateAttemptLog); ir.log, the
	// tail of all attempts, feeds the hooks and the Action.
	var out io.Writer = ir.log
	logPath := d.paths.AttemptLog(ir.it.id, n)
	if al := d.paths.CreateAttemptLog(ir.it.id, n, d.red, jobstore.MaxAttemptLog); al != nil {
		defer al.Close()
		out = io.MultiWriter(ir.log, al)
		ir.attemptLog = logPath
	}
	fmt.Fprintf(out, "=== %s attempt %d (%s)\n", ir.it.id, n, ir.agentID)
	head, err := d.git.ResolveRef(ctx, "refs/heads/"+d.branch)
	if err != nil {
		return gitFailure(ctx, "resolve the results branch", err)
	}
	t0 := time.Now()
	if ir.tree == nil {
		t, err := d.trees.Acquire(ctx, ir.agentID, ir.branch, head)
		if err != nil {
			return gitFailure(ctx, "prepare the agent worktree", err)
		}
		ir.tree = t
	} else if err := d.trees.Reset(ctx, ir.tree, head); err != nil {
		// A retry reuses the item's worktree, reset to the new head.
		return gitFailure(ctx, "reset the agent worktree for a retry", err)
	}
	// The agent gets the worktree as a repository of its own; nothing its
	// git does reaches the engine's (gitops/agentrepo.go). With
	// Agents.User it runs as a user of its own, too (package runner/agentuser).
	who, giveBack, err := d.takeUser(fmt.Sprintf("%s-%d", ir.agentID, n))
	if err != nil {
		return gitFailure(ctx, "prepare the agent's user", err)
	}
	defer giveBack()
	var owner *gitops.Owner
	if who != nil {
		owner = &who.Owner
	}
	repo, err := d.git.HandOut(ctx, ir.tree.Path, owner)
	if err != nil {
		return gitFailure(ctx, "hand the worktree to the agent", err)
	}
	ir.tPrepare += time.Since(t0)
	vars := ir.vars(n)
	sc := &step.Context{
		Dir:        ir.tree.Path,
		Vars:       vars,
		Env:        append(append([]string{}, d.baseEnv...), interp.ItemEnv(ir.data, ir.it.id, ir.it.index, d.total(), n)...),
		Log:        out,
		Transcript: d.paths.AttemptTranscript(ir.it.id, n),
		Spend:      ir.spend,
		Span:       ir.attemptSpan,
		Owner:      owner,
	}
	if who != nil {
		sc.Env = step.WithEnv(sc.Env, []string{"HOME=" + who.Home})
	}
	if usesClaude(&config.Workflow{Map: config.MapPhase{AgentTemplate: d.wf.Map.AgentTemplate}}) {
		ir.lastLog = sc.Transcript
	} else if ir.attemptLog != "" {
		ir.lastLog = ir.attemptLog // shell only: the output log is the log
	}
	t0 = time.Now()
	f := d.steps.Run(ctx, d.wf.Map.AgentTemplate, sc)
	ir.tSteps += time.Since(t0)
	if f == nil {
		fault(ctx, FaultAgentCommitted, ir.it.id)
	}
	t0 = time.Now()
	defer func() { ir.tMerge += time.Since(t0) }()
	// Every agent process has ended: the worktree is the engine's again,
	// with the agent's commit taken by object id (also when the attempt
	// failed or was interrupted, for the artifacts and the next attempt).
	theirs, rerr := ir.reclaim(ctx, repo)
	if f != nil {
		if rerr == nil {
			// What the agent left uncommitted is read against its commit.
			_ = repo.SyncIndex(context.WithoutCancel(ctx), theirs)
		}
		ir.captureArtifacts(ctx, f)
		return f
	}
	if rerr != nil {
		if ctx.Err() != nil {
			return gitFailure(ctx, "take the agent's commit", rerr)
		}
		return &step.Failure{Type: dlq.ErrorType{Kind: dlq.CommitValidationFailed}, Step: "merge",
			Message: fmt.Sprintf("could not take the agent's commit: %v", rerr)}
	}
	if ok, err := d.git.IsAncestor(ctx, head, theirs); err != nil {
		return gitFailure(ctx, "check the agent's commit", err)
	} else if !ok {
		return &step.Failure{Type: dlq.ErrorType{Kind: dlq.CommitValidationFailed}, Step: "merge",
			Message: fmt.Sprintf("the agent's commit %s does not build on the results branch commit %s it was given (history rewritten in its worktree); not merged", brief.SHA(theirs), brief.SHA(head))}
	}
	commits, err := d.git.CommitsSince(ctx, ir.tree.Path, head)
	if err != nil {
		return gitFailure(ctx, "list the agent's commits", err)
	}
	ir.commits = len(commits)
	if len(commits) == 0 {
		fmt.Fprintf(out, "no commits to merge\n")
		ir.mergeCommit = "" // nothing of the item's is on the branch to verify
		return nil
	}
	if f := ir.merge(ctx, theirs); f != nil {
		_ = repo.SyncIndex(context.WithoutCancel(ctx), theirs)
		ir.captureArtifacts(ctx, f)
		return f
	}
	return nil
}

// reclaim takes the item's worktree back from its agent
// (gitops.AgentRepo.Reclaim), even after ctx ended: the worktree must be
// the engine's before anything else runs git in it.
func (ir *itemRunner) reclaim(ctx context.Context, repo *gitops.AgentRepo) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return repo.Reclaim(ctx)
}

// gitFailure classifies a git error during an attempt.
func gitFailure(ctx context.Context, what string, err error) *step.Failure {
	if c := context.Cause(ctx); c != nil {
		if errors.Is(c, errAgentTimeout) {
			return &step.Failure{Type: dlq.ErrorType{Kind: dlq.Timeout}, Message: what + ": agent timeout exceeded", Step: "agent"}
		}
		return &step.Failure{Message: "interrupted", Interrupted: true}
	}
	kind := dlq.WorktreeError
	if dlq.IsDiskFull(err) {
		kind = dlq.ResourceExhausted
	}
	return &step.Failure{Type: dlq.ErrorType{Kind: kind}, Message: fmt.Sprintf("%s: %v", what, err), Step: "agent"}
}

// merge merges the agent branch into the results branch. Worktree merges
// run one at a time (they share the parent worktree); tree merges run
// concurrently, gitops serialising only their ref update.
func (ir *itemRunner) merge(ctx context.Context, theirs string) *step.Failure {
	d := ir.d
	msg := fmt.Sprintf("Merge %s (item %s)\n\nProdigy-Job: %s\nProdigy-Item: %s\n", ir.branch, brief.OneLine(ir.it.id, 100), d.jobID, strconv.Quote(ir.it.id))
	var err error
	var before, merged string
	ref := "refs/heads/" + d.branch
	if d.mergeMode == MergeWorktree {
		d.mergeMu.Lock()
		before, _ = d.git.ResolveRef(ctx, ref)
		merged, err = d.git.MergeNoFF(ctx, d.parentDir, theirs, msg)
		d.mergeMu.Unlock()
	} else {
		before, _ = d.git.ResolveRef(ctx, ref)
		merged, err = d.git.MergeTree(ctx, ref, theirs, msg)
	}
	if err == nil {
		// Only a commit the merge made is recorded: "already merged" may
		// name a tip an agent forged around its own commit (package runner/guard).
		ir.mergeCommit = ""
		if merged != before {
			ir.mergeCommit = merged
		}
		fmt.Fprintf(ir.log, "merged %d commit(s) into %s\n", ir.commits, d.branch)
		d.events.Emit(event.WorktreeMerged{AgentID: ir.agentID, ItemID: ir.it.id, Branch: ir.branch, Commits: ir.commits})
		return nil
	}
	var mc *gitops.MergeConflictError
	if errors.As(err, &mc) {
		msg := fmt.Sprintf("merge conflict merging %s into %s", ir.branch, d.branch)
		if len(mc.Files) > 0 {
			msg += ": " + strings.Join(mc.Files, ", ")
		}
		return &step.Failure{Type: dlq.ErrorType{Kind: dlq.MergeConflict}, Message: msg, Step: "merge", Tail: mc.Detail}
	}
	f := gitFailure(ctx, "merge "+ir.branch, err)
	f.Step = "merge"
	return f
}

// captureArtifacts records what the failed worktree looks like; it runs
// even after ctx ended, for a bounded time.
func (ir *itemRunner) captureArtifacts(ctx context.Context, f *step.Failure) {
	d := ir.d
	ir.errorLogs = d.redact(f.Tail)
	if ir.tree == nil || f.Interrupted {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if s, err := d.git.StatusSummary(ctx, ir.tree.Path); err == nil {
		ir.uncommitted = d.redact(s)
	}
}

// release cleans up the item's worktree (see worktrees.release); it runs
// even after ctx ended, for a bounded time.
func (ir *itemRunner) release(ctx context.Context, keep bool) CleanupStatus {
	d := ir.d
	t0 := time.Now()
	defer func() { ir.tCleanup += time.Since(t0) }()
	t := ir.tree
	ir.tree = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return d.trees.Release(ctx, t, ir.agentID, ir.it.id, keep)
}

// vars is the interpolation scope of the item's agent.
func (ir *itemRunner) vars(attempt int) interp.Vars {
	d := ir.d
	v := d.baseVars()
	v["item"] = ir.data
	v["item_id"] = ir.it.id
	v["item_index"] = ir.it.index
	v["item_total"] = d.total()
	v["attempt"] = attempt
	return v
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// timings reports the item's wall-time split; bookkeeping is the rest.
func (ir *itemRunner) timings() *Timings {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	total := time.Since(ir.began)
	rest := total - ir.tPrepare - ir.tSteps - ir.tMerge - ir.tCleanup
	return &Timings{Prepare: ms(ir.tPrepare), Steps: ms(ir.tSteps), Merge: ms(ir.tMerge), Cleanup: ms(ir.tCleanup), Bookkeeping: ms(max(rest, 0))}
}

// roundDelay rounds a backoff delay for people: 1.23s, 9ms, 2m3.46s (the
// exact value is in the events and the DLQ record).
func roundDelay(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
