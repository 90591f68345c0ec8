package main

import (
	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("run", newRunCommand) }

func newRunCommand(a *app) *cobra.Command {
	var (
		repo, jobID, branch string
		maxParallel         int
		asJSON              bool
		isolation, merge    string
	)
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
			if maxParallel < 0 {
				return usageErrf("--max-parallel must be at least 1")
			}
			opts, err := a.runOptions(isolation, merge)
			if err != nil {
				return err
			}
			wf, err := config.Load(args[0])
			if err != nil {
				return usageErr(err)
			}
			if err := checkWorkflowExtra(wf); err != nil {
				return usageErr(err)
			}
			opts.Workflow, opts.RepoDir, opts.JobID, opts.Branch, opts.MaxParallel = wf, repo, jobID, branch, maxParallel
			res, err := runner.Run(cmd.Context(), opts)
			return a.finishJob(res, err, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", ".", "a directory inside the git checkout to work on")
	f.StringVar(&jobID, "job-id", "", "job id (default mapreduce-<timestamp>-<random>)")
	f.StringVar(&branch, "branch", "", "results branch (default prodigy/<job_id>)")
	f.IntVar(&maxParallel, "max-parallel", 0, "agents at once (default: the workflow's map.max_parallel)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	f.StringVar(&isolation, "isolation", "pool", "agent worktrees: pool (reuse max_parallel worktrees) or fresh (one per item)")
	f.StringVar(&merge, "merge", "tree", "merge strategy: tree (git merge-tree, no checkout) or worktree (git merge --no-ff in the parent worktree)")
	return cmd
}

// runOptions builds the runner options shared by run, resume and dlq retry.
func (a *app) runOptions(isolation, merge string) (runner.Options, error) {
	home, err := a.home()
	if err != nil {
		return runner.Options{}, usageErr(err)
	}
	o := runner.Options{Home: home, Stderr: a.stderr, Getenv: a.getenv, Clock: a.clock, Redactor: a.redactor()}
	switch runner.Isolation(isolation) {
	case runner.IsolationPool, runner.IsolationFresh, "":
		o.Isolation = runner.Isolation(isolation)
	default:
		return o, usageErrf("--isolation must be pool or fresh, not %q", isolation)
	}
	switch runner.MergeMode(merge) {
	case runner.MergeTree, runner.MergeWorktree, "":
		o.Merge = runner.MergeMode(merge)
	default:
		return o, usageErrf("--merge must be tree or worktree, not %q", merge)
	}
	return o, nil
}

// checkWorkflowExtra runs the extra validators (items pipeline options).
func checkWorkflowExtra(wf *config.Workflow) error {
	for _, v := range validateExtra {
		if errs := v(wf); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}
