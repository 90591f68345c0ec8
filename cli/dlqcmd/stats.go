package dlqcmd

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/report"
)

type dlqStatsOptions struct {
	jobID string
	json  bool
}

func NewDLQStatsCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqStatsOptions{}
	cmd := &cobra.Command{
		Use:     "stats",
		Aliases: []string{"show"},
		Short:   "Summarise a job's dead letter queue (alias: show)",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return runDLQStats(f, opts) },
	}
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ to summarise (optional when only one job has a DLQ)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func runDLQStats(f *cmdutil.Factory, opts *dlqStatsOptions) error {
	store, ref, err := openDLQ(f, opts.jobID)
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
	return report.WriteDLQStats(f.Out, ref, st)
}
