package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/runner/trace"
)

// recordFailure makes a failed attempt durable before anything else
// happens (backoff sleep, next attempt, DLQ): the checkpoint counts it and
// keeps its failure detail until a DLQ record holds it. A checkpoint write
// failure is a warning; the attempt is still kept in memory.
func (ir *itemRunner) recordFailure(f dlq.Failure) {
	d, it := ir.d, ir.it
	ir.failures = append(ir.failures, f)
	ir.failedNow++
	enc, err := json.Marshal(f)
	if err != nil {
		d.warn(fmt.Sprintf("encode the failure of %s attempt %d: %v", it.id, f.Attempt, err))
		return
	}
	if err := it.attemptFailed(f.Attempt, enc); err != nil {
		d.warn(fmt.Sprintf("could not checkpoint the failure of %s attempt %d: %v", it.id, f.Attempt, err))
	}
}

// lostAttempt is the failure of the item's attempt a, which was running
// when the process running the job died: its outcome died with it.
func (ir *itemRunner) lostAttempt(a inFlightAttempt) *dlq.Failure {
	since := ir.d.now().UTC()
	var took time.Duration
	if a.since != nil {
		took = max(since.Sub(*a.since), 0)
		since = a.since.UTC()
	}
	msg := fmt.Sprintf("attempt %d was running when the process running the job died (killed or crashed); its outcome is unknown (not counted against the item's attempts)", a.attempt)
	return &dlq.Failure{
		Attempt: a.attempt, At: since, Type: &dlq.ErrorType{Kind: dlq.Unknown}, Message: msg,
		Context: []string{fmt.Sprintf("Executing agent %s for %s", orDash(a.agent), ir.it.id), "The process running the job died"},
		AgentID: a.agent, Step: "agent_execution", Duration: took,
	}
}

// failureOf turns a failed attempt into a DLQ failure detail.
func (ir *itemRunner) failureOf(attempt int, f *step.Failure, took time.Duration) dlq.Failure {
	d := ir.d
	var t *dlq.ErrorType
	if f.Type.Kind != "" {
		tt := f.Type
		t = &tt
	}
	if diskFull(f) {
		// A step or git command that failed because the disk is full is
		// ResourceExhausted, whatever its exit code.
		t = &dlq.ErrorType{Kind: dlq.ResourceExhausted}
	}
	path := ""
	if ir.tree != nil {
		path = ir.tree.Path
	}
	ctx := []string{
		fmt.Sprintf("Executing agent %s for %s", ir.agentID, ir.it.id),
		fmt.Sprintf("Running step: %s", d.redact(brief.OneLine(orDash(f.Step), 200))),
	}
	if path != "" {
		ctx = append(ctx, "In worktree: "+path)
	}
	return dlq.Failure{
		Attempt:    ir.base + attempt,
		At:         d.now().UTC(),
		Type:       t,
		Message:    d.redact(f.Message),
		Context:    ctx,
		StackTrace: d.redact(brief.LastLines(f.Tail, 30)),
		AgentID:    ir.agentID,
		Step:       d.redact(orDash(f.Step)),
		Duration:   took,
		LogPath:    orAttemptLog(f.LogPath, ir.attemptLog),
	}
}

// orAttemptLog is a failure's log: the Claude transcript, else the
// attempt's output log.
func orAttemptLog(transcript, attemptLog string) string {
	if transcript != "" {
		return transcript
	}
	return attemptLog
}

// diskFull reports whether a failure says the disk is full: in its message
// or the last lines of its output. Timeouts keep their type.
func diskFull(f *step.Failure) bool {
	if f.Type.Kind == dlq.Timeout {
		return false
	}
	return dlq.SaysDiskFull(f.Message) || dlq.SaysDiskFull(brief.LastLines(f.Tail, 5))
}

