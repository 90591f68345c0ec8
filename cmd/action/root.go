package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prodigy-action/prodigy-action/actionapp"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Exit codes of the command line contract (DESIGN.md).
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// factory carries every side effect a command may use (cli/cli's
// cmdutil.Factory), so tests run the whole CLI in-process.
type factory struct {
	in          io.Reader
	out, errOut io.Writer
	getenv      func(string) string
	now         func() time.Time
	// engine is the template of every job's runner options (clock, stderr,
	// environment); tests put a fake clock there.
	engine runner.Options
	// actionMain runs the GitHub Action (no subcommand inside GitHub Actions).
	actionMain func(context.Context, actionapp.Deps) int
}

func newFactory(in io.Reader, out, errOut io.Writer, getenv func(string) string) *factory {
	return &factory{in: in, out: out, errOut: errOut, getenv: getenv, now: time.Now,
		engine: runner.Options{Stderr: errOut, Getenv: getenv}, actionMain: actionapp.Main}
}

// home returns the state directory: $PRODIGY_HOME, else ~/.prodigy.
func (f *factory) home() (string, error) {
	if h := f.getenv("PRODIGY_HOME"); h != "" {
		return filepath.Abs(h)
	}
	h := f.getenv("HOME")
	if h == "" {
		var err error
		if h, err = os.UserHomeDir(); err != nil {
			return "", usageErrorf("cannot locate the state directory: set PRODIGY_HOME: %w", err)
		}
	}
	return filepath.Join(h, ".prodigy"), nil
}

// UsageError marks a usage, config or input error: exit 2, nothing was run.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// exitError ends a command with code after it reported what it had to say
// (err nil: nothing more to print).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the one mapping from errors to the exit codes of the
// contract: usage, config and input errors 2; interrupts 130; every other
// failure 1 (a corrupt DLQ record, a failed job, a git error).
func exitCode(err error) int {
	var ee *exitError
	var ue *UsageError
	var rue *runner.UsageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.As(err, &rue):
		return exitUsage
	case errors.Is(err, runner.ErrInterrupted), errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitFailed
}

func newRootCmd(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "action",
		Short:         "Fan work items out to parallel agents in git worktrees, retry, merge, and dead-letter what still fails",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(f.in)
	root.SetOut(f.out)
	root.SetErr(f.errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	root.AddCommand(
		newRunCmd(f), newResumeCmd(f), newStatusCmd(f), newValidateCmd(f), newDemoCmd(f),
		newDLQCmd(f), newWorktreeCmd(f),
	)
	strict(root)
	return root
}

// strict makes argument errors usage errors everywhere, and makes every
// command with subcommands (the root included) refuse an unknown
// subcommand with a suggestion, and print its help and exit 2 when called
// without one.
func strict(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2
	if c.HasSubCommands() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				c.SetOut(c.ErrOrStderr())
				_ = c.Help()
				return &exitError{code: exitUsage}
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageErrorf("%s (see %s --help)", msg, c.CommandPath())
		}
	} else if args := c.Args; args != nil {
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &UsageError{Err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strict(sub)
	}
}

// aliasFlags makes fs accept each alias as the name it maps to (Prodigy's
// spellings: --workflow-id for --job-id, --max-parallel for --parallel).
func aliasFlags(fs *pflag.FlagSet, aliases map[string]string) {
	next := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := aliases[name]; ok {
			name = to
		}
		return next(fs, name)
	})
}

// jobIDFlag adds --job-id (alias --workflow-id).
func jobIDFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "job-id", "", usage+" (alias --workflow-id)")
	aliasFlags(fs, map[string]string{"workflow-id": "job-id"})
}

// execute runs the CLI with args and returns the process exit code.
func (f *factory) execute(ctx context.Context, args []string) int {
	if len(args) == 0 && f.getenv("GITHUB_ACTIONS") == "true" {
		return f.actionMain(ctx, actionapp.Deps{Getenv: f.getenv, Stdout: f.out, Stderr: f.errOut, Clock: f.engine.Clock})
	}
	root := newRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	if err != nil && !(errors.As(err, &ee) && ee.err == nil) {
		fmt.Fprintf(f.errOut, "error: %v\n", err)
	}
	return exitCode(err)
}
