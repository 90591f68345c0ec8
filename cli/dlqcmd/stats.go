package dlqcmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/report"
)

type dlqStatsOptions struct {
	jobID string
	json  bool
	// items adds the item table after the statistics (`dlq show`).
	items bool
}

func NewDLQStatsCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqStatsOptions{}
	cmd := &cobra.Command{
		Use:   "stats [JOB_ID]",
		Short: "Summarise a job's dead letter queue",
		Long: `Summarise a job's dead letter queue: total items, eligible for reprocess,
requiring manual review, oldest and newest item, average failure count, and
counts by error type and by error signature. The job is JOB_ID or --job-id
(either may be "latest"); without one, the newest job of this repository.
No records is an empty summary (exit 0).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := jobArg(&opts.jobID, args); err != nil {
				return err
			}
			return runDLQStats(f, opts)
		},
	}
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ to summarise (default: the newest job of this repository)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	return cmd
}

// NewDLQShowCmd is the seeds' `dlq show <job_id>`: the statistics of
// `dlq stats` (the seed's JSON shape with --json), then, on a terminal
// listing, the job's items as `dlq list` shows them.
func NewDLQShowCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqStatsOptions{items: true}
	cmd := &cobra.Command{
		Use:   "show [JOB_ID]",
		Short: "Show a job's DLQ: its statistics, then its items",
		Long: `Show a job's dead letter queue: the statistics of 'dlq stats', then every
item as 'dlq list --limit 0' lists it. --json prints the statistics object
only (total_items, eligible_for_reprocess, requiring_manual_review,
oldest_item, newest_item, error_categories, …). The job is JOB_ID or
--job-id (either may be "latest"); without one, the newest job of this
repository. No records is an empty summary (exit 0).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := jobArg(&opts.jobID, args); err != nil {
				return err
			}
			return runDLQStats(f, opts)
		},
	}
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ to show (default: the newest job of this repository)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the statistics as one JSON object on stdout")
	return cmd
}

// jobArg merges an optional JOB_ID argument into the --job-id value; both
// naming different jobs is a usage error.
func jobArg(jobID *string, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if *jobID != "" && *jobID != args[0] {
		return cmdutil.UsageErrorf("JOB_ID %q and --job-id %q name different jobs; give one", args[0], *jobID)
	}
	*jobID = args[0]
	return nil
}

func runDLQStats(f *cmdutil.Factory, opts *dlqStatsOptions) error {
	store, ref, err := openDLQ(f, opts.jobID)
	if isNoDLQ(err) {
		if opts.json {
			st, err := dlq.Stats(dlq.Items(nil))
			if err != nil {
				return err
			}
			return json.NewEncoder(f.Out).Encode(report.DLQStats{Statistics: st})
		}
		fmt.Fprintln(f.ErrOut, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	st, err := dlq.Stats(store)
	if err != nil {
		return err
	}
	if opts.json {
		return json.NewEncoder(f.Out).Encode(report.DLQStats{JobID: ref.JobID, Repo: ref.Repo, Statistics: st})
	}
	if err := report.WriteDLQStats(f.Out, ref, st); err != nil {
		return err
	}
	if !opts.items || st.TotalItems == 0 {
		return nil
	}
	rows, _, err := dlq.List(store, dlq.ListOptions{Label: recordLabeler(ref)})
	if err != nil {
		return err
	}
	fmt.Fprintln(f.Out, "Items (newest last attempt first):")
	return report.WriteDLQTable(f.Out, rows)
}
