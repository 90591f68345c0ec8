// Package shardcmd holds the sharded fan-out commands: plan, shard and
// gather (docs/shards.md).
package shardcmd

import (
	"context"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
	"github.com/prodigy-action/prodigy-action/validate"
)

// planOutput is what `plan --json` prints.
type planOutput struct {
	JobID  string     `json:"job_id"`
	Shards int        `json:"shards"`
	Total  int        `json:"total"`
	Matrix planMatrix `json:"matrix"`
	Plan   string     `json:"plan"`
}

type planMatrix struct {
	Shard []int `json:"shard"`
}

type planOptions struct {
	workflow, out, shards, repo, jobID, fromDLQ, fromPending string
	json                                                     bool
}

// NewPlanCmd is `action plan`.
func NewPlanCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan WORKFLOW.yml --out DIR",
		Short: "Run setup once and split the items into shards for `shard` runners",
		Long: `Plan a sharded job: run setup once in a parent worktree on the results
branch prodigy/<job_id> (as run does), load and select the items exactly as
run would, and split them into N shards (a stable split: the same input
gives the same shards). Writes DIR/plan.json and, when setup made commits,
DIR/base.bundle. --shards auto sizes shards to fit a 6-hour runner from
the item count, max_parallel and the retry schedule. --from-dlq JOB_ID
plans only that job's reprocess-eligible DLQ records (ids and histories
kept). --from-pending JOB_ID plans the items of that job still pending
(cut off by a budget or max_failures, or in shards a final gather closed),
on that job's results branch. Each shard gets its part of the job-wide
max_failures and max_cost_usd. Planning a --job-id again after a killed
plan starts it afresh.

Exit codes: 0 planned, 1 setup failed, 2 usage/config/input error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.workflow = args[0]
			return runPlan(cmd.Context(), f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.out, "out", "", "plan directory to write (required)")
	fs.StringVar(&opts.shards, "shards", "auto", "number of shards (1-256) or auto")
	fs.StringVar(&opts.repo, "repo", ".", "a directory inside the git checkout to work on")
	cmdutil.JobIDFlag(fs, &opts.jobID, "job id (default mapreduce-<timestamp>-<random>)")
	fs.StringVar(&opts.fromDLQ, "from-dlq", "", "plan only this job's reprocess-eligible DLQ records")
	fs.StringVar(&opts.fromPending, "from-pending", "", "plan only this job's pending items (cut off by a limit or a closed shard)")
	fs.BoolVar(&opts.json, "json", false, "print {job_id, shards, total, matrix, plan} as JSON on stdout")
	return cmd
}

func runPlan(ctx context.Context, f *cmdutil.Factory, opts *planOptions) error {
	if opts.out == "" {
		return cmdutil.UsageErrorf("--out DIR is required (the plan directory to write)")
	}
	n := 0
	if opts.shards != "auto" {
		v, err := strconv.Atoi(opts.shards)
		if err != nil || v < 1 || v > shard.MaxShards {
			return cmdutil.UsageErrorf("--shards must be a number from 1 to %d or auto, not %q", shard.MaxShards, opts.shards)
		}
		n = v
	}
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	v := validate.File(opts.workflow, validate.Options{})
	if err := v.Err(); err != nil {
		return err
	}
	p, err := shard.NewPlan(ctx, eng, shard.PlanSpec{Workflow: v.Workflow, RepoDir: opts.repo, JobID: opts.jobID, Dir: opts.out, Shards: n, FromDLQ: opts.fromDLQ, FromPending: opts.fromPending})
	if err != nil {
		return err
	}
	if !opts.json {
		return nil
	}
	abs, _ := filepath.Abs(shard.PlanFile(opts.out))
	out := planOutput{JobID: p.JobID, Shards: len(p.Shards), Total: len(p.Items), Plan: abs, Matrix: planMatrix{Shard: make([]int, len(p.Shards))}}
	for k := range out.Matrix.Shard {
		out.Matrix.Shard[k] = k
	}
	return cmdutil.WriteJSON(f.Out, out)
}

type shardOptions struct {
	dir, out, repo, cont string
	k, maxParallel       int
	json                 bool
}

// NewShardCmd is `action shard`.
func NewShardCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &shardOptions{}
	cmd := &cobra.Command{
		Use:   "shard DIR K --out OUTDIR",
		Short: "Run shard K of a plan in this clone and write its output for `gather`",
		Long: `Run shard K of the plan in DIR with the whole engine (worktrees, retries,
backoff, on_item_failure, DLQ, events, checkpoint), merging into
prodigy/<job_id>/shard-K from the plan's base (fetched from base.bundle when
this clone lacks it). Reduce never runs here. Writes OUTDIR/shard.bundle,
OUTDIR/dlq/, OUTDIR/events.jsonl and OUTDIR/result.json, also when the shard
fails or is interrupted, and after every finished item while it runs. Running
it again resumes the shard; in another clone (a re-run on a new runner),
--continue PREVOUT starts from an earlier attempt's output instead of the
base, so its finished items do not run again.

