package dlqcmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
)

type dlqPurgeOptions struct {
	jobID        string
	days         int
	daysSet, yes bool
}

func NewDLQPurgeCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqPurgeOptions{}
	cmd := &cobra.Command{
		Use:   "purge --older-than-days N",
		Short: "Delete dead-lettered items whose last attempt is older than N days",
		Long: `Delete the job's records whose last_attempt is more than N days (of 24 h)
before now. Asks for confirmation on stdin unless --yes, like clear.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.daysSet = cmd.Flags().Changed("older-than-days")
			return runDLQPurge(f, opts)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.days, "older-than-days", 0, "purge items whose last attempt is older than N days (required)")
	cmdutil.JobIDFlag(fs, &opts.jobID, "job whose DLQ to purge (default: the newest job of this repository)")
	fs.BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func runDLQPurge(f *cmdutil.Factory, opts *dlqPurgeOptions) error {
	if !opts.daysSet {
		return cmdutil.UsageErrorf("--older-than-days is required")
	}
	if opts.days < 0 {
		return cmdutil.UsageErrorf("--older-than-days must be 0 or more, got %d", opts.days)
	}
	store, ref, err := openDLQ(f, opts.jobID)
	if isNoDLQ(err) {
		fmt.Fprintf(f.ErrOut, "nothing to purge: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	cutoff := f.Now().Add(-time.Duration(opts.days) * 24 * time.Hour)
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
		fmt.Fprintf(f.ErrOut, "nothing to purge: none of the %d items of job %s is older than %d days\n", total, ref.JobID, opts.days)
		return nil
	}
	if !opts.yes {
		prompt := fmt.Sprintf("Delete %d of %d items of job %s last attempted before %s?", old, total, ref.JobID, cutoff.UTC().Format(time.RFC3339))
		if err := f.Confirm(prompt, "--yes"); err != nil {
			return err
		}
	}
	n, err := store.Purge(cutoff)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "purged %d items of job %s\n", n, ref.JobID)
	return nil
}
