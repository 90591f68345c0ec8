package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// GatherOptions configures Gather.
type GatherOptions struct {
	// Run carries the engine settings (Home, RepoDir, Stderr, Clock, …);
	// the workflow, job id and results branch come from the plan.
	Run Options
	// PlanDir is the plan directory.
	PlanDir string
	// Outputs are shard output directories, in any order.
	Outputs []string
}

// Gather completes a sharded job in the repository at Run.RepoDir (the
// planning repository or any clone holding the base; the base is fetched
// from base.bundle when missing). Shard by shard, in shard order, it
// fetches the shard's bundle and merges the shard branch into the results
// branch; when that merge conflicts it replays the shard's item merges one
// at a time (items are known by their Prodigy-Item trailers), so only the
// items that conflict fail, as MergeConflict DLQ records. Every shard's DLQ
// records are imported into the job's DLQ (one record per item id; a
// redriven item's earlier history comes first). When every item has an
// outcome, reduce runs once with ${map.*} over all shards.
//
// A shard whose output is missing or unreadable leaves its items pending:
// the job fails (ErrJobFailed, the message names the shards) and a later
// Gather with the output added completes it. Shards already gathered are
// skipped, so gathering the same outputs twice changes nothing.
func Gather(ctx context.Context, g GatherOptions) (*Result, error) {
	o := g.Run
	o.defaults()
	o.Merge = MergeTree
	g.PlanDir = absPath(g.PlanDir)
	g.Outputs = slices.Clone(g.Outputs)
	for i, d := range g.Outputs {
		g.Outputs[i] = absPath(d) // git runs elsewhere: never relative
	}
	plan, err := LoadPlan(g.PlanDir)
	if err != nil {
		return nil, err
	}
	if o.Home == "" {
		return nil, usage(errors.New("no state directory given"))
	}
	git, err := gitops.New(o.RepoDir, o.Git)
	if err != nil {
		return nil, usage(err)
	}
	if err := plan.ensureBase(ctx, git, g.PlanDir); err != nil {
		return nil, err
	}
	wf, err := plan.workflow(g.PlanDir)
	if err != nil {
		return nil, err
	}
	o.JobID = plan.JobID
	paths := Paths{Home: o.Home, Repo: filepath.Base(git.TopLevel()), JobID: plan.JobID}
	j, err := newJob(&o, wf, git, paths, plan.ResultsBranch, plan.MaxParallel)
	if err != nil {
		return nil, usage(err)
	}
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	outs, unreadable, err := readShardOutputs(plan, g.Outputs)
	if err != nil {
		return nil, err
	}
	for _, u := range unreadable {
		j.warn(u)
	}
	if jobstore.HasCheckpoint(paths) {
		cp, err := jobstore.LoadCheckpoint(paths)
		if err != nil {
			return nil, err
		}
		if cp.Status == StatusCompleted {
			j.logf("job %s is already gathered; nothing to do", j.id)
			res := resultOf(cp)
			res.OrphanedWorktrees = orEmpty(nil)
			if n, err := countDLQ(paths); err == nil {
				res.DLQCount = n
			}
			return res, nil
		}
		if err := endJobLeftovers(paths, j.logf); err != nil {
			return nil, err
		}
		if err := j.recover(ctx, cp); err != nil {
			return nil, err
		}
		if err := j.open(ctx, cp, true); err != nil {
			return nil, err
		}
	} else {
		if err := j.createGather(ctx, plan); err != nil {
			return nil, err
		}
	}
	defer j.events.close()
	return j.gather(ctx, plan, outs)
}

// createGather creates the gatherer's job: the results branch at the base
// (or as the planning repository left it), a parent worktree on it, every
// plan item pending.
func (j *job) createGather(ctx context.Context, plan *Plan) error {
	ok, err := j.git.BranchExists(ctx, j.branch)
	if err != nil {
		return usage(err)
	}
	if ok {
		tip, rerr := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
		if rerr != nil {
			return rerr
		}
		if tip != plan.BaseCommit {
			return usage(fmt.Errorf("results branch %s exists at %s, not at the plan's base %s, and this repository has no gather state for job %s", j.branch, short(tip), short(plan.BaseCommit), j.id))
		}
		err = j.git.WorktreeAddExisting(ctx, j.parentDir, j.branch)
	} else {
		err = j.git.WorktreeAdd(ctx, j.parentDir, j.branch, plan.BaseCommit)
	}
	if err != nil {
		return fmt.Errorf("create the parent worktree: %w", err)
	}
	ids := make([]string, 0, len(plan.Items))
	for _, it := range plan.Items {
		ids = append(ids, it.ID)
	}
	cp := planCheckpoint(j, plan, ids)
	if err := jobstore.SaveWorkflowCopy(j.paths, []byte(plan.Workflow)); err != nil {
		j.rollback()
		return err
	}
	if err := j.open(ctx, cp, false); err != nil {
		j.rollback()
		return err
	}
	return nil
}

