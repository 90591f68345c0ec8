package runner

import (
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
	"github.com/prodigy-action/prodigy-action/jobstore"
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
		data, err := readLimited(filepath.Join(dir, e.Name()), MaxShardRecordBytes)
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
func (j *job) importShard(plan *Plan, sh PlanShard, sr *ShardResult, conflicts, rejected map[string]string, records map[string]dlq.DeadLetteredItem) error {
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
			if why, bad := rejected[id]; bad {
				t := dlq.ErrorType{Kind: dlq.ValidationFailed}
				msg := "rejected in review: " + why
				rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: id, ItemData: pi.Data, Status: dlq.StatusFailed, Failures: []dlq.Failure{{
					Attempt: max(oc.Attempts, 1), At: j.now().UTC(), Type: &t, Message: msg, Step: "review",
					Context: []string{fmt.Sprintf("Gathering shard %d of job %s: a reviewer rejected the item's result", sh.Shard, j.id)},
				}}})
				pending = j.importRecord(withPrior(j, pi, rec))
				oc.State, oc.Error, oc.ErrorType = ItemDLQ, msg, t.String()
				j.events.emit(AgentFailed{ItemID: id, Error: msg, ErrorType: t, Attempts: oc.Attempts, RetryEligible: false})
			} else if msg, bad := conflicts[id]; bad {
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
	// it when it ends); `resume` or a later gather writes the record. Only
	// the shard's items are written (journal entries; the snapshot is
	// rewritten when the journal outgrows it), so a gather's writes do not
	// grow with the job times the shards. A crash in between leaves some
	// of them imported: gathering again imports the rest.
	err := j.state.UpdateItems(func(_ *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
		for _, c := range changes {
			touch(c.cur)
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
