// Command profaction is the action CLI with a CPU profile: bench/engine
// -pprof runs it in place of cmd/action. When BENCH_CPUPROFILE names a
// file, the whole command is profiled into it (runtime/pprof); when
// BENCH_HEAPPROFILE names one, the heap still live when the command ends
// (after a GC) is written there, with the process's peak heap on stderr;
// otherwise it is the plain CLI. It has no signal handling beyond the context (a
// benchmark run is not interrupted).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
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
	if path := os.Getenv("BENCH_HEAPPROFILE"); path != "" {
		writeHeap(path)
	}
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

// writeHeap writes the live heap's profile to path and the memory
// statistics that bound the peak to stderr.
func writeHeap(path string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "profaction: heap sys %.1f MiB, in use %.1f MiB, released %.1f MiB, GC cycles %d\n",
		float64(ms.HeapSys)/(1<<20), float64(ms.HeapInuse)/(1<<20), float64(ms.HeapReleased)/(1<<20), ms.NumGC)
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profaction:", err)
		return
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "profaction:", err)
	}
}
