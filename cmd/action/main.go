// Command action runs prodigy-action: a MapReduce runner for agents in git
// worktrees with retries and a dead letter queue. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// After the first signal the job winds down gracefully; a second one
	// ends the agents' process groups and exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go hardAbortOnSecondSignal(ctx, sigs, os.Stderr, os.Exit)
	code := newApp(os.Stdin, os.Stdout, os.Stderr, os.Getenv).Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
