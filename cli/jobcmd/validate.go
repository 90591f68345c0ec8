package jobcmd

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/validate"
)

type validateOptions struct {
	file   string
	json   bool
	claude config.ClaudeSettings
}

func NewValidateCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate WORKFLOW.yml",
		Short: "Check a workflow file and show its resolved retry schedule and Claude command lines",
		Long: "Parse and validate a workflow file strictly (unknown keys, wrong types and bad durations are errors\n" +
			"with file:line:col), then print the map phase's retry settings: the wait before each retry and the\n" +
			"worst case with jitter, and the Claude Code command line of every claude step (the --claude-* flags\n" +
			"show what they would change). Exit 0 when valid, 2 when not.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file = args[0]
			return runValidate(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	cmdutil.ClaudeFlags(cmd.Flags(), &opts.claude)
	return cmd
}

// validateMemoryLimit is the soft heap limit while validating: parsing is
// bounded by config's limits, and this keeps the garbage of a large file
// from growing the heap.
const validateMemoryLimit = 64 << 20

func runValidate(ctx context.Context, f *cmdutil.Factory, opts *validateOptions) error {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(validateMemoryLimit))
	interrupted := func() error {
		fmt.Fprintln(f.ErrOut, "validate: interrupted")
		return &cmdutil.ExitError{Code: cmdutil.ExitInterrupted}
	}
	if ctx.Err() != nil {
		return interrupted()
	}
	if err := cmdutil.CheckClaude(opts.claude); err != nil {
		return err
	}
	vo := validate.Options{GitHubActions: f.Getenv("GITHUB_ACTIONS") == "true", ClaudeCommand: f.Getenv("PRODIGY_CLAUDE_COMMAND"), Claude: opts.claude}
	// A signal stops validation at once.
	done := make(chan validate.Result, 1)
	go func() {
		done <- validate.File(opts.file, vo)
	}()
	var v validate.Result
	select {
	case v = <-done:
	case <-ctx.Done():
		return interrupted()
	}
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
