package main

import (
	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("resume", newResumeCommand) }

func newResumeCommand(a *app) *cobra.Command {
	var includeDLQ, asJSON bool
	cmd := &cobra.Command{
		Use:   "resume JOB_ID",
		Short: "Finish an interrupted or failed job: the items not yet done, then reduce",
		Long: `Resume a job from its checkpoint. Items that were running when the job
stopped (Ctrl-C, kill, crash) run again; items whose merge already reached
the results branch are recognised and not run twice; stale worktrees are
removed. With --include-dlq the job's reprocess-eligible DLQ items run too
(de-duplicated by item id).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := a.runOptions("", "")
			if err != nil {
				return err
			}
			res, err := runner.Resume(cmd.Context(), runner.ResumeOptions{Home: opts.Home, JobID: args[0], IncludeDLQ: includeDLQ, Run: opts})
			return a.finishJob(res, err, asJSON)
		},
	}
	cmd.Flags().BoolVar(&includeDLQ, "include-dlq", false, "also re-run the job's reprocess-eligible DLQ items")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	return cmd
}
