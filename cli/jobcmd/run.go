package jobcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"

	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/validate"
)

type runOptions struct {
	workflow, repo, jobID, branch string
	maxParallel                   int
	isolation, merge              string
	sparse                        []string
	json, requireItems            bool
	maxCost                       float64
	agentUser                     string
	claude                        config.ClaudeSettings
}

func NewRunCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run WORKFLOW.yml",
		Short: "Run a MapReduce workflow as a new job",
		Long: `Run a MapReduce workflow as a new job on the git checkout at --repo.

Setup and reduce run in a parent worktree on the results branch
(prodigy/<job_id> unless --branch); each item runs in its own agent worktree
and branch, is retried per the workflow's retry policy, and its commits are
merged into the results branch. Items that still fail go to the dead letter
queue. The checkout at --repo is never modified.

Exit codes: 0 completed (DLQ items do not fail the job), 1 job failed,
2 usage/config/input error (nothing run), 130 interrupted (resumable).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.workflow = args[0]
			return runRun(cmd.Context(), f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.repo, "repo", ".", "a directory inside the git checkout to work on")
	cmdutil.JobIDFlag(fs, &opts.jobID, "job id (default mapreduce-<timestamp>-<random>)")
	fs.StringVar(&opts.branch, "branch", "", "results branch (default prodigy/<job_id>)")
	fs.IntVar(&opts.maxParallel, "max-parallel", 0, "agents at once (default: the workflow's map.max_parallel)")
	fs.BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout")
	cmdutil.MaxCostFlag(fs, &opts.maxCost)
	cmdutil.ClaudeFlags(fs, &opts.claude)
	cmdutil.AgentUserFlag(fs, &opts.agentUser)
	fs.BoolVar(&opts.requireItems, "require-items", false, "fail (exit 2) when the map input selects no items, instead of warning")
	fs.StringVar(&opts.isolation, "isolation", "pool", "agent worktrees: pool (reuse max_parallel worktrees) or fresh (one per item)")
	fs.StringArrayVar(&opts.sparse, "sparse", nil, "check out only this directory in the parent and agent worktrees (cone mode, repeatable; replaces the workflow's worktree.sparse; merges keep every file)")
	fs.StringVar(&opts.merge, "merge", "tree", "merge strategy: tree (git merge-tree, no checkout) or worktree (git merge --no-ff in the parent worktree)")
	return cmd
}

func runRun(ctx context.Context, f *cmdutil.Factory, opts *runOptions) error {
	if opts.maxParallel < 0 {
		return cmdutil.UsageErrorf("--max-parallel must be at least 1")
	}
	if err := cmdutil.CheckMaxCost(opts.maxCost); err != nil {
		return err
	}
	if err := cmdutil.CheckClaude(opts.claude); err != nil {
		return err
	}
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	isolation, err := cmdutil.ParseIsolation(opts.isolation)
	if err != nil {
		return err
	}
	merge, err := cmdutil.ParseMerge(opts.merge)
	if err != nil {
		return err
	}
	v := validate.File(opts.workflow, validate.Options{})
	if err := v.Err(); err != nil {
		return err
	}
	res, err := eng.Run(ctx, runner.RunSpec{
		Workflow: v.Workflow, RepoDir: opts.repo, JobID: opts.jobID, Branch: opts.branch,
		Isolation: isolation, Merge: merge, Sparse: opts.sparse, MaxCostUSD: opts.maxCost, RequireItems: opts.requireItems,
		Agents: f.Agents(opts.maxParallel, opts.agentUser, opts.claude),
	})
	return f.FinishJob(res, err, opts.json)
}