// failed applies on_item_failure after the attempts are exhausted.
func (ir *itemRunner) failed(ctx context.Context, err error, duration time.Duration) {
	d, it := ir.d, ir.it
	path, branch := "", ir.branch
	if ir.tree != nil {
		path = ir.tree.Path
	}
	keep := d.wf.PreserveFailedWorktrees && ir.tree != nil
	last := ir.failures[len(ir.failures)-1]
	lastType := dlq.Classify(last.Message)
	if last.Type != nil {
		lastType = *last.Type
	}
	if ir.tree != nil && !keep {
		ir.release(ctx, false)
	} else if keep {
		ir.release(ctx, true)
		d.logf("  preserved failed worktree of %s: %s (branch %s)", d.itemName(it), path, branch)
	}
	note := ""
	if path == "" {
		path = d.paths.AgentWorktree(ir.agentID)
		note = fmt.Sprintf("[worktree_artifacts] never created: the item failed before worktree %s existed", path)
	} else {
		note = artifactsNote(d.isolation, keep, path, branch)
	}
	d.events.Emit(event.AgentFailed{AgentID: ir.agentID, ItemID: it.id, Error: last.Message, ErrorType: lastType, Attempts: ir.attempts, JSONLogLocation: event.StrOrNil(last.LogPath), RetryEligible: dlq.ReprocessEligible(lastType, last.Message), CostUSD: ir.cost()})

	policy := d.wf.ErrorPolicy.OnItemFailure
	state := ItemDLQ
	if policy == config.OnFailureSkip {
		state = ItemSkipped
	}
	if policy == config.OnFailureCustom && ir.runCustomHandler(ctx, last, lastType) {
		state = ItemSkipped
	}
	if trace.Recorded(ir.span) {
		ir.signature = dlq.Signature(lastType, last.Message)
	}
	if state != ItemDLQ {
		d.events.Emit(event.ItemSkippedEvent{ItemID: it.id, Error: last.Message, Policy: policy})
		ir.finish(state, last.Message, lastType.String(), duration, nil)
		d.itemFailed(it.id, lastType, last.Message, policy)
		return
	}
	status := dlq.StatusFailed
	if lastType.Kind == dlq.Timeout {
		status = dlq.StatusTimeout
	}
	rec := dlq.FromAgentResult(dlq.AgentResult{
		ItemID: it.id, ItemData: ir.raw, Status: status, Failures: ir.failures,
		WorktreePath: path, BranchName: branch, UncommittedChanges: ir.uncommitted,
		ErrorLogs: strings.TrimRight(note+"\n"+brief.LastLines(ir.errorLogs, 100), "\n"),
	})
	// The record is checkpointed before it is written: a crash or a write
	// failure leaves the item failed-unrecorded, and resume writes it.
	var pending json.RawMessage
	if rec != nil {
		enc, err := dlq.Encode(*rec)
		if err != nil {
			d.warn(fmt.Sprintf("encode the DLQ record of %s: %v", it.id, err))
		}
		pending = enc
	}
	if rec != nil {
		ir.signature = rec.ErrorSignature
	}
	ir.finish(state, last.Message, lastType.String(), duration, pending)
	if rec != nil && pending != nil {
		if err := writeRecord(ctx, d.state, d.events, d.store, it.row, *rec); err != nil {
			d.warn(fmt.Sprintf("could not add item %s to the DLQ; it stays failed-unrecorded in the checkpoint and `resume %s` writes its record: %v", it.id, d.jobID, err))
		}
	}
	d.itemFailed(it.id, lastType, last.Message, policy)
}

// writeRecord stores rec in the DLQ (dlq.Store.AddOnce) and then clears the
// item's pending record and failures from the checkpoint; events, when
// not nil, gets the DLQItemAdded event.
func writeRecord(ctx context.Context, state *jobstore.State, events *event.Log, store *dlq.Store, it *jobstore.CheckpointItem, rec dlq.DeadLetteredItem) error {
	stored, added, err := store.AddOnce(rec)
	if err != nil {
		return err
	}
	if added && events != nil {
		events.Emit(event.DLQItemAdded{ItemID: stored.ItemID, ErrorSignature: stored.ErrorSignature, FailureCount: stored.FailureCount})
	}
	fault(ctx, FaultDLQAdded, it.ItemID)
	return recordStored(state, it)
}

