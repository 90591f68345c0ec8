package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/internal/memlimit"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/spend"
	"github.com/prodigy-action/prodigy-action/validate"
)

// setup runs the setup steps in the parent worktree under ctx (the run
// context; the job halting means an interrupt).
func (j *job) setup(ctx context.Context) error {
	j.persisted("setup phase", j.state.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseSetup }))
	if len(j.wf.Setup) > 0 {
		j.logf("setup: %d step(s) in %s", len(j.wf.Setup), j.parentDir)
		j.events.Emit(event.PhaseStarted{Phase: jobstore.PhaseSetup})
		vars := j.baseVars()
		span := j.rootSpan().Start(SpanStart{Kind: SpanPhase, Phase: jobstore.PhaseSetup})
		sc := &step.Context{Dir: j.parentDir, Vars: vars, Env: j.baseEnv, Log: j.phaseLog("setup"), Transcript: j.paths.AttemptTranscript("_setup", 1), Spend: &spend.ItemSpend{}, Span: span}
		f := j.steps.Run(ctx, j.wf.Setup, sc)
		j.savePhaseSpend(sc.Spend)
		span.End(j.phaseEnd(f))
		if f != nil {
			if f.Interrupted || j.halted() {
				return fmt.Errorf("%w during setup", ErrInterrupted)
			}
			return fmt.Errorf("%w: setup step %q failed: %s", ErrJobFailed, brief.OneLine(f.Step, 120), f.Message)
		}
		captured := map[string]string{}
		for k, v := range vars {
			if s, ok := v.(string); ok && j.vars[k] != s {
				captured[k] = s
			}
		}
		j.persisted("setup values", j.state.UpdateHead(func(h *jobstore.CheckpointHead) {
			for k, v := range captured {
				h.Vars[k] = v
				j.vars[k] = v
			}
		}))
		j.events.Emit(event.PhaseCompleted{Phase: jobstore.PhaseSetup})
	}
	return nil
}

// loadItems runs the input pipeline in the parent worktree and records
// the items with setup done; verified, when not empty, is recorded as the
// results branch's verified tip in the same write (package runner/guard), which
// spares a million-item job a second rewrite of its checkpoint before its
// first item.
func (j *job) loadItems(ctx context.Context, verified string) error {
	defer memlimit.TightLoad()()
	opts := validate.ItemOptions(j.wf, j.parentDir, j.baseEnv)
	opts.Input = j.resolveInput(opts.Input)
	// Items are streamed from the input (items.Each): their data goes
	// straight to the job's items.jsonl and their rows, in batches, to a
	// temporary file (jobstore.State.BulkAppend), after which they leave
	// memory; the write that records setup done makes them part of the
	// checkpoint, so a crash before it leaves no item recorded (rows an
	// older version recorded before that go first).
	if j.state.Len() > 0 {
		if err := j.state.Update(func(cp *jobstore.Checkpoint) { cp.Items = cp.Items[:0] }); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
	}
	var batch []*jobstore.CheckpointItem
	var n int
	var spoolErr error
	var err error
	fields := validate.NewItemFields(j.wf.Map.AgentTemplate)
	if !j.noItems {
		_, err = items.Each(ctx, opts, func(it items.Item) error {
			fields.Add(it.Data)
			ci := &jobstore.CheckpointItem{ItemOutcome: ItemOutcome{ItemID: it.ID, Label: items.ItemLabel(it.ID, it.Data, j.wf.Map.IDField), State: ItemPending}, Index: it.Index, Data: it.Data}
			if spoolErr = j.state.SpoolItem(ci); spoolErr != nil {
				return spoolErr
			}
			n++
			if batch = append(batch, ci); len(batch) == loadBatch {
				if spoolErr = j.state.BulkAppend(batch); spoolErr == nil {
					fault(ctx, FaultItemsLoaded, j.id)
				}
				batch = nil
			}
			return spoolErr
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
	if err := fields.Err(); err != nil {
		return usage(err)
	}
	if len(batch) > 0 {
		if err := j.state.BulkAppend(batch); err != nil {
			return fmt.Errorf("%w: %w", ErrJobFailed, err)
		}
		fault(ctx, FaultItemsLoaded, j.id)
	}
	if len(j.wf.Setup) == 0 {
		j.announce(ctx, n)
	}
	j.logf("map: %d item(s), max_parallel %d, %s isolation, %s merge", n, min(j.maxParallel, max(n, 1)), j.isolation, j.mergeMode)
	return j.state.UpdateHead(func(h *jobstore.CheckpointHead) {
		h.SetupCompleted = true
		h.Phase = jobstore.PhaseMap
		if verified != "" {
			h.ResultsVerified = verified
		}
	})
}

// loadBatch is how many loaded items are held before their rows are
// written.
const loadBatch = 8192

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

// mergeItems adds redriven items to the checkpoint (byID finds its items
// by id, with the items at extra's candidates in memory, and is kept
// current), replacing existing entries with the same id; touch is called
// before an existing item changes. It returns the positions of the
// checkpoint items that are now pending because of extra.
func mergeItems(items jobstore.ItemsAt, extra []*jobstore.CheckpointItem, byID *itemIndex, touch func(*jobstore.CheckpointItem)) []int {
	var added []int
	for _, e := range extra {
		if pos, ok := byID.find(items, e.ItemID); ok {
			cur := items.At(pos)
			if cur.PendingRecord != nil {
				// Its newest failures are still not in the DLQ: it stays
				// failed-unrecorded (the job reports it) rather than lose them.
				continue
			}
			touch(cur)
			added = append(added, pos)
			redriven(cur, e)
			continue
		}
		e.BudgetBase = e.Attempts
		e.Index = items.Len()
		byID.add(e.ItemID, items.Len())
		added = append(added, items.Len())
		items.Append(e)
	}
	return added
}

// baseVars is the interpolation scope shared by every step: workflow env
// and setup captures.
func (j *job) baseVars() interp.Vars { return scope(j.vars) }

// scope is an interpolation scope holding vars, with room for an item's.
func scope(vars map[string]string) interp.Vars {
	v := make(interp.Vars, len(vars)+8)
	for k, s := range vars {
		v[k] = s
	}
	return v
}

func (j *job) total() int { return j.state.Len() }

// phaseLog returns a writer for setup/reduce output: streamed to stderr
// with a prefix.
func (j *job) phaseLog(phase string) *prefixWriter {
	return &prefixWriter{logf: j.logf, prefix: "[" + phase + "] "}
}
