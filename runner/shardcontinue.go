package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// previousShard is an earlier attempt's output of this shard that a fresh
// shard continues from (ShardSpec.Continue).
type previousShard struct {
	dir string
	res *ShardResult
}

// readPreviousShard reads dir's result.json and checks it is an output of
// shard k of plan; a mismatch or an unreadable output is returned as an
// error (the shard then starts from the base).
func readPreviousShard(plan *Plan, k int, dir string) (*previousShard, error) {
	data, err := os.ReadFile(filepath.Join(dir, ShardResultFile))
	if err != nil {
		return nil, err
	}
	var sr ShardResult
	if err := json.Unmarshal(data, &sr); err != nil || sr.Result == nil {
		return nil, fmt.Errorf("unreadable %s: %v", ShardResultFile, err)
	}
	if sr.JobID != plan.JobID || sr.Shard != k || sr.BaseCommit != plan.BaseCommit || (sr.PlanID != "" && sr.PlanID != plan.PlanID) {
		return nil, fmt.Errorf("it is shard %d of job %s from %s, not shard %d of job %s from %s", sr.Shard, sr.JobID, short(sr.BaseCommit), k, plan.JobID, short(plan.BaseCommit))
	}
	return &previousShard{dir: dir, res: &sr}, nil
}

// start fetches the previous attempt's shard branch from its bundle and
// returns the commit the shard branch starts from (its head).
func (p *previousShard) start(ctx context.Context, j *job, plan *Plan, k int) (string, error) {
	if p.res.Head == "" || p.res.Head == plan.BaseCommit {
		return plan.BaseCommit, nil
	}
	ref := "refs/prodigy-previous/" + j.id + "/shard-" + strconv.Itoa(k)
	if err := j.git.FetchBundle(ctx, filepath.Join(p.dir, ShardBundleFile), "refs/heads/"+j.branch, ref); err != nil {
		return "", err
	}
	got, err := j.git.ResolveRef(ctx, ref)
	if err != nil {
		return "", err
	}
	if got != p.res.Head {
		return "", fmt.Errorf("%s holds %s, %s says %s", ShardBundleFile, short(got), ShardResultFile, short(p.res.Head))
	}
	return got, nil
}

// adopt gives the checkpoint's items the previous attempt's final
// outcomes (merged, dlq, skipped): they do not run again. Items it left
// pending or running stay pending.
func (p *previousShard) adopt(cp *jobstore.Checkpoint) int {
	prev := make(map[string]ItemOutcome, len(p.res.Items))
	for _, it := range p.res.Items {
		prev[it.ItemID] = it
	}
	n := 0
	for _, it := range cp.Items {
		oc, ok := prev[it.ItemID]
		if !ok || (oc.State != ItemMerged && oc.State != ItemDLQ && oc.State != ItemSkipped) {
			continue
		}
		it.ItemOutcome = oc
		n++
	}
	return n
}

// importRecords stores the previous attempt's DLQ records of the items it
// failed (a record that cannot be written stays the item's pending record,
// written by a later run, as in gather).
func (p *previousShard) importRecords(j *job, sh PlanShard) error {
	records, err := readShardDLQ(outputFile(p.dir, ShardDLQDir), sh)
	if err != nil {
		return err
	}
	var failed []*jobstore.CheckpointItem
	j.state.Read(func(cp *jobstore.Checkpoint) {
		for _, it := range cp.Items {
			if it.State == ItemDLQ {
				failed = append(failed, it)
			}
		}
	})
	pending := map[*jobstore.CheckpointItem][]byte{}
	for _, it := range failed {
		if rec, ok := records[it.ItemID]; ok {
			if p := j.importRecord(&rec); p != nil {
				pending[it] = p
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return j.state.Update(func(*jobstore.Checkpoint) {
		for it, p := range pending {
			it.PendingRecord = p
		}
	})
}
