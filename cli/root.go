// Package cli is the command-line interface of prodigy-action: the cobra
// tree (NewRootCmd) and Execute, which maps errors to exit codes in one
// place. Each command lives in a subpackage as an options struct, a
// constructor and a run function (cli/cli's pkg/cmd/<noun>/<verb>);
// side effects come from cmdutil.Factory. cmd/action only calls Execute.
package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/actionapp"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/cli/dlqcmd"
	"github.com/prodigy-action/prodigy-action/cli/jobcmd"
	"github.com/prodigy-action/prodigy-action/cli/shardcmd"
	"github.com/prodigy-action/prodigy-action/cli/worktreecmd"
)

// Name is the command's name everywhere it calls itself: help, usage
// lines, suggestions, hints and the completion scripts (README's install
// line builds the binary under this name).
const Name = cmdutil.Name

// NewRootCmd builds the command tree: one constructor per command
// (options struct + constructor + run function, cli/cli's pkg/cmd style).
func NewRootCmd(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           Name,
		Short:         "Fan work items out to parallel agents in git worktrees, retry, merge, and dead-letter what still fails",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(f.In)
	root.SetOut(f.Out)
	root.SetErr(f.ErrOut)
	root.Version = f.VersionString()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.UsageError{Err: err} })
	root.AddCommand(
		jobcmd.NewRunCmd(f), jobcmd.NewResumeCmd(f), jobcmd.NewStatusCmd(f), jobcmd.NewValidateCmd(f),
		jobcmd.NewDemoCmd(f), jobcmd.NewJobsCmd(f), jobcmd.NewInitCmd(f), jobcmd.NewLogsCmd(f), dlqcmd.NewDLQCmd(f), worktreecmd.NewWorktreeCmd(f),
	)
	root.AddCommand(shardcmd.NewPlanCmd(f), shardcmd.NewShardCmd(f), shardcmd.NewGatherCmd(f))
	strict(root)
	return root
}

// strict makes argument errors usage errors everywhere, and makes every
// command with subcommands (the root included) refuse an unknown
// subcommand with a suggestion, and print its help and exit 2 when called
// without one (unless it has its own RunE, which then runs).
func strict(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2
	if c.HasSubCommands() {
		c.Args = cobra.ArbitraryArgs
		own := c.RunE // a group that does something itself (`jobs` lists)
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 && own != nil {
				return own(c, args)
			}
			if len(args) == 0 {
				c.SetOut(c.ErrOrStderr())
				_ = c.Help()
				return &cmdutil.ExitError{Code: cmdutil.ExitUsage}
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return cmdutil.UsageErrorf("%s (see %s --help)", msg, c.CommandPath())
		}
	} else if args := c.Args; args != nil {
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &cmdutil.UsageError{Err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strict(sub)
	}
}

// ActionMode reports whether Execute runs the GitHub Action (actionapp)
// rather than a command: no arguments, inside GitHub Actions.
func ActionMode(args []string, getenv func(string) string) bool {
	return len(args) == 0 && getenv("GITHUB_ACTIONS") == "true"
}

// Execute runs the CLI with args and returns the process exit code. Inside
// GitHub Actions without arguments it runs the Action (actionapp).
func Execute(ctx context.Context, f *cmdutil.Factory, args []string) int {
	if ActionMode(args, f.Getenv) {
		return f.ActionMain(ctx, actionapp.Deps{Getenv: f.Getenv, Stdout: f.Out, Stderr: f.ErrOut, Clock: f.Engine.Clock})
	}
	// Everything the CLI prints passes the redactor: stdout as a stream
	// (flushed before returning), stderr message by message so progress
	// is not delayed.
	stdout, stderr := f.Out, f.ErrOut
	rout := f.Redactor().Writer(stdout)
	f.Out, f.ErrOut = rout, f.Redactor().EachWrite(stderr)
	defer func() {
		_ = rout.Flush()
		f.Out, f.ErrOut = stdout, stderr
	}()
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	f.ShutdownTracing(ctx)
	if err != nil && !cmdutil.Silent(err) {
		fmt.Fprintf(f.ErrOut, "error: %v\n", err)
	}
	return cmdutil.ExitCode(err)
}
