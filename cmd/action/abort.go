package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/prodigy-action/prodigy-action/internal/procsup"
)

// hardAbortOnSecondSignal waits for a second interrupt after ctx ended (the
// first one winds the job down gracefully), then ends every agent's
// process group, says so on stderr and exits 128+signal. sigs must receive
// the first signal too (it is registered before the first can arrive).
func hardAbortOnSecondSignal(ctx context.Context, sigs <-chan os.Signal, stderr io.Writer, exit func(int)) {
	<-ctx.Done()
	<-sigs // the first signal
	sig := <-sigs
	n := procsup.KillProcesses()
	fmt.Fprintf(stderr, "second interrupt (%v): ended %d agent process group(s); the job stays resumable\n", sig, n)
	code := 130
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	exit(code)
}

// noteLaterSignals is the Action's counterpart of hardAbortOnSecondSignal:
// every signal after the first is only noted on stderr (the process keeps
// them from ending it, since they stay registered), so GitHub's SIGTERM
// 7.5 s after its SIGINT never interrupts the publishing of what finished.
func noteLaterSignals(ctx context.Context, sigs <-chan os.Signal, stderr io.Writer) {
	<-ctx.Done()
	<-sigs // the first signal
	for sig := range sigs {
		fmt.Fprintf(stderr, "signal %v ignored: the Action is publishing what finished\n", sig)
	}
}
