package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
)

func init() { registerDLQCommand("purge", newDLQPurgeCommand) }

func newDLQPurgeCommand(a *app) *cobra.Command {
	var (
		jobID string
		days  int
		yes   bool
	)
	cmd := &cobra.Command{
		Use:   "purge --older-than-days N",
		Short: "Delete dead-lettered items whose last attempt is older than N days",
		Long: `Delete the job's records whose last_attempt is more than N days (of 24 h)
before now. Asks for confirmation on stdin unless --yes, like clear.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("older-than-days") {
				return usageErrf("--older-than-days is required")
			}
			if days < 0 {
				return usageErrf("--older-than-days must be 0 or more, got %d", days)
			}
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			cutoff := a.now().Add(-time.Duration(days) * 24 * time.Hour)
			old, total := 0, 0
			err = store.Each(func(d dlq.DeadLetteredItem) error {
				total++
				if d.LastAttempt.Before(cutoff) {
					old++
				}
				return nil
			})
			if err != nil {
				return err
			}
			if old == 0 {
				fmt.Fprintf(a.stderr, "nothing to purge: none of the %d items of job %s is older than %d days\n", total, ref.JobID, days)
				return nil
			}
			if !yes {
				prompt := fmt.Sprintf("Delete %d of %d items of job %s last attempted before %s?", old, total, ref.JobID, cutoff.UTC().Format(time.RFC3339))
				if err := confirm(a, prompt); err != nil {
					return err
				}
			}
			n, err := store.Purge(cutoff)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "purged %d items of job %s\n", n, ref.JobID)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&days, "older-than-days", 0, "purge items whose last attempt is older than N days (required)")
	f.StringVar(&jobID, "job-id", "", "job whose DLQ to purge (optional when only one job has a DLQ)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
