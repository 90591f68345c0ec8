// Command engine benchmarks the prodigy-action engine against a plain-git
// baseline that does the same per-item isolation by hand.
//
// In one invocation it builds a synthetic repository (-files, -size-mb), a
// workflow of -n items whose agent writes out/item-<n>.txt and commits it,
// and runs, each on its own clone of that repository:
//
//   - the engine (the real CLI binary, --isolation pool --merge tree);
//   - the engine's "before" configuration (--isolation fresh --merge worktree);
//   - a bash script doing per item `git worktree add -b`, the same write and
//     commit, a flock-serialized `git merge --no-ff` into a results worktree,
//     `git worktree remove --force` and `git branch -D`, under xargs -P.
//
// It fails unless every run produced the same merged tree with every item's
// file present, then prints wall time, items/s and peak RSS of each run, the
// ratio baseline/engine (speedup_vs_git_baseline) and the engine's mean
// per-item time split. -json prints one JSON object instead; -sweep adds a
// table over max_parallel and N; -profile counts the git processes per item
// (GIT_TRACE2_EVENT).
//
// Usage:
//
//	go run ./bench/engine [-files 5000] [-size-mb 20] [-n 200] [-max-parallel 2] [-sweep] [-profile] [-json]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the benchmark with command-line args, writing the report to
// stdout and progress to stderr, and returns the process exit code: 0 on
// success, 1 if a run failed or the merged trees differ, 2 on bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if err == errHelp {
			return 0
		}
		fmt.Fprintln(stderr, "bench/engine:", err)
		return 2
	}
	// Every run (engine, baselines) reads -slots from the environment.
	if slots > 0 {
		os.Setenv("BENCH_SLOTS", strconv.Itoa(slots))
	} else {
		os.Unsetenv("BENCH_SLOTS")
	}
	rep, err := benchmark(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench/engine: FAILED:", err)
		return 1
	}
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench/engine:", err)
		return 1
	}
	return 0
}
