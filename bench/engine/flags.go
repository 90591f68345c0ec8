package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// config is the benchmark configuration, one field per flag.
type config struct {
	Files         int      // files in the synthetic repository
	SizeMB        float64  // total size of those files, in MiB
	N             int      // work items per run
	MaxParallel   int      // agents at once
	Seed          uint64   // seed of the repository content
	Before        bool     // also run the engine's fresh/worktree configuration
	Sweep         bool     // also run the max_parallel and N sweeps
	SweepParallel []int    // max_parallel values of the sweep (at N)
	SweepN        []int    // N values of the sweep (at max_parallel 2)
	Profile       bool     // count git processes per item with GIT_TRACE2_EVENT
	JSON          bool     // print one JSON object instead of text
	Action        string   // prebuilt CLI binary; "" builds ./cmd/action
	Dir           string   // work directory; "" means a new temp dir
	Keep          bool     // keep the work directory
	Sparse        []string // engine --sparse directories (plus out/)
	Baselines     bool     // run the plain-git and strong baselines
	Plain         bool     // run the plain-git baseline (with Baselines)
	Checkout      bool     // measure checkout, disk and per-item reset cost
	Split         bool     // split CPU time by process (cpushim runs)
	PProf         string   // write a CPU profile of one more engine run here
	SweepFiles    []int    // repository sizes of the size sweep (replaces the main runs)
	Repeat        int      // runs per kind and point of the size sweep
}

// errHelp reports that -h was asked for (usage already printed).
var errHelp = errors.New("help requested")

// parseFlags parses args into a config; usage goes to stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{SweepParallel: []int{1, 2, 4, 8}, SweepN: []int{50, 200, 1000}, Baselines: true, Plain: true}
	fs := flag.NewFlagSet("bench/engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Files, "files", 5000, "files in the synthetic repository")
	fs.Float64Var(&c.SizeMB, "size-mb", 20, "total size of the repository's files in MiB")
	fs.IntVar(&c.N, "n", 200, "work items per run")
	fs.IntVar(&c.MaxParallel, "max-parallel", 2, "agents at once (engine --max-parallel, baseline xargs -P)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the synthetic repository's content")
	fs.BoolVar(&c.Before, "before", true, "also run the engine with --isolation fresh --merge worktree")
	fs.BoolVar(&c.Sweep, "sweep", false, "also sweep max_parallel (at -n) and N (at max_parallel 2) for engine and baseline")
	fs.Func("sweep-p", "comma-separated max_parallel values of the sweep (default 1,2,4,8)", intList(&c.SweepParallel))
	fs.Func("sweep-n", "comma-separated N values of the sweep (default 50,200,1000)", intList(&c.SweepN))
	fs.BoolVar(&c.Profile, "profile", false, "count git processes and their time per item (GIT_TRACE2_EVENT; extra runs)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout")
	fs.StringVar(&c.Action, "action", "", "prebuilt action binary (default: go build ./cmd/action into the work dir)")
	fs.StringVar(&c.Dir, "dir", "", "work directory (default: a new temp dir, removed at the end)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (repositories, logs, traces)")
	fs.Func("sparse", "engine runs check out only this directory (repeatable; out/, where agents write, is added); implies -checkout", func(v string) error {
		c.Sparse = append(c.Sparse, v)
		c.Checkout = true
		return nil
	})
	fs.BoolVar(&c.Baselines, "baselines", true, "run the plain-git and strong baselines (and -before); false measures the engine alone")
	fs.BoolVar(&c.Plain, "plain", true, "run the plain-git baseline (a checkout per item: slow on big repositories); false keeps the strong one")
	fs.BoolVar(&c.Checkout, "checkout", false, "measure one full checkout, disk per worktree and per-item reset (and time to first agent)")
	fs.BoolVar(&c.Split, "split", false, "split the CPU time of engine and strong baseline by process: the CLI itself, git per subcommand, bash and the rest (extra runs with git/bash shims)")
	fs.StringVar(&c.PProf, "pprof", "", "write a CPU profile (runtime/pprof) of one more engine run to this file, and the heap live at its end to FILE.heap")
	fs.Func("sweep-files", "comma-separated repository sizes (files): run only the size sweep, strong baseline vs engine at every -sweep-n and -max-parallel, -repeat times (bytes per file as -files/-size-mb)", intList(&c.SweepFiles))
	fs.IntVar(&slots, "slots", 0, "items write out/item-<n mod K>.txt: the repository stops growing after K items (0: every item adds a file)")
	fs.IntVar(&c.Repeat, "repeat", 3, "runs per kind and point of the -sweep-files sweep (medians reported)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, errHelp
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case c.Files < 1:
		return c, errors.New("-files must be at least 1")
	case c.SizeMB <= 0:
		return c, errors.New("-size-mb must be positive")
	case c.N < 1:
		return c, errors.New("-n must be at least 1")
	case c.Repeat < 1:
		return c, errors.New("-repeat must be at least 1")
	case c.MaxParallel < 1:
		return c, errors.New("-max-parallel must be at least 1")
	}
	return c, nil
}

// intList returns a flag.Func parser of comma-separated positive integers.
func intList(dst *[]int) func(string) error {
	return func(s string) error {
		var out []int
		for f := range strings.SplitSeq(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 1 {
				return fmt.Errorf("%q is not a positive integer", f)
			}
			out = append(out, v)
		}
		*dst = out
		return nil
	}
}
