package dlqcmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

type dlqClearOptions struct {
	jobID string
	yes   bool
}

func NewDLQClearCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqClearOptions{}
	cmd := &cobra.Command{
		Use:   "clear JOB_ID",
		Short: "Delete every dead-lettered item of a job",
		Long: `Delete the job's whole dead letter queue. Asks for confirmation on stdin
unless --yes: "y" or "yes" proceeds, any other answer aborts with exit 1, and
no answer (stdin closed or not a terminal) is exit 2. Nothing is deleted
unless confirmed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.jobID = args[0]
			return runDLQClear(f, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func runDLQClear(f *cmdutil.Factory, opts *dlqClearOptions) error {
	store, ref, err := openDLQ(f, opts.jobID)
	if err != nil {
		return err
	}
	defer store.Close() // idempotent: the error that matters is checked after Clear
	n, err := store.Count()
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(f.ErrOut, "nothing to clear: no records in the dead letter queue of job %s\n", ref.JobID)
		return nil
	}
	if !opts.yes {
		if err := f.Confirm(fmt.Sprintf("Delete all %d items of the dead letter queue of job %s (repo %s)?", n, ref.JobID, ref.Repo), "--yes"); err != nil {
			return err
		}
	}
	if err := store.Clear(); err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "cleared %d items of job %s\n", n, ref.JobID)
	return nil
}
