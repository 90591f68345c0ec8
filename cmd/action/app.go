package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
)

// Exit codes of the command line contract (DESIGN.md).
const (
	exitOK          = 0
	exitJobFailed   = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// app carries every side effect a subcommand may use, so tests can run the
// whole CLI in-process against temp dirs and buffers.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	// clock drives backoff sleeps of jobs; tests use a fake one.
	clock retry.Clock
	// environ is the process environment whose secret-looking values are
	// redacted from every output; nil means os.Environ.
	environ func() []string
	red     *redact.Redactor // built by redactor
}

// redactor returns the CLI's redactor over the environment (built once).
func (a *app) redactor() *redact.Redactor {
	if a.red == nil {
		env := os.Environ
		if a.environ != nil {
			env = a.environ
		}
		a.red = redact.New(redact.Config{Environ: env()})
	}
	return a.red
}

func newApp(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, clock: retry.SystemClock}
}

// home returns the state directory: $PRODIGY_HOME, else ~/.prodigy.
func (a *app) home() (string, error) {
	if h := a.getenv("PRODIGY_HOME"); h != "" {
		return filepath.Abs(h)
	}
	h := a.getenv("HOME")
	if h == "" {
		var err error
		if h, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("cannot locate the state directory: set PRODIGY_HOME: %w", err)
		}
	}
	return filepath.Join(h, ".prodigy"), nil
}

// exitError carries the exit code a failure maps to.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage, config or input error (exit 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

// usageErrf formats a usage error (exit 2).
func usageErrf(format string, args ...any) error { return usageErr(fmt.Errorf(format, args...)) }

// silentExit ends the command with code after the command already reported
// everything it had to say.
func silentExit(code int) error { return &exitError{code: code} }

// commandRegistry holds the constructors of the top-level subcommands; each
// subcommand file registers itself in init so files stay independent.
var commandRegistry = map[string]func(*app) *cobra.Command{}

// dlqRegistry holds the constructors of the `dlq` subcommands.
var dlqRegistry = map[string]func(*app) *cobra.Command{}

func registerCommand(name string, f func(*app) *cobra.Command)    { commandRegistry[name] = f }
func registerDLQCommand(name string, f func(*app) *cobra.Command) { dlqRegistry[name] = f }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "action",
		Short:         "Fan work items out to parallel agents in git worktrees, retry, merge, and dead-letter what still fails",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	for _, name := range sortedKeys(commandRegistry) {
		root.AddCommand(commandRegistry[name](a))
	}
	return root
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Execute runs the CLI with args and returns the process exit code.
func (a *app) Execute(ctx context.Context, args []string) int {
	if len(args) == 0 && a.getenv("GITHUB_ACTIONS") == "true" && actionMode != nil {
		return actionMode(ctx, a)
	}
	// Everything the CLI prints passes the redactor: stdout as a stream
	// (flushed before returning), stderr message by message so progress
	// is not delayed.
	stdout, stderr := a.stdout, a.stderr
	rout := a.redactor().Writer(stdout)
	a.stdout, a.stderr = rout, a.redactor().EachWrite(stderr)
	defer func() {
		_ = rout.Flush()
		a.stdout, a.stderr = stdout, stderr
	}()
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(a.stderr, "error: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(a.stderr, "error: %v\n", err)
	// cobra reports unknown commands, bad flags and wrong arg counts as
	// plain errors: they are usage errors.
	return exitUsage
}

// actionMode, when set, runs the GitHub Action entrypoint (no subcommand
// inside GitHub Actions).
var actionMode func(ctx context.Context, a *app) int