// shardOutput is one shard's output directory and its result.json.
type shardOutput struct {
	dir string
	res *ShardResult
}

// readShardOutputs maps shard index → output. An output without a
// readable result.json cannot be told apart, so it is only reported
// (unreadable; its shard then counts as missing); an output of another
// job or base, or a shard given twice, is a usage error.
func readShardOutputs(plan *Plan, dirs []string) (map[int]*shardOutput, []string, error) {
	outs := map[int]*shardOutput{}
	var unreadable []string
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ShardResultFile))
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s is unreadable: %v", d, err))
			continue
		}
		var sr ShardResult
		if err := json.Unmarshal(data, &sr); err != nil || sr.Result == nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s: unreadable %s: %v", d, ShardResultFile, err))
			continue
		}
		if sr.JobID != plan.JobID {
			return nil, nil, usage(fmt.Errorf("shard output %s belongs to job %s, not %s", d, sr.JobID, plan.JobID))
		}
		if sr.Shard < 0 || sr.Shard >= len(plan.Shards) {
			return nil, nil, usage(fmt.Errorf("shard output %s is shard %d; the plan has shards 0 to %d", d, sr.Shard, len(plan.Shards)-1))
		}
		if prev, dup := outs[sr.Shard]; dup {
			return nil, nil, usage(fmt.Errorf("shard %d given twice: %s and %s", sr.Shard, prev.dir, d))
		}
		if sr.BaseCommit != plan.BaseCommit {
			return nil, nil, usage(fmt.Errorf("shard output %s started from %s, not the plan's base %s", d, short(sr.BaseCommit), short(plan.BaseCommit)))
		}
		outs[sr.Shard] = &shardOutput{dir: d, res: &sr}
	}
	return outs, unreadable, nil
}

// gather merges and imports every shard not gathered yet, then reduces
// when no item is left pending.
func (j *job) gather(ctx context.Context, plan *Plan, outs map[int]*shardOutput) (*Result, error) {
	runCtx, stopGrace := j.graceContext(ctx)
	defer stopGrace()
	var missing []string
	for _, sh := range plan.Shards {
		if ctx.Err() != nil {
			return j.end(fmt.Errorf("%w while gathering", ErrInterrupted))
		}
		if j.shardDone(sh) {
			continue
		}
		out := outs[sh.Shard]
		if out == nil {
			missing = append(missing, fmt.Sprintf("shard %d (output missing)", sh.Shard))
			continue
		}
		if err := j.gatherShard(ctx, plan, sh, out); err != nil {
			var ge *gitops.GitError
			if errors.As(err, &ge) || errors.Is(err, errUnreadableShard) {
				j.warn(fmt.Sprintf("shard %d: %v", sh.Shard, err))
				missing = append(missing, fmt.Sprintf("shard %d (output unreadable)", sh.Shard))
				continue
			}
			return j.end(fmt.Errorf("%w: gather shard %d: %w", ErrJobFailed, sh.Shard, err))
		}
	}
	var pending int
	j.state.Read(func(cp *jobstore.Checkpoint) { pending = cp.Counts().Pending })
	if pending > 0 {
		if len(missing) > 12 {
			missing = append(missing[:12:12], fmt.Sprintf("%d more", len(missing)-12))
		}
		why := strings.Join(missing, "; ")
		if why == "" {
			why = "shards stopped before running every item"
		}
		return j.end(fmt.Errorf("%w: %d item(s) pending: %s; gather again with the missing output(s)", ErrJobFailed, pending, why))
	}
	// reduce brings the parent worktree up to the results branch first.
	if err := j.reduce(ctx, runCtx); err != nil {
		return j.end(err)
	}
	return j.end(nil)
}

var errUnreadableShard = errors.New("unreadable shard output")

// shardDone reports whether every item of the shard has a final state.
func (j *job) shardDone(sh PlanShard) bool {
	done := true
	j.state.Read(func(cp *jobstore.Checkpoint) {
		byID := checkpointItems(cp)
		for _, id := range sh.Items {
			if it := byID[id]; it == nil || it.State == ItemPending || it.State == ItemRunning {
				done = false
				return
			}
		}
	})
	return done
}

func checkpointItems(cp *jobstore.Checkpoint) map[string]*jobstore.CheckpointItem {
	m := make(map[string]*jobstore.CheckpointItem, len(cp.Items))
	for _, it := range cp.Items {
		m[it.ItemID] = it
	}
	return m
}

