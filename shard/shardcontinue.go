package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// previousShard is an earlier attempt's output of this shard that a fresh
// shard continues from (RunSpec.Continue).
type previousShard struct {
	dir string
	res *Result
}

// readPreviousShard reads dir's result.json and checks it is an output of
// shard k of plan; a mismatch or an unreadable output is returned as an
// error (the shard then starts from the base).
func readPreviousShard(plan *Plan, k int, dir string) (*previousShard, error) {
	data, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		return nil, err
	}
	var sr Result
	if err := json.Unmarshal(data, &sr); err != nil || sr.Result == nil {
		return nil, fmt.Errorf("unreadable %s: %v", ResultFile, err)
	}
	if sr.JobID != plan.JobID || sr.Shard != k || sr.BaseCommit != plan.BaseCommit || (sr.PlanID != "" && sr.PlanID != plan.PlanID) {
		return nil, fmt.Errorf("it is shard %d of job %s from %s, not shard %d of job %s from %s", sr.Shard, sr.JobID, short(sr.BaseCommit), k, plan.JobID, short(plan.BaseCommit))
	}
	return &previousShard{dir: dir, res: &sr}, nil
}

// start fetches the previous attempt's shard branch from its bundle and
// returns the commit the shard branch starts from (its head).
func (p *previousShard) start(ctx context.Context, j *runner.Job, plan *Plan, k int) (string, error) {
	if p.res.Head == "" || p.res.Head == plan.BaseCommit {
		return plan.BaseCommit, nil
	}
	ref := "refs/prodigy-previous/" + j.ID() + "/shard-" + strconv.Itoa(k)
	if err := j.Git().FetchBundle(ctx, filepath.Join(p.dir, BundleFile), "refs/heads/"+j.Branch(), ref); err != nil {
		return "", err
	}
	got, err := j.Git().ResolveRef(ctx, ref)
	if err != nil {
		return "", err
	}
	if got != p.res.Head {
		return "", fmt.Errorf("%s holds %s, %s says %s", BundleFile, short(got), ResultFile, short(p.res.Head))
	}
	return got, nil
}

// adopt gives the shard's items the previous attempt's final outcomes
// (merged, dlq, skipped): they do not run again. Items it left pending or
// running stay pending.
func (p *previousShard) adopt(items []*jobstore.CheckpointItem) int {
	prev := make(map[string]runner.ItemOutcome, len(p.res.Items))
	for _, it := range p.res.Items {
		prev[it.ItemID] = it
	}
	n := 0
	for _, it := range items {
		oc, ok := prev[it.ItemID]
		if !ok || (oc.State != jobstore.ItemMerged && oc.State != jobstore.ItemDLQ && oc.State != jobstore.ItemSkipped) {
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
func (p *previousShard) importRecords(j *runner.Job, sh PlanShard) error {
	records, err := readShardDLQ(outputFile(p.dir, DLQDir), sh)
	if err != nil {
		return err
	}
	var failed []runner.Imported
	rerr := j.ReadCheckpoint(func(cp *jobstore.Checkpoint) {
		for _, it := range cp.Items {
			if rec, ok := records[it.ItemID]; ok && it.State == jobstore.ItemDLQ {
				failed = append(failed, runner.Imported{Item: it, Outcome: it.ItemOutcome, Record: &rec})
			}
		}
	})
	if rerr != nil {
		return rerr
	}
	if len(failed) == 0 {
		return nil
	}
	_, err = j.Import(failed)
	return err
}
