package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/spend"
)

// reduce runs the reduce steps in the parent worktree with ${map.*}, under
// ctx (the run context; the job halting means an interrupt). Progress is
// checkpointed per step: after a crash or an interrupt only the steps not
// recorded as done run, with the captures of the done ones. A step that was killed
// mid-way runs again from the start; if it had moved the results branch
// (committed), the branch is first moved back to where it was when the
// step started, so the step finds the same tree as the first time (and
// never "nothing to commit").
func (j *job) reduce(ctx context.Context) error {
	var done bool
	j.state.ReadHead(func(h *jobstore.CheckpointHead) { done = h.ReduceCompleted })
	if done {
		return nil
	}
	var inReduce bool
	j.state.ReadHead(func(h *jobstore.CheckpointHead) { inReduce = h.ReduceStepHead != "" || h.ReduceStepsDone > 0 })
	if !inReduce {
		// Once, when the map phase is over: reduce never runs on a branch
		// agents rewrote. A resumed reduce was checked before it began.
		if _, err := j.checkIntegrity(ctx); err != nil {
			return err
		}
	}
	j.persisted("reduce phase", j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseReduce }))
	if len(j.wf.Reduce) > 0 {
		// Tree merges leave the parent worktree where setup left it: the
		// reduce steps see the merged results. Without reduce steps
		// nothing reads it here (a completed job removes it, any other
		// end brings it up to the branch for resume), so a job of many
		// items does not pay a checkout of all its results for nothing.
		if j.mergeMode == MergeTree {
			if err := j.git.SyncWorktree(ctx, j.parentDir); err != nil {
				return fmt.Errorf("%w: update the parent worktree before reduce: %w", ErrJobFailed, err)
			}
		}
		if err := j.reduceSteps(ctx); err != nil {
			return err
		}
	}
	if err := j.markVerified(ctx); err != nil {
		return err
	}
	j.guard.AuditBaseline(ctx) // reduce may configure git; agents are done
	return j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.ReduceCompleted = true; h.Phase = jobstore.PhaseDone })
}

// reduceSteps runs the reduce steps not yet recorded as done, one at a
// time, checkpointing each.
func (j *job) reduceSteps(ctx context.Context) error {
	var (
		res      *Result
		first    int
		stepHead string
		captured map[string]string
	)
	j.state.ReadHead(func(h *jobstore.CheckpointHead) {
		first, stepHead = h.ReduceStepsDone, h.ReduceStepHead
		captured = maps.Clone(h.ReduceVars)
	})
	res, err := stateResult(j.state, j.paths, j.keepRows)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrJobFailed, err)
	}
	n := len(j.wf.Reduce)
	if first >= n {
		return nil
	}
	results, err := resultsJSON(res)
	if err != nil {
		return fmt.Errorf("%w: read the items' outcomes for reduce: %w", ErrJobFailed, err)
	}
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
		head, err := j.resultsTip(ctx)
		if err != nil {
			return err
		}
		if head != stepHead {
			if err := j.git.ResetHard(ctx, j.parentDir, stepHead); err != nil {
				return fmt.Errorf("%w: move the results branch back to where reduce step %d started: %w", ErrJobFailed, first+1, err)
			}
			j.logf("reduce: step %d had changed the results branch before it was interrupted; it runs again from %s", first+1, brief.SHA(stepHead))
		}
	}
	j.events.Emit(event.PhaseStarted{Phase: jobstore.PhaseReduce})
	span := j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseReduce})
	var failed *step.Failure
	defer func() { span.End(j.phaseEnd(failed)) }()
	for i := first; i < n; i++ {
		head, err := j.resultsTip(ctx)
		if err != nil {
			return err
		}
		// The previous step (or the verified map phase) left head: what
		// this step commits above it is reduce's own (package runner/guard).
		if err := j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.ReduceStepHead, h.ResultsVerified = head, head }); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
		before := maps.Clone(vars)
		sc := &step.Context{Dir: j.parentDir, Vars: vars, Env: env, Log: j.phaseLog("reduce"), First: i, Total: n,
			Transcript: j.paths.AttemptTranscript("_reduce", 1), Spend: &spend.ItemSpend{}, Span: span}
		f := j.steps.Run(ctx, j.wf.Reduce[i:i+1], sc)
		j.savePhaseSpend(sc.Spend)
		if f != nil {
			failed = f
			if f.Interrupted || j.halted() {
				return fmt.Errorf("%w during reduce", ErrInterrupted)
			}
			return fmt.Errorf("%w: reduce step %q failed: %s", ErrJobFailed, brief.OneLine(f.Step, 120), f.Message)
		}
		fault(ctx, FaultReduceStepDone, strconv.Itoa(i+1))
		newVars := map[string]string{}
		for k, v := range vars {
			s, ok := v.(string)
			if old, had := before[k].(string); ok && (!had || old != s) {
				newVars[k] = s
			}
		}
		if err := j.state.UpdateHead(func(h *jobstore.CheckpointHead) {
			h.ReduceStepsDone = i + 1
			h.ReduceStepHead = ""
			if len(newVars) > 0 && h.ReduceVars == nil {
				h.ReduceVars = map[string]string{}
			}
			maps.Copy(h.ReduceVars, newVars)
		}); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
	}
	j.events.Emit(event.PhaseCompleted{Phase: jobstore.PhaseReduce})
	return nil
}

// restartReduce makes reduce run again from its first step (a redrive
// added items after reduce had run).
func restartReduce(h *jobstore.CheckpointHead) {
	h.ReduceCompleted = false
	h.ReduceStepsDone = 0
	h.ReduceStepHead = ""
	h.ReduceVars = nil
}

// resultsJSON is ${map.results}: every item's outcome as a JSON array.
func resultsJSON(res *Result) ([]byte, error) {
	if res.Items != nil {
		return json.Marshal(res.Items)
	}
	b := []byte{'['}
	err := res.EachItem(func(it ItemOutcome) error {
		if len(b) > 1 {
			b = append(b, ',')
		}
		line, err := json.Marshal(it)
		b = append(b, line...)
		return err
	})
	return append(b, ']'), err
}
