package dlqcmd

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
)

type dlqInspectOptions struct{ itemID, jobID string }

func NewDLQInspectCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqInspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect ITEM_ID",
		Short: "Print one dead-lettered item's full record as JSON",
		Long: `Print the item's record exactly as stored: item data, every failed attempt
with its error type, message, context, stack trace, agent, step, duration
and json_log_location, and the worktree artifacts. For example:

  cat "$(prodigy-action dlq inspect item-123 | jq -r '.failure_history[-1].json_log_location')"

A record that cannot be read (corrupt file) is a failure: exit 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.itemID = args[0]
			return runDLQInspect(f, opts)
		},
	}
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ holds the item (optional when only one job has a DLQ)")
	return cmd
}

func runDLQInspect(f *cmdutil.Factory, opts *dlqInspectOptions) error {
	store, ref, err := openDLQ(f, opts.jobID)
	if err != nil {
		return err
	}
	defer store.Close()
	d, err := store.Get(opts.itemID)
	if errors.Is(err, dlq.ErrNotFound) {
		return cmdutil.UsageErrorf("item %q is not in the dead letter queue of job %s", opts.itemID, ref.JobID)
	}
	if err != nil {
		return err
	}
	b, err := dlq.Encode(*d)
	if err != nil {
		return err
	}
	_, err = f.Out.Write(b)
	return err
}