// gatherShard merges one shard's branch and records its items' outcomes.
func (j *job) gatherShard(ctx context.Context, plan *Plan, sh PlanShard, out *shardOutput) error {
	sr := out.res
	conflicts := map[string]string{} // item id → conflict message
	if sr.Head != "" && sr.Head != plan.BaseCommit {
		ref := "refs/prodigy-shards/" + j.id + "/shard-" + strconv.Itoa(sh.Shard)
		bundle := filepath.Join(out.dir, ShardBundleFile)
		if _, err := os.Stat(bundle); err != nil {
			return fmt.Errorf("%w: %w", errUnreadableShard, err)
		}
		if err := j.git.FetchBundle(ctx, bundle, "refs/heads/"+ShardBranch(plan.ResultsBranch, sh.Shard), ref); err != nil {
			return fmt.Errorf("%w: %w", errUnreadableShard, err)
		}
		if got, err := j.git.ResolveRef(ctx, ref); err != nil || got != sr.Head {
			return fmt.Errorf("%w: %s holds %s, result.json says %s", errUnreadableShard, ShardBundleFile, short(got), short(sr.Head))
		}
		msg := fmt.Sprintf("Merge shard %d of job %s\n\nProdigy-Job: %s\nProdigy-Shard: %d\n", sh.Shard, j.id, j.id, sh.Shard)
		_, err := j.git.MergeTree(ctx, "refs/heads/"+j.branch, ref, msg)
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc):
			j.logf("shard %d conflicts with the results branch (%s); replaying its items one by one", sh.Shard, strings.Join(mc.Files, ", "))
			if conflicts, err = j.replayShard(ctx, plan, ref); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			j.logf("merged shard %d (%d item(s))", sh.Shard, len(sh.Items))
		}
	}
	records, err := readShardDLQ(filepath.Join(out.dir, ShardDLQDir))
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreadableShard, err)
	}
	return j.importShard(plan, sh, sr, conflicts, records)
}

// replayShard applies the shard's item merges onto the results branch one
// at a time; it returns the items whose merge conflicts.
func (j *job) replayShard(ctx context.Context, plan *Plan, ref string) (map[string]string, error) {
	merges, err := j.git.FirstParentMerges(ctx, plan.BaseCommit, ref)
	if err != nil {
		return nil, err
	}
	conflicts := map[string]string{}
	for _, m := range merges {
		id, ok := itemTrailer(m.Message, j.id)
		label := "merge " + short(m.OID)
		if ok {
			label = "item " + id
		}
		_, err := j.git.ReplayMerge(ctx, "refs/heads/"+j.branch, m.OID, label, m.Message)
		var mc *gitops.MergeConflictError
		switch {
		case errors.As(err, &mc) && ok:
			msg := fmt.Sprintf("merge conflict merging %s into %s", label, j.branch)
			if len(mc.Files) > 0 {
				msg += ": " + strings.Join(mc.Files, ", ")
			}
			conflicts[id] = msg
			j.logf("✗ %s conflicts with another shard: %s", id, strings.Join(mc.Files, ", "))
		case err != nil:
			return nil, err
		}
	}
	return conflicts, nil
}

// itemTrailer reads the Prodigy-Item trailer of a merge made by job jobID.
func itemTrailer(msg, jobID string) (string, bool) {
	var job, item string
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, "Prodigy-Job: "); ok {
			job = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Prodigy-Item: "); ok {
			item = strings.TrimSpace(v)
		}
	}
	if job != jobID || item == "" {
		return "", false
	}
	id, err := strconv.Unquote(item)
	return id, err == nil
}

// readShardDLQ reads a shard's dlq/ directory: item id → record.
func readShardDLQ(dir string) (map[string]dlq.DeadLetteredItem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]dlq.DeadLetteredItem{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]dlq.DeadLetteredItem, len(entries))
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		r, err := dlq.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("DLQ record %s: %w", e.Name(), err)
		}
		out[r.ItemID] = r
	}
	return out, nil
}

