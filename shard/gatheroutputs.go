package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// shardOutput is one shard's output directory, its result.json and, once
// fetched and verified, its DLQ records.
type shardOutput struct {
	dir        string
	res        *Result
	records    map[string]dlq.DeadLetteredItem
	refused    error // errForeignOutput: the output is not this plan's
	unreadable error // the bundle or DLQ cannot be read: the shard counts as missing
}

// readShardOutputs maps shard index → output. An output without a
// readable result.json cannot be told apart, so it is only reported
// (unreadable; its shard then counts as missing); an output of another
// plan or job, with items other than its shard's, or a shard given twice,
// is refused (a usage error naming the output).
func readShardOutputs(plan *Plan, dirs []string) (map[int]*shardOutput, []string, error) {
	outs := map[int]*shardOutput{}
	var unreadable []string
	largest := 0 // result.json's limit: the largest shard's (the shard is not known before it is read)
	for _, sh := range plan.Shards {
		largest = max(largest, len(sh.Items))
	}
	for _, d := range dirs {
		data, err := readLimited(outputFile(d, ResultFile), shardResultLimit(largest))
		if errors.Is(err, errOutputTooLarge) {
			return nil, nil, usage(fmt.Errorf("%w: %w", errForeignOutput, err))
		}
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s is unreadable: %v", d, err))
			continue
		}
		var sr Result
		if err := json.Unmarshal(data, &sr); err != nil || sr.Result == nil {
			unreadable = append(unreadable, fmt.Sprintf("shard output %s: unreadable %s: %v", d, ResultFile, err))
			continue
		}
		if sr.JobID != plan.JobID {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s belongs to job %s, not %s", errForeignOutput, d, sr.JobID, plan.JobID))
		}
		if sr.PlanID != plan.PlanID {
			what := "plan " + sr.PlanID
			if sr.PlanID == "" {
				what = "no plan id"
			}
			return nil, nil, usage(fmt.Errorf("%w: shard output %s carries %s, not this plan's %s: it is the output of another plan of job %s (or not a shard output)", errForeignOutput, d, what, plan.PlanID, plan.JobID))
		}
		if sr.Shard < 0 || sr.Shard >= len(plan.Shards) {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s is shard %d; the plan has shards 0 to %d", errForeignOutput, d, sr.Shard, len(plan.Shards)-1))
		}
		if prev, dup := outs[sr.Shard]; dup {
			return nil, nil, usage(fmt.Errorf("shard %d given twice: %s and %s", sr.Shard, prev.dir, d))
		}
		if sr.BaseCommit != plan.BaseCommit {
			return nil, nil, usage(fmt.Errorf("%w: shard output %s started from %s, not the plan's base %s", errForeignOutput, d, short(sr.BaseCommit), short(plan.BaseCommit)))
		}
		if err := checkOutputItems(d, plan.Shards[sr.Shard], &sr); err != nil {
			return nil, nil, usage(err)
		}
		outs[sr.Shard] = &shardOutput{dir: d, res: &sr}
	}
	return outs, unreadable, nil
}

// fetchShardOutputs fetches and verifies the bundle and reads the DLQ
// records of every output whose shard is not closed. An output that cannot
// be read is dropped from outs and reported; one that is not this plan's
// keeps its refusal (refusals).
//
// Outputs are independent: their bundles are imported side by side (only
// the ref updates take the repository's lock), then their branches are
// checked and their DLQ records read side by side, so gathering many
// shards does not wait on one core; merging stays in plan order (gather).
// Every bundle is imported before any branch is read: the in-process
// object reader indexes the new packs once, not once per shard.
func fetchShardOutputs(ctx context.Context, git *gitops.Client, plan *Plan, outs map[int]*shardOutput, gs *jobstore.GatherState) []string {
	var open []int
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if _, closed := gs.Closed[k]; !closed {
			open = append(open, k)
		}
	}
	for _, step := range []func(context.Context, *gitops.Client, *Plan, PlanShard, *shardOutput) error{importShardBundle, checkShardOutput} {
		var g errgroup.Group
		g.SetLimit(fetchParallelism())
		for _, k := range open {
			out := outs[k]
			if out.refused != nil || out.unreadable != nil {
				continue
			}
			g.Go(func() error {
				err := step(ctx, git, plan, plan.Shards[k], out)
				switch {
				case errors.Is(err, errForeignOutput):
					out.refused = err
				case err != nil:
					out.unreadable = err
				}
				return nil
			})
		}
		_ = g.Wait()
	}
	var unreadable []string
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if out := outs[k]; out.unreadable != nil {
			unreadable = append(unreadable, fmt.Sprintf("shard %d: output %s is unreadable: %v", k, out.dir, out.unreadable))
		}
	}
	return unreadable
}

// fetchParallelism is how many shard outputs are fetched and checked at
// once: the git children are CPU-bound, so one per core (at least 2, so a
// slow bundle read overlaps another's checks).
func fetchParallelism() int { return max(2, runtime.NumCPU()) }

// importShardBundle imports the output's bundle into the shard's ref
// (shardRef) unless the ref already holds the output's head (a gather
// waiting for an earlier shard sees the same outputs again).
func importShardBundle(ctx context.Context, git *gitops.Client, plan *Plan, sh PlanShard, out *shardOutput) error {
	sr := out.res
	if sr.Head == "" || sr.Head == plan.BaseCommit {
		return nil
	}
	if !isCommitID(sr.Head) {
		return fmt.Errorf("%w: %s: head %q is not a commit id", errForeignOutput, out.dir, sr.Head)
	}
	bundle := outputFile(out.dir, BundleFile)
	if err := checkLimited(bundle, MaxBundleBytes); err != nil {
		if errors.Is(err, errOutputTooLarge) {
			return fmt.Errorf("%w: %w", errForeignOutput, err)
		}
		return err
	}
	ref := shardRef(plan.JobID, sh.Shard)
	if got, err := git.ResolveRef(ctx, ref); err == nil && got == sr.Head {
		return nil
	}
	return git.FetchBundle(ctx, bundle, "refs/heads/"+Branch(plan.ResultsBranch, sh.Shard), ref)
}

// checkShardOutput checks the imported shard branch (verifyShardBranch)
// and reads the output's DLQ records.
func checkShardOutput(ctx context.Context, git *gitops.Client, plan *Plan, sh PlanShard, out *shardOutput) error {
	sr := out.res
	if sr.Head != "" && sr.Head != plan.BaseCommit {
		ref := shardRef(plan.JobID, sh.Shard)
		if got, err := git.ResolveRef(ctx, ref); err != nil || got != sr.Head {
			return fmt.Errorf("%s holds %s, result.json says %s", BundleFile, short(got), short(sr.Head))
		}
		if err := verifyShardBranch(ctx, git, out.dir, ref, plan.BaseCommit, plan.JobID, sh, sr); err != nil {
			return err
		}
	}
	records, err := readShardDLQ(outputFile(out.dir, DLQDir), sh)
	if err != nil {
		return err
	}
	out.records = records
	return nil
}

// refusals joins the refusals of outputs that are not this plan's, in
// shard order (a usage error: nothing is gathered).
func refusals(outs map[int]*shardOutput) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		if outs[k].refused != nil {
			errs = append(errs, outs[k].refused)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return usage(errors.Join(errs...))
}
