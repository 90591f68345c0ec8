// Command profaction is the action CLI with a CPU profile: bench/engine
// -pprof runs it in place of cmd/action. When BENCH_CPUPROFILE names a
// file, the whole command is profiled into it (runtime/pprof); otherwise it
// is the plain CLI. It has no signal handling beyond the context (a
// benchmark run is not interrupted).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profaction:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "profaction:", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	code := cli.Execute(ctx, cmdutil.NewFactory(os.Stdin, os.Stdout, os.Stderr, os.Getenv), os.Args[1:])
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}