Exit codes: 0 shard completed (DLQ items do not fail it), 1 shard failed
(stop policy, thresholds), 2 usage error, 130 interrupted.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := strconv.Atoi(args[1])
			if err != nil || k < 0 {
				return cmdutil.UsageErrorf("shard index must be a number from 0, not %q", args[1])
			}
			opts.dir, opts.k = args[0], k
			return runShard(cmd.Context(), f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.out, "out", "", "output directory to write (required)")
	fs.StringVar(&opts.repo, "repo", ".", "a directory inside the git checkout to work on")
	fs.IntVar(&opts.maxParallel, "max-parallel", 0, "agents at once (default: the plan's max_parallel)")
	fs.StringVar(&opts.cont, "continue", "", "an earlier attempt's output of this shard to continue from (when the shard has no state here)")
	fs.BoolVar(&opts.json, "json", false, "print result.json on stdout")
	return cmd
}

func runShard(ctx context.Context, f *cmdutil.Factory, opts *shardOptions) error {
	if opts.out == "" {
		return cmdutil.UsageErrorf("--out OUTDIR is required (the shard's output directory)")
	}
	if opts.maxParallel < 0 {
		return cmdutil.UsageErrorf("--max-parallel must be at least 1")
	}
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	sr, err := shard.Run(ctx, eng, shard.RunSpec{RepoDir: opts.repo, PlanDir: opts.dir, Shard: opts.k, OutDir: opts.out, Continue: opts.cont,
		Agents: f.Agents(opts.maxParallel, "", config.ClaudeSettings{})})
	if opts.json && sr != nil {
		if sr.OrphanedWorktrees == nil {
			sr.OrphanedWorktrees = []runner.OrphanedWorktree{}
		}
		if werr := cmdutil.WriteJSON(f.Out, sr); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

type gatherOptions struct {
	dir, repo   string
	outs        []string
	json, final bool
	reject      []string
}

// NewGatherCmd is `action gather`.
func NewGatherCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &gatherOptions{}
	cmd := &cobra.Command{
		Use:   "gather DIR OUTDIR...",
		Short: "Merge every shard's branch and DLQ into the job, then run reduce once",
		Long: `Gather a sharded job in the planning repository or any clone holding the
base: check every output (the plan's id and job, the shard's items; outputs
of another plan are refused, exit 2), fetch each shard's bundle and merge
the shard branches into prodigy/<job_id> in plan order (a conflicting
shard's items are replayed one by one so only the conflicting items fail, as
MergeConflict records), import every shard's DLQ records into the job's DLQ,
then run reduce once with ${map.*} over all shards. The result depends only
on the outputs, not on their order or arrival: a shard whose output is
missing or still has pending items holds later shards back (exit 1); gather
again with it, or with --final to close such shards as they are (their
items stay pending; the message prints the --from-pending plan that
continues them). Gathering the same outputs twice changes nothing; a killed
gather is completed by running it again.

--reject ITEM_ID[=REASON] (repeatable) is a review gate's verdict: the item's
merge is left out of the results branch and the item goes to the DLQ as
ValidationFailed with the reason ("rejected in review: REASON"), redrivable
with dlq retry like any failure. Rejections are given to the job's first
gather (again, unchanged, when it is run again).

Exit codes: 0 completed, 1 failed or shards missing, 2 usage error, 130 interrupted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir, opts.outs = args[0], args[1:]
			return runGather(cmd.Context(), f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.repo, "repo", ".", "a directory inside the git checkout to work on")
	fs.BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout (as run does)")
	fs.BoolVar(&opts.final, "final", false, "close shards whose output is missing or has pending items, and merge the later ones")
	fs.StringArrayVar(&opts.reject, "reject", nil, "ITEM_ID[=REASON]: leave the item's result out (a reviewer rejected it) and dead-letter it with the reason (repeatable)")
	return cmd
}

func runGather(ctx context.Context, f *cmdutil.Factory, opts *gatherOptions) error {
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	reject, err := shard.ParseRejections(opts.reject)
	if err != nil {
		return cmdutil.UsageErrorf("--reject: %w", err)
	}
	res, err := shard.Gather(ctx, eng, shard.GatherSpec{RepoDir: opts.repo, PlanDir: opts.dir, Outputs: opts.outs, Final: opts.final, Reject: reject})
	return f.FinishJob(res, err, opts.json)
}
