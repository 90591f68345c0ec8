package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/prodigy-action/prodigy-action/runner"
)

// hardAbortOnSecondSignal waits for a second interrupt after ctx ended (the
// first one winds the job down gracefully), then ends every agent's
// process group, says so on stderr and exits 128+signal. sigs must receive
// the first signal too (it is registered before the first can arrive).
func hardAbortOnSecondSignal(ctx context.Context, sigs <-chan os.Signal, stderr io.Writer, exit func(int)) {
	<-ctx.Done()
	<-sigs // the first signal
	sig := <-sigs
	n := runner.KillProcesses()
	fmt.Fprintf(stderr, "second interrupt (%v): ended %d agent process group(s); the job stays resumable\n", sig, n)
	code := 130
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	exit(code)
}