// importShard records the outcomes of a shard's items in the checkpoint
// and its DLQ records (and the merge conflicts found by the replay) in
// the job's DLQ. Items already final are left alone.
func (j *job) importShard(plan *Plan, sh PlanShard, sr *ShardResult, conflicts map[string]string, records map[string]dlq.DeadLetteredItem) error {
	outcomes := make(map[string]ItemOutcome, len(sr.Items))
	for _, it := range sr.Items {
		outcomes[it.ItemID] = it
	}
	planItems := make(map[string]PlanItem, len(plan.Items))
	for _, it := range plan.Items {
		planItems[it.ID] = it
	}
	var cpItems map[string]*jobstore.CheckpointItem
	j.state.Read(func(cp *jobstore.Checkpoint) { cpItems = checkpointItems(cp) })
	ids := append([]string(nil), sh.Items...)
	sort.SliceStable(ids, func(a, b int) bool { return cpItems[ids[a]].Index < cpItems[ids[b]].Index })
	type change struct {
		cur     *jobstore.CheckpointItem
		oc      ItemOutcome
		pending json.RawMessage // the DLQ record not stored (failed-unrecorded)
	}
	var changes []change
	var unrecorded []string
	for _, id := range ids {
		cur := cpItems[id]
		oc, ok := outcomes[id]
		if cur == nil || !ok || (cur.State != ItemPending && cur.State != ItemRunning) {
			continue
		}
		pi := planItems[id]
		var pending json.RawMessage
		switch oc.State {
		case ItemMerged:
			if msg, bad := conflicts[id]; bad {
				t := dlq.ErrorType{Kind: dlq.MergeConflict}
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.now().UTC(), Type: &t, Message: msg, Step: "merge",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s", sh.Shard, j.id)},
				}}})
				pending = j.importRecord(withPrior(j, pi, rec))
				oc.State, oc.Error, oc.ErrorType = ItemDLQ, msg, t.String()
				j.events.emit(AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: dlq.ReprocessEligible(t, msg)})
			}
		case ItemDLQ:
			var rec *dlq.DeadLetteredItem
			if r, ok := records[id]; ok {
				rec = &r
			} else {
				j.warn(fmt.Sprintf("shard %d: item %s failed but its output has no DLQ record", sh.Shard, id))
			}
			pending = j.importRecord(withPrior(j, pi, rec))
		case ItemSkipped:
		default:
			continue // pending in the shard: stays pending
		}
		if pending != nil {
			unrecorded = append(unrecorded, strconv.Quote(id))
		}
		changes = append(changes, change{cur, oc, pending})
	}
	// One checkpoint write per shard, after the DLQ writes: an item whose
	// record could not be stored is failed-unrecorded (the job fails naming
	// it when it ends); `resume` or a later gather writes the record.
	err := j.state.Update(func(*jobstore.Checkpoint) {
		for _, c := range changes {
			idx, data := c.cur.Index, c.cur.Data
			c.cur.ItemOutcome = c.oc
			c.cur.Index, c.cur.Data = idx, data
			c.cur.PendingRecord, c.cur.Failures = c.pending, nil
		}
	})
	if err != nil {
		return err
	}
	if len(unrecorded) > 0 {
		j.warn(fmt.Sprintf("shard %d: %d DLQ record(s) not written (%s); they stay failed-unrecorded in the checkpoint and gathering again or `resume %s` writes them",
			sh.Shard, len(unrecorded), strings.Join(firstN(unrecorded, 10), ", "), j.id))
	}
	for _, c := range changes {
		j.hooks.ItemFinished(c.cur.ItemOutcome, "")
	}
	return nil
}

// importRecord stores rec (nil: nothing to store) in the job's DLQ
// through addRecord, so attempts the stored record already holds are never
// added twice (a gather interrupted after the DLQ write and before the
// checkpoint write imports the shard again). When the write fails it warns
// and returns the encoded record, which the caller keeps in the checkpoint
// as the item's pending record.
func (j *job) importRecord(rec *dlq.DeadLetteredItem) json.RawMessage {
	if rec == nil || len(rec.FailureHistory) == 0 {
		return nil
	}
	stored, added, err := addRecord(j.store, *rec)
	if err == nil {
		if added {
			j.events.emit(DLQItemAdded{ItemID: stored.ItemID, ErrorSignature: stored.ErrorSignature, FailureCount: stored.FailureCount})
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

// withPrior returns the record to store for a failed plan item: a
// redriven item's earlier DLQ record (from the plan) with rec's new
// failures after it, so the history is kept in attempt order; rec alone
// for a first run; the earlier record alone when the shard's output has
// no record. nil when there is neither.
func withPrior(j *job, pi PlanItem, rec *dlq.DeadLetteredItem) *dlq.DeadLetteredItem {
	if len(pi.Record) == 0 {
		return rec
	}
	prior, err := dlq.Decode(pi.Record)
	if err != nil {
		j.warn(fmt.Sprintf("plan record of %s: %v", pi.ID, err))
		return rec
	}
	if rec == nil {
		return &prior
	}
	out := *rec
	if len(out.ItemData) == 0 || string(out.ItemData) == "null" {
		out.ItemData = prior.ItemData
	}
	out.FailureHistory = append(slices.Clone(prior.FailureHistory), rec.FailureHistory...)
	out.FailureCount = prior.FailureCount + uint32(len(rec.FailureHistory))
	if !prior.FirstAttempt.IsZero() && (out.FirstAttempt.IsZero() || prior.FirstAttempt.Before(out.FirstAttempt)) {
		out.FirstAttempt = prior.FirstAttempt
	}
	if prior.LastAttempt.After(out.LastAttempt) {
		out.LastAttempt = prior.LastAttempt
	}
	if out.WorktreeArtifacts == nil {
		out.WorktreeArtifacts = prior.WorktreeArtifacts
	}
	return &out
}
