package dlqcmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
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
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ holds the item (default: the newest job of this repository)")
	return cmd
}

func runDLQInspect(f *cmdutil.Factory, opts *dlqInspectOptions) error {
	store, ref, err := openDLQ(f, opts.jobID)
	if isNoDLQ(err) {
		return cmdutil.UsageErrorf("item %q is not in any dead letter queue: %v", opts.itemID, err)
	}
	if err != nil {
		return err
	}
	defer store.Close()
	d, err := store.Get(opts.itemID)
	if errors.Is(err, dlq.ErrNotFound) && opts.jobID == "" {
		d, err = findItem(f, ref, opts.itemID)
	}
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

// findItem looks for itemID in the DLQ of every job but skip (the job
// already searched) when no job id was given: the one job that holds it
// answers; none is dlq.ErrNotFound; several is a usage error naming them.
func findItem(f *cmdutil.Factory, skip jobstore.Paths, itemID string) (*dlq.DeadLetteredItem, error) {
	home, err := f.Home()
	if err != nil {
		return nil, err
	}
	jobs, err := jobstore.DLQJobs(home)
	if err != nil {
		return nil, err
	}
	var (
		found *dlq.DeadLetteredItem
		in    []jobstore.Paths
	)
	for _, j := range jobs {
		if j == skip {
			continue
		}
		s, err := dlq.Open(j.DLQRoot(), j.JobID, dlq.Options{Warn: func(m string) { fmt.Fprintf(f.ErrOut, "warning: %s\n", m) }})
		if err != nil {
			continue
		}
		d, err := s.Get(itemID)
		s.Close()
		if err == nil {
			found, in = d, append(in, j)
		}
	}
	switch len(in) {
	case 0:
		return nil, dlq.ErrNotFound
	case 1:
		fmt.Fprintf(f.ErrOut, "item %s is in the dead letter queue of job %s (repo %s)\n", itemID, in[0].JobID, in[0].Repo)
		return found, nil
	}
	return nil, cmdutil.UsageErrorf("item %q is in the dead letter queue of %d jobs; choose one with --job-id:%s", itemID, len(in), jobList(in))
}
