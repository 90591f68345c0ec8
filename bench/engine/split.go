package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpuSplit is where the CPU time of one run went (-split): the measured
// process itself, the git processes by who started them and subcommand,
// and the rest (bash, mkdir, flock, …). It comes from a run of its own in
// which copies of cpushim stand in for git and bash (first in PATH) and
// log each process's rusage; the shims' own CPU is reported apart and is
// not in the other figures' meaning.
type cpuSplit struct {
	Kind        string  `json:"kind"`
	N           int     `json:"n"`
	MaxParallel int     `json:"max_parallel"`
	WallMS      float64 `json:"wall_ms"`
	// TotalCPUSeconds is the run's process tree, shims included.
	TotalCPUSeconds float64 `json:"total_cpu_s"`
	// SelfMSPerItem is the measured process's own CPU (the engine CLI; the
	// script's top-level bash) per item.
	SelfMSPerItem float64 `json:"self_cpu_ms_per_item"`
	// GitMSPerItem and GitProcessesPerItem cover every git process (rusage
	// of git and what it waited for: `worktree add`'s `reset`, hooks).
	GitMSPerItem        float64 `json:"git_cpu_ms_per_item"`
	GitProcessesPerItem float64 `json:"git_processes_per_item"`
	// OtherMSPerItem is the rest of the tree without the shims: bash (the
	// agent step's, the script's subshells, the engine's watchdog), mkdir,
	// flock, seq.
	OtherMSPerItem float64 `json:"other_cpu_ms_per_item"`
	// BashProcessesPerItem counts the bash processes the shim saw start
	// (the engine's steps and watchdog; the script's forks are not
	// processes started by exec and are not counted).
	BashProcessesPerItem float64 `json:"bash_processes_per_item"`
	// ShimMSPerItem is the shims' own CPU (measurement overhead).
	ShimMSPerItem float64 `json:"shim_cpu_ms_per_item"`
	// Git breaks the git processes down by starter and subcommand,
	// most expensive first.
	Git []gitCPU `json:"git"`
}

// gitCPU is one starter/subcommand of a cpuSplit.
type gitCPU struct {
	// Command is "<starter> <subcommand>": the starter is "engine" (the CLI
	// itself), "agent" (the engine's step shell) or "script".
	Command          string  `json:"command"`
	ProcessesPerItem float64 `json:"processes_per_item"`
	CPUMSPerItem     float64 `json:"cpu_ms_per_item"`
}

// buildShim builds cpushim into the work directory.
func buildShim(ctx context.Context, work string) (string, error) {
	bin := filepath.Join(work, "cpushim")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/prodigy-action/prodigy-action/bench/engine/cpushim")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build cpushim: %w\n%s", err, out)
	}
	return bin, nil
}

// shimDir makes dir with copies of the shim named git and bash, and
// real/git, real/bash linked to the programs they stand in for.
func shimDir(shim, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "real"), 0o755); err != nil {
		return err
	}
	for _, name := range []string{"git", "bash"} {
		real, err := exec.LookPath(name)
		if err != nil {
			return err
		}
		if real, err = filepath.Abs(real); err != nil {
			return err
		}
		if err := os.Symlink(real, filepath.Join(dir, "real", name)); err != nil {
			return err
		}
		data, err := os.ReadFile(shim)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// split runs kind once more with the CPU shims and aggregates their log.
func (b *bench) split(ctx context.Context, kind string, n, p int) (cpuSplit, error) {
	if b.shim == "" {
		var err error
		if b.shim, err = buildShim(ctx, b.work); err != nil {
			return cpuSplit{}, err
		}
	}
	dir := filepath.Join(b.work, fmt.Sprintf("shim-%s-n%d-p%d-%d", kind, n, p, b.runs+1))
	if err := shimDir(b.shim, dir); err != nil {
		return cpuSplit{}, fmt.Errorf("failed to set up the CPU shims: %w", err)
	}
	defer b.done(dir)
	m, runDir, err := b.start(ctx, kind, n, p, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")})
	if err != nil {
		return cpuSplit{}, err
	}
	if err := verifyContent(ctx, m.repo, n); err != nil {
		return cpuSplit{}, fmt.Errorf("shimmed %s run (N=%d, P=%d): %w", kind, n, p, err)
	}
	b.done(runDir)
	return readSplit(filepath.Join(dir, "cpu.log"), m)
}

// readSplit aggregates a cpushim log of run m.
func readSplit(path string, m measurement) (cpuSplit, error) {
	s := cpuSplit{Kind: m.Kind, N: m.N, MaxParallel: m.MaxParallel, WallMS: m.WallMS, TotalCPUSeconds: m.CPUSeconds}
	f, err := os.Open(path)
	if err != nil {
		return s, fmt.Errorf("failed to open the CPU shim log: %w", err)
	}
	defer f.Close()
	by := map[string]*gitCPU{}
	var git, shim, bashes float64
	var gitProcs int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Split(sc.Text(), "\t")
		if len(fl) != 6 {
			return s, fmt.Errorf("malformed CPU shim log line %q", sc.Text())
		}
		ppid, err1 := strconv.Atoi(fl[2])
		child, err2 := strconv.ParseFloat(fl[4], 64)
		own, err3 := strconv.ParseFloat(fl[5], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return s, fmt.Errorf("malformed CPU shim log line %q", sc.Text())
		}
		shim += own
		if fl[0] == "bash" {
			bashes++
			continue
		}
		starter := "script"
		if m.Kind == kindEngine || m.Kind == kindBefore {
			starter = "agent"
			if ppid == m.pid {
				starter = "engine"
			}
		}
		key := starter + " " + fl[3]
		c := by[key]
		if c == nil {
			c = &gitCPU{Command: key}
			by[key] = c
		}
		c.ProcessesPerItem++
		c.CPUMSPerItem += child * 1000
		git += child
		gitProcs++
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("failed to read the CPU shim log: %w", err)
	}
	n := float64(m.N)
	for _, c := range by {
		c.ProcessesPerItem = round2(c.ProcessesPerItem / n)
		c.CPUMSPerItem = round2(c.CPUMSPerItem / n)
		s.Git = append(s.Git, *c)
	}
	slices.SortFunc(s.Git, func(a, b gitCPU) int {
		return cmp.Or(cmp.Compare(b.CPUMSPerItem, a.CPUMSPerItem), cmp.Compare(a.Command, b.Command))
	})
	s.SelfMSPerItem = round2(m.SelfCPUSeconds * 1000 / n)
	s.GitMSPerItem = round2(git * 1000 / n)
	s.GitProcessesPerItem = round2(float64(gitProcs) / n)
	s.ShimMSPerItem = round2(shim * 1000 / n)
	s.BashProcessesPerItem = round2(bashes / n)
	s.OtherMSPerItem = round2((m.CPUSeconds - m.SelfCPUSeconds - git - shim) * 1000 / n)
	return s, nil
}
