package dlqcmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

func NewDLQCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, analyse, export and redrive the dead letter queue",
	}
	cmd.AddCommand(
		NewDLQListCmd(f), NewDLQInspectCmd(f), NewDLQAnalyzeCmd(f), NewDLQStatsCmd(f),
		NewDLQExportCmd(f), NewDLQRetryCmd(f), NewDLQClearCmd(f), NewDLQPurgeCmd(f),
	)
	return cmd
}

// openDLQ resolves the job (runner.FindDLQJob) and opens its store; store
// warnings go to stderr.
func openDLQ(f *cmdutil.Factory, jobID string) (*dlq.Store, runner.Paths, error) {
	home, err := f.Home()
	if err != nil {
		return nil, runner.Paths{}, err
	}
	if jobID, err = f.ResolveJobID(jobID, ""); err != nil {
		return nil, runner.Paths{}, err
	}
	ref, err := runner.FindDLQJob(home, jobID)
	if err != nil {
		return nil, ref, err
	}
	s, err := dlq.Open(ref.DLQRoot(), ref.JobID, dlq.Options{Warn: func(m string) { fmt.Fprintf(f.ErrOut, "warning: %s\n", m) }})
	if err != nil {
		return nil, ref, &cmdutil.UsageError{Err: err}
	}
	return s, ref, nil
}

// recordLabeler names a record's item as the job's workflow does
// (runner.Labeler): its id_field value, else a rendering of item_data.
func recordLabeler(ref runner.Paths) func(dlq.DeadLetteredItem) string {
	label := runner.Labeler(ref)
	return func(d dlq.DeadLetteredItem) string { return label(d.ItemID, d.ItemData) }
}

// errEmptyOutputPath rejects an empty FILE argument (use "-" for stdout).
var errEmptyOutputPath = cmdutil.UsageErrorf(`output file must not be empty (use "-" for stdout)`)
