package jobcmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

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
		if _, err := runner.FindJob(home, "", ""); errors.Is(err, runner.ErrAmbiguousJob) {
			if id, err = f.ResolveJobID(runner.Latest, ""); err != nil {
				return err
			}
			fmt.Fprintf(f.ErrOut, "several jobs: showing the newest, %s (`%s status latest` names it; `%s jobs` lists them)\n",
				id, cmdutil.Name, cmdutil.Name)
		}
	}
	status := runner.StatusSummary // the text report needs no item list
	if opts.json {
		status = runner.Status
	}
	res, err := status(home, id)
	if err != nil {
		return err
	}
	if opts.json {
		return cmdutil.WriteJSON(f.Out, res)
	}
	report.WriteStatus(f.Out, res)
	return nil
}
