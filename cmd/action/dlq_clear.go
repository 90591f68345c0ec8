package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { registerDLQCommand("clear", newDLQClearCommand) }

func newDLQClearCommand(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "clear JOB_ID",
		Short: "Delete every dead-lettered item of a job",
		Long: `Delete the job's whole dead letter queue. Asks for confirmation on stdin
unless --yes: "y" or "yes" proceeds, any other answer aborts with exit 1, and
no answer (stdin closed or not a terminal) is exit 2. Nothing is deleted
unless confirmed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, ref, err := openDLQ(a, args[0])
			if err != nil {
				return err
			}
			n, err := store.Count()
			if err != nil {
				return err
			}
			if !yes {
				if err := confirm(a, fmt.Sprintf("Delete all %d items of the dead letter queue of job %s (repo %s)?", n, ref.JobID, ref.Repo)); err != nil {
					return err
				}
			}
			if err := store.Clear(); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "cleared %d items of job %s\n", n, ref.JobID)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
