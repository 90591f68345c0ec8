// Command action runs prodigy-action: a MapReduce runner for agents in git
// worktrees with retries and a dead letter queue. See README.md.
//
// This package only wires: the process's streams, environment and signals
// go into a cmdutil.Factory, and package cli runs the command tree (flags
// become options for runner, dlq and actionapp; errors become exit codes
// in one place, cmdutil.ExitCode).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

func main() {
	// After the first signal the job winds down gracefully. On the command
	// line a second one ends the agents' process groups and exits at once.
	// The Action never aborts: GitHub cancels a step with SIGINT, then
	// SIGTERM 7.5 s later, then SIGKILL, and the Action spends the time
	// after the first signal publishing what finished (actionapp's
	// CancelBudget), which a later signal must not cut short.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if cli.ActionMode(os.Args[1:], os.Getenv) {
		go noteLaterSignals(ctx, sigs, os.Stderr)
	} else {
		go hardAbortOnSecondSignal(ctx, sigs, os.Stderr, os.Exit)
	}
	// A reader that goes away (`| head -3`) must not kill a running job
	// and leave it "running (process gone)": with SIGPIPE notified (and
	// dropped) a write into a closed pipe fails with EPIPE instead, output
	// is lost and the job finishes. Agents' processes still start with the
	// default SIGPIPE disposition.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	code := cli.Execute(ctx, cmdutil.NewFactory(os.Stdin, os.Stdout, os.Stderr, os.Getenv), os.Args[1:])
	stop()
	os.Exit(code)
}
