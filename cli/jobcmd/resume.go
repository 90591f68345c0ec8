package jobcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"

	"github.com/prodigy-action/prodigy-action/runner"
)

type resumeOptions struct {
	jobID            string
	includeDLQ, json bool
	maxCost          float64
	claude           config.ClaudeSettings
	workflow, onto   string
	agentUser        string
}

func NewResumeCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &resumeOptions{}
	cmd := &cobra.Command{
		Use:   "resume JOB_ID",
		Short: "Finish an interrupted or failed job: the items not yet done, then reduce",
		Long: `Resume a job from its checkpoint. Items that were running when the job
stopped (Ctrl-C, kill, crash) run again; items whose merge already reached
the results branch are recognised and not run twice; stale worktrees are
removed. With --include-dlq the job's reprocess-eligible DLQ items run too
(de-duplicated by item id).

The workflow is read from the job's workflow file in the checkout (so a fix
to it applies), or --workflow FILE; only when neither exists is the copy
stored with the job used, with a warning. --onto REF merges REF (e.g. main
with the fix) into the results branch before anything runs; a conflict
changes nothing and exits 1 naming the conflicting paths. --max-cost-usd
raises the job's spend budget (a job stopped by its budget exits 1 with
status budget_exhausted; resume it with a larger budget).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.jobID = args[0]
			return runResume(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.includeDLQ, "include-dlq", false, "also re-run the job's reprocess-eligible DLQ items")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout")
	cmdutil.MaxCostFlag(cmd.Flags(), &opts.maxCost)
	cmdutil.ClaudeFlags(cmd.Flags(), &opts.claude)
	cmdutil.AgentUserFlag(cmd.Flags(), &opts.agentUser)
	cmdutil.RedriveFlags(cmd.Flags(), &opts.workflow, &opts.onto)
	return cmd
}

func runResume(ctx context.Context, f *cmdutil.Factory, opts *resumeOptions) error {
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
	id, err := f.ResolveJobID(opts.jobID, "")
	if err != nil {
		return err
	}
	res, err := eng.Resume(ctx, runner.ResumeSpec{JobID: id, IncludeDLQ: opts.includeDLQ, WorkflowFile: opts.workflow, Onto: opts.onto,
		MaxCostUSD: opts.maxCost, Agents: f.Agents(0, opts.agentUser, opts.claude)})
	return f.FinishJob(res, err, opts.json)
}
