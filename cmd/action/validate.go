package main

import (
	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

type validateOptions struct {
	file string
	json bool
}

func newValidateCmd(f *factory) *cobra.Command {
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

func runValidate(f *factory, opts *validateOptions) error {
	v := runner.ValidateFile(opts.file, runner.ValidateOptions{GitHubActions: f.getenv("GITHUB_ACTIONS") == "true"})
	if opts.json {
		if err := writeJSON(f.out, v); err != nil {
			return err
		}
	} else {
		report.WriteValidation(f.out, f.errOut, v)
	}
	if !v.Valid {
		return &exitError{code: exitUsage}
	}
	return nil
}
