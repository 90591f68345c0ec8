package shard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/event"
)

func checkpointItems(cp *jobstore.Checkpoint) map[string]*jobstore.CheckpointItem {
	m := make(map[string]*jobstore.CheckpointItem, len(cp.Items))
	for _, it := range cp.Items {
		m[it.ItemID] = it
	}
	return m
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

// readShardDLQ reads a shard's dlq/ directory: item id → record. Each
// record file is size-limited and must be a record of one of the shard's
// items, once; there cannot be more files than items.
func readShardDLQ(dir string, sh PlanShard) (map[string]dlq.DeadLetteredItem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]dlq.DeadLetteredItem{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(entries) > len(sh.Items) {
		return nil, fmt.Errorf("%w: %s holds %d files; shard %d has %d items", errForeignOutput, dir, len(entries), sh.Shard, len(sh.Items))
	}
	ours := make(map[string]bool, len(sh.Items))
	for _, id := range sh.Items {
		ours[id] = true
	}
	out := make(map[string]dlq.DeadLetteredItem, len(entries))
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := readLimited(filepath.Join(dir, e.Name()), MaxRecordBytes)
		if errors.Is(err, errOutputTooLarge) {
			return nil, fmt.Errorf("%w: %w", errForeignOutput, err)
		}
		if err != nil {
			return nil, err
		}
		r, err := dlq.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("DLQ record %s: %w", e.Name(), err)
		}
		if !ours[r.ItemID] {
			return nil, fmt.Errorf("%w: DLQ record %s is of item %q, not an item of shard %d", errForeignOutput, filepath.Join(dir, e.Name()), r.ItemID, sh.Shard)
		}
		if _, dup := out[r.ItemID]; dup {
			return nil, fmt.Errorf("%w: %s holds two records of item %q", errForeignOutput, dir, r.ItemID)
		}
		out[r.ItemID] = r
	}
	return out, nil
}

// importShard records the outcomes of a shard's items in the checkpoint
// and its DLQ records (and the merge conflicts found by the replay) in
// the job's DLQ. Items already final are left alone.
func (g *gatherer) importShard(sh PlanShard, sr *Result, conflicts, rejected map[string]string, records map[string]dlq.DeadLetteredItem) error {
	j, plan := g.j, g.plan
	outcomes := make(map[string]runner.ItemOutcome, len(sr.Items))
	for _, it := range sr.Items {
		outcomes[it.ItemID] = it
	}
	planItems := make(map[string]PlanItem, len(plan.Items))
	for _, it := range plan.Items {
		planItems[it.ID] = it
	}
	var cpItems map[string]*jobstore.CheckpointItem
	if err := j.ReadCheckpoint(func(cp *jobstore.Checkpoint) { cpItems = checkpointItems(cp) }); err != nil {
		return err
	}
	ids := append([]string(nil), sh.Items...)
	sort.SliceStable(ids, func(a, b int) bool { return cpItems[ids[a]].Index < cpItems[ids[b]].Index })
	var changes []runner.Imported
	for _, id := range ids {
		cur := cpItems[id]
		oc, ok := outcomes[id]
		if cur == nil || !ok || (cur.State != jobstore.ItemPending && cur.State != jobstore.ItemRunning) {
			continue
		}
		pi := planItems[id]
		c := runner.Imported{Item: cur}
		switch oc.State {
		case jobstore.ItemMerged:
			if why, bad := rejected[id]; bad {
				t := dlq.ErrorType{Kind: dlq.ValidationFailed}
				msg := "rejected in review: " + why
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.Now().UTC(), Type: &t, Message: msg, Step: "review",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s: a reviewer rejected the item's result", sh.Shard, j.ID())},
				}}})
				c.Record = withPrior(j, pi, rec)
				oc.State, oc.Error, oc.ErrorType = jobstore.ItemDLQ, msg, t.String()
				c.Event = event.AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: false}
			} else if msg, bad := conflicts[id]; bad {
				t := dlq.ErrorType{Kind: dlq.MergeConflict}
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.Now().UTC(), Type: &t, Message: msg, Step: "merge",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s", sh.Shard, j.ID())},
				}}})
				c.Record = withPrior(j, pi, rec)
				oc.State, oc.Error, oc.ErrorType = jobstore.ItemDLQ, msg, t.String()
				c.Event = event.AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: dlq.ReprocessEligible(t, msg)}
			}
		case jobstore.ItemDLQ:
			var rec *dlq.DeadLetteredItem
			if r, ok := records[id]; ok {
				rec = &r
			} else {
				j.Warn(fmt.Sprintf("shard %d: item %s failed but its output has no DLQ record", sh.Shard, id))
			}
			c.Record = withPrior(j, pi, rec)
		case jobstore.ItemSkipped:
		default:
			continue // pending in the shard: stays pending
		}
		c.Outcome = oc
		changes = append(changes, c)
	}
	// One checkpoint write per shard, after the DLQ writes (runner.Job.Import):
	// an item whose record could not be stored is failed-unrecorded (the job
	// fails naming it when it ends); `resume` or a later gather writes the
	// record. A crash in between leaves some of them imported: gathering
	// again imports the rest.
	unrecorded, err := j.Import(changes)
	if err != nil {
		return err
	}
	if len(unrecorded) > 0 {
		for i, id := range unrecorded {
			unrecorded[i] = strconv.Quote(id)
		}
		j.Warn(fmt.Sprintf("shard %d: %d DLQ record(s) not written (%s); they stay failed-unrecorded in the checkpoint and gathering again or `resume %s` writes them",
			sh.Shard, len(unrecorded), strings.Join(brief.FirstN(unrecorded, 10), ", "), j.ID()))
	}
	if g.hooks != nil {
		for _, c := range changes {
			g.hooks.ItemFinished(c.Outcome, "")
		}
	}
	return nil
}

// withPrior returns the record to store for a failed plan item: a
// redriven item's earlier DLQ record (from the plan) with rec's new
// failures after it, so the history is kept in attempt order; rec alone
// for a first run; the earlier record alone when the shard's output has
// no record. nil when there is neither.
func withPrior(j *runner.Job, pi PlanItem, rec *dlq.DeadLetteredItem) *dlq.DeadLetteredItem {
	if len(pi.Record) == 0 {
		return rec
	}
	prior, err := dlq.Decode(pi.Record)
	if err != nil {
		j.Warn(fmt.Sprintf("plan record of %s: %v", pi.ID, err))
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
