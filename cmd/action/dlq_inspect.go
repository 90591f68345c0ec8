package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
)

func init() { registerDLQCommand("inspect", newDLQInspectCommand) }

func newDLQInspectCommand(a *app) *cobra.Command {
	var jobID string
	cmd := &cobra.Command{
		Use:   "inspect ITEM_ID",
		Short: "Print one dead-lettered item's full record as JSON",
		Long: `Print the item's record exactly as stored: item data, every failed attempt
with its error type, message, context, stack trace, agent, step, duration
and json_log_location, and the worktree artifacts. For example:

  cat "$(action dlq inspect item-123 | jq -r '.failure_history[-1].json_log_location')"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			d, err := store.Get(args[0])
			if errors.Is(err, dlq.ErrNotFound) {
				return usageErrf("item %q is not in the dead letter queue of job %s", args[0], ref.JobID)
			}
			if err != nil {
				return err
			}
			b, err := dlq.Encode(*d)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&jobID, "job-id", "", "job whose DLQ holds the item (optional when only one job has a DLQ)")
	return cmd
}