// finish records the item's final state and reports it.
//
// pending is the encoded DLQ record of a dlq item (nil otherwise): it
// replaces the item's failures in the checkpoint until the record is
// stored. A merged or skipped item drops its failures.
func (ir *itemRunner) finish(state ItemState, errMsg, errType string, took time.Duration, pending json.RawMessage) {
	d, it := ir.d, ir.it
	d.persisted("item "+it.id+" finished", it.finish(ending{
		state: state, attempts: ir.base + ir.attempts, err: errMsg, errType: errType, commits: ir.commits,
		took: took, log: ir.lastLog, timings: ir.timings(), mergeCommit: ir.mergeCommit, pending: pending,
	}))
	d.itemEnded(state)
	// The attempts of this job (or redrive), across its interrupted runs:
	// a resumed item whose attempts all ran before a crash made 0 now.
	tried := it.attemptsSpent()
	switch state {
	case ItemMerged:
		d.logf("✓ %s succeeded (%d commit(s), %d attempt(s), %s)", d.itemName(it), ir.commits, tried, took.Round(time.Millisecond))
	case ItemSkipped:
		d.logf("– %s skipped after %d attempt(s): %s", d.itemName(it), tried, brief.OneLine(errMsg, 200))
	default:
		d.logf("✗ %s failed after %d attempt(s) → DLQ [%s] %s", d.itemName(it), tried, errType, brief.OneLine(errMsg, 200))
	}
	d.hooks.ItemFinished(it.outcome(), d.redact(ir.log.String()))
}

// checkThresholds stops the job when the failure policy says so.
func (j *job) checkThresholds(policy string) {
	ep := j.wf.ErrorPolicy
	failed := j.failures.Load()
	done := j.finished.Load()
	switch {
	case policy == config.OnFailureStop:
		j.stop("on_item_failure: stop")
	case !ep.ContinueOnFailure:
		j.stop("continue_on_failure: false")
	case ep.MaxFailures > 0 && failed >= int64(ep.MaxFailures):
		j.stop(fmt.Sprintf("max_failures (%d) reached", ep.MaxFailures))
	case ep.FailureThreshold > 0 && done >= 10 && float64(failed)/float64(done) > ep.FailureThreshold:
		j.stop(fmt.Sprintf("failure rate %.0f%% exceeds failure_threshold %.0f%%", 100*float64(failed)/float64(done), 100*ep.FailureThreshold))
	}
}

// runCustomHandler runs on_item_failure: custom handler steps in the parent
// worktree with the item and the error; true when it succeeded.
func (ir *itemRunner) runCustomHandler(ctx context.Context, last dlq.Failure, t dlq.ErrorType) bool {
	d := ir.d
	steps := d.wf.ErrorPolicy.CustomHandler
	if len(steps) == 0 {
		return false
	}
	vars := ir.vars(ir.base + ir.attempts)
	vars["error"] = map[string]any{"message": last.Message, "type": t.String(), "step": last.Step}
	sc := &step.Context{Dir: d.parentDir, Vars: vars, Env: append(append([]string{}, d.baseEnv...), interp.ItemEnv(ir.data, ir.it.id, ir.it.index, d.total(), ir.base+ir.attempts)...), Log: ir.log}
	d.mergeMu.Lock() // the parent worktree is shared with merges
	defer d.mergeMu.Unlock()
	if f := d.steps.Run(ctx, steps, sc); f != nil {
		d.warn(fmt.Sprintf("custom failure handler for %s failed: %s; the item goes to the DLQ", ir.it.id, f.Message))
		return false
	}
	return true
}

// artifactsNote says in a DLQ record's error_logs whether the worktree and
// branch named by worktree_artifacts still exist, since the record's shape
// has no field for it: kept (preserve_failed_worktrees) or gone.
func artifactsNote(isolation Isolation, keep bool, path, branch string) string {
	if keep {
		if dirExists(path) {
			return fmt.Sprintf("[worktree_artifacts] preserved: worktree %s and branch %s were kept for debugging (preserve_failed_worktrees); `prodigy-action worktree clean-orphaned` removes them once the job completed", path, branch)
		}
		return fmt.Sprintf("[worktree_artifacts] not preserved: keeping worktree %s failed; it no longer exists", path)
	}
	if isolation == IsolationFresh {
		return fmt.Sprintf("[worktree_artifacts] removed: worktree %s was removed after the failure and branch %s is deleted when the job ends (set preserve_failed_worktrees: true to keep them)", path, branch)
	}
	return fmt.Sprintf("[worktree_artifacts] removed: worktree %s was reset for other items (pool isolation) and branch %s is deleted when the job ends (set preserve_failed_worktrees: true to keep them)", path, branch)
}
