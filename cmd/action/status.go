package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("status", newStatusCommand) }

func newStatusCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [JOB_ID]",
		Short: "Show a job's progress and outcome",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := a.home()
			if err != nil {
				return usageErr(err)
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			res, err := runner.Status(home, id)
			if err != nil {
				return exitFor(err)
			}
			if asJSON {
				return writeJSON(a.stdout, res)
			}
			w := a.stdout
			fmt.Fprintf(w, "job:            %s (%s)\n", res.JobID, res.WorkflowName)
			fmt.Fprintf(w, "status:         %s\n", res.Status)
			fmt.Fprintf(w, "repository:     %s\n", res.RepoDir)
			fmt.Fprintf(w, "results branch: %s\n", res.ResultsBranch)
			fmt.Fprintf(w, "items:          %d total, %d succeeded, %d failed, %d skipped, %d pending\n", res.Total, res.Successful, res.Failed, res.Skipped, res.Pending)
			fmt.Fprintf(w, "dlq:            %d record(s)\n", res.DLQCount)
			fmt.Fprintf(w, "duration:       %dms\n", res.DurationMS)
			if len(res.OrphanedWorktrees) > 0 {
				fmt.Fprintf(w, "orphaned worktrees (remove with `action worktree clean-orphaned %s`):\n", res.JobID)
				for _, o := range res.OrphanedWorktrees {
					fmt.Fprintf(w, "  %s (item %s): %s\n", o.Path, o.ItemID, o.Error)
				}
			}
			if res.Error != "" {
				fmt.Fprintf(w, "note:           %s\n", res.Error)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	return cmd
}
