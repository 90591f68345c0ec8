package jobcmd

import (
	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cmd/action/internal/cmdutil"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

type validateOptions struct {
	file string
	json bool
}

func NewValidateCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate WORKFLOW.yml",
		Short: "Check a workflow file and show its resolved retry schedule",
		Long: "Parse and validate a workflow file strictly (unknown keys, wrong types and bad durations are errors\n" +
			"with file:line:col), then print the map phase's retry settings: the wait before each retry and the\n" +
			"worst case with jitter. Exit 0 when valid, 2 when not.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file = args[0]
			return runValidate(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func runValidate(f *cmdutil.Factory, opts *validateOptions) error {
	v := runner.ValidateFile(opts.file, runner.ValidateOptions{GitHubActions: f.Getenv("GITHUB_ACTIONS") == "true"})
	if opts.json {
		if err := cmdutil.WriteJSON(f.Out, v); err != nil {
			return err
		}
	} else {
		report.WriteValidation(f.Out, f.ErrOut, v)
	}
	if !v.Valid {
		return &cmdutil.ExitError{Code: cmdutil.ExitUsage}
	}
	return nil
}
