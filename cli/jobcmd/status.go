package jobcmd

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

type statusOptions struct {
	jobID string
	json  bool
}

func NewStatusCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [JOB_ID]",
		Short: "Show a job's progress and outcome",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.jobID = args[0]
			}
			return runStatus(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout")
	return cmd
}

func runStatus(f *cmdutil.Factory, opts *statusOptions) error {
	home, err := f.Home()
	if err != nil {
		return err
	}
	id, err := f.ResolveJobID(opts.jobID, "")
	if err != nil {
		return err
	}
	if id == "" {
		// No job named: the only job, else the newest one (of this
		// repository when run inside one), said on stderr.
		if _, err := cmdutil.FindJob(home, "", ""); errors.Is(err, jobstore.ErrAmbiguousJob) {
			if id, err = f.ResolveJobID(jobstore.Latest, ""); err != nil {
				return err
			}
			fmt.Fprintf(f.ErrOut, "several jobs: showing the newest, %s (`%s status latest` names it; `%s jobs` lists them)\n",
				id, cmdutil.Name, cmdutil.Name)
		}
	}
	if opts.json {
		return writeStatusJSON(f.Out, home, id)
	}
	res, err := runner.StatusSummary(home, id) // the text report needs no item list
	if err != nil {
		return err
	}
	report.WriteStatus(f.Out, res)
	return nil
}

// writeStatusJSON writes the job's result as cmdutil.WriteJSON writes
// runner.Status's, byte for byte, but streamed (cmdutil.ResultJSON): the
// job's fields, then each item as it is read (runner.StatusStream), so a
// job of a million items starts printing at once and its items are never
// all in memory.
func writeStatusJSON(out io.Writer, home, id string) error {
	rj := cmdutil.NewResultJSON(out)
	if err := runner.StatusStream(home, id, rj.Head, rj.Item); err != nil {
		return err
	}
	return rj.Close()
}
