package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// resultsBranch is the results branch of every run.
const resultsBranch = "bench/results"

// Run kinds.
const (
	kindEngine   = "engine"   // the CLI with its defaults: --isolation pool --merge tree
	kindBefore   = "before"   // the CLI with --isolation fresh --merge worktree
	kindBaseline = "baseline" // the plain-git bash script, a worktree per item
	kindStrong   = "strong"   // a git-savvy user's script: reused worktrees, object-only merges
)

// measurement is one timed run.
type measurement struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	N           int    `json:"n"`
	MaxParallel int    `json:"max_parallel"`
	// WallMS is the wall time of the measured process, start to exit.
	WallMS      float64 `json:"wall_ms"`
	ItemsPerSec float64 `json:"items_per_sec"`
	// CPUSeconds is user+sys time of the measured process and every
	// descendant it (transitively) waited for, from wait4's rusage.
	CPUSeconds float64 `json:"cpu_s"`
	// SelfCPUSeconds is the measured process's own user+sys time (the
	// engine CLI, or the script's top-level bash), ChildCPUSeconds that of
	// the descendants it waited for (git, bash, …): CPUSeconds split, from
	// /proc/<pid>/stat read before the process is reaped (Linux; 10 ms
	// ticks). Both are 0 where unknown.
	SelfCPUSeconds  float64 `json:"self_cpu_s"`
	ChildCPUSeconds float64 `json:"children_cpu_s"`
	// PeakRSSKB is ru_maxrss of the measured process tree (see maxRSSKB).
	PeakRSSKB int64 `json:"peak_rss_kb"`
	// Tree is `git rev-parse bench/results^{tree}` after the run.
	Tree string `json:"tree"`
	// EngineDurationMS is the engine's own duration_ms (engine runs only).
	EngineDurationMS int64 `json:"engine_duration_ms,omitempty"`
	// TimingsMS is the mean of the items' timings_ms (engine runs only).
	TimingsMS *runner.Timings `json:"timings_ms,omitempty"`
	// FirstAgentMS is the time from process start to the engine's first
	// agent_started event (engine runs only): the job's fixed setup cost.
	FirstAgentMS float64 `json:"time_to_first_agent_ms,omitempty"`
	// ResultMS is when the engine printed its --json result (process start
	// to the first byte on stdout); WallMS - ResultMS is what it did after
	// reporting (deleting the pool's worktrees, runner.Engine.DeferTeardown).
	ResultMS float64 `json:"result_ms,omitempty"`
	// FirstCheckoutMS is the engine's own checkout of its first pool slot
	// in this run (-checkout only; from a GIT_TRACE2_EVENT file), and
	// FirstAgentVsOwnCheckout is FirstAgentMS over it.
	FirstCheckoutMS         float64 `json:"first_slot_checkout_ms,omitempty"`
	FirstAgentVsOwnCheckout float64 `json:"time_to_first_agent_vs_own_checkout,omitempty"`

	repo string // the clone the run worked on
	pid  int    // the measured process
}

// runSpec is what one run needs.
type runSpec struct {
	kind        string
	n           int
	maxParallel int
	template    string   // bare template repository
	workflow    string   // workflow file (engine runs)
	action      string   // CLI binary (engine runs)
	dir         string   // a new directory for this run's clone, state and logs
	env         []string // extra environment (profiling)
	sparse      []string // engine --sparse directories
	// traceCheckout traces the engine's git processes (GIT_TRACE2_EVENT)
	// to time its first pool slot checkout (measurement.FirstCheckoutMS).
	traceCheckout bool
}

// runOne clones the template into spec.dir and times one run on it.
func runOne(ctx context.Context, s runSpec) (measurement, error) {
	m := measurement{Kind: s.kind, N: s.n, MaxParallel: s.maxParallel, repo: filepath.Join(s.dir, "repo")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return m, fmt.Errorf("failed to create run dir: %w", err)
	}
	if err := cloneRepo(ctx, s.template, m.repo); err != nil {
		return m, err
	}
	var cmd *exec.Cmd
	switch s.kind {
	case kindEngine, kindBefore:
		iso, merge := "pool", "tree"
		if s.kind == kindBefore {
			iso, merge = "fresh", "worktree"
		}
		m.Description = fmt.Sprintf("engine --isolation %s --merge %s", iso, merge)
		cmd = exec.CommandContext(ctx, s.action, "run", s.workflow, "--repo", m.repo, "--json",
			"--max-parallel", strconv.Itoa(s.maxParallel), "--branch", resultsBranch,
			"--job-id", "bench-"+s.kind, "--isolation", iso, "--merge", merge)
		for _, d := range s.sparse {
			cmd.Args = append(cmd.Args, "--sparse", d)
			m.Description += " --sparse " + d
		}
		cmd.Env = append(withoutEnv(os.Environ(), "PRODIGY_HOME", "BENCH_STEP_STARTS"), "PRODIGY_HOME="+filepath.Join(s.dir, "home"),
			"BENCH_STEP_STARTS="+filepath.Join(s.dir, "step-starts"))
	case kindBaseline:
		script := filepath.Join(s.dir, "baseline.sh")
		if err := os.WriteFile(script, []byte(baselineScript()), 0o755); err != nil {
			return m, fmt.Errorf("failed to write baseline script: %w", err)
		}
		m.Description = fmt.Sprintf("plain git: worktree add -b, commit, flock merge --no-ff, worktree remove, xargs -P %d", s.maxParallel)
		cmd = exec.CommandContext(ctx, "bash", script, m.repo, filepath.Join(s.dir, "work"),
			strconv.Itoa(s.n), strconv.Itoa(s.maxParallel), resultsBranch)
		cmd.Env = os.Environ()
	case kindStrong:
		script := filepath.Join(s.dir, "strong.sh")
		if err := os.WriteFile(script, []byte(strongScript()), 0o755); err != nil {
			return m, fmt.Errorf("failed to write strong baseline script: %w", err)
		}
		m.Description = fmt.Sprintf("git-savvy script: %d reused worktrees, reset+clean per item, flock merge-tree --write-tree + commit-tree + update-ref", s.maxParallel)
		cmd = exec.CommandContext(ctx, "bash", script, m.repo, filepath.Join(s.dir, "work"),
			strconv.Itoa(s.n), strconv.Itoa(s.maxParallel), resultsBranch)
		cmd.Env = os.Environ()
	default:
		return m, fmt.Errorf("unknown run kind %q", s.kind)
	}
	cmd.Env = append(cmd.Env, s.env...)
	if s.traceCheckout {
		cmd.Env = append(cmd.Env, traceEnv(filepath.Join(s.dir, "trace2.json"))...)
	}
	ownGroup(cmd)
	cmd.WaitDelay = time.Minute
	var stdout firstWrite
	logPath := filepath.Join(s.dir, "stderr.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return m, fmt.Errorf("failed to create %s: %w", logPath, err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = &stdout, logFile

	start := time.Now()
	runErr := cmd.Start()
	if runErr == nil {
		m.pid = cmd.Process.Pid
		if self, children, err := ownCPU(cmd.Process.Pid); err == nil {
			m.SelfCPUSeconds, m.ChildCPUSeconds = round3(self), round3(children)
		}
		runErr = cmd.Wait()
	}
	wall := time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		m.PeakRSSKB = maxRSSKB(ps)
		m.CPUSeconds = round3((ps.UserTime() + ps.SystemTime()).Seconds())
	}
	if runErr != nil {
		return m, fmt.Errorf("%s run (N=%d, P=%d) failed: %w\n%s", s.kind, s.n, s.maxParallel, runErr, tail(logPath, 20))
	}
	m.WallMS = float64(wall.Microseconds()) / 1000
	if (s.kind == kindEngine || s.kind == kindBefore) && !stdout.at.IsZero() {
		m.ResultMS = ms(stdout.at.Sub(start))
	}
	m.ItemsPerSec = float64(s.n) / wall.Seconds()
	if s.kind == kindEngine || s.kind == kindBefore {
		if err := m.readEngineResult(stdout.Bytes()); err != nil {
			return m, fmt.Errorf("%s run (N=%d, P=%d): %w", s.kind, s.n, s.maxParallel, err)
		}
		if m.FirstAgentMS, err = firstAgentMS(filepath.Join(s.dir, "step-starts"), start); err != nil {
			return m, fmt.Errorf("%s run (N=%d, P=%d): %w", s.kind, s.n, s.maxParallel, err)
		}
		if s.traceCheckout {
			if m.FirstCheckoutMS, err = firstCheckoutMS(filepath.Join(s.dir, "trace2.json")); err != nil {
				return m, fmt.Errorf("%s run (N=%d, P=%d): %w", s.kind, s.n, s.maxParallel, err)
			}
			m.FirstAgentVsOwnCheckout = round2(m.FirstAgentMS / m.FirstCheckoutMS)
		}
	}
	m.Tree, err = gitOut(ctx, m.repo, nil, "rev-parse", resultsBranch+"^{tree}")
	return m, err
}

// readEngineResult checks the engine's --json result (completed, every item
// merged) and takes its duration and mean per-item timings.
func (m *measurement) readEngineResult(out []byte) error {
	var res runner.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("failed to decode the engine's --json output: %w", err)
	}
	if res.Status != runner.StatusCompleted || res.Successful != m.N || len(res.Items) != m.N {
		return fmt.Errorf("engine job %s: status %s, %d/%d items successful, %d in the DLQ (%s)",
			res.JobID, res.Status, res.Successful, m.N, res.DLQCount, res.Error)
	}
	if res.ResultsBranch != resultsBranch {
		return fmt.Errorf("engine results branch is %q, want %q", res.ResultsBranch, resultsBranch)
	}
	m.EngineDurationMS = res.DurationMS
	var sum runner.Timings
	for _, it := range res.Items {
		if it.State != runner.ItemMerged {
			return fmt.Errorf("item %s ended %s: %s", it.ItemID, it.State, it.Error)
		}
		if it.TimingsMS == nil {
			return fmt.Errorf("item %s has no timings_ms", it.ItemID)
		}
		t := it.TimingsMS
		sum.Prepare += t.Prepare
		sum.Steps += t.Steps
		sum.Merge += t.Merge
		sum.Cleanup += t.Cleanup
		sum.Bookkeeping += t.Bookkeeping
	}
	n := float64(len(res.Items))
	m.TimingsMS = &runner.Timings{
		Prepare: round2(sum.Prepare / n), Steps: round2(sum.Steps / n), Merge: round2(sum.Merge / n),
		Cleanup: round2(sum.Cleanup / n), Bookkeeping: round2(sum.Bookkeeping / n),
	}
	return nil
}

// baselineScript is the plain-git baseline: per item, the isolation the
// engine provides, done by hand with the git CLI. Arguments: repo, work dir,
// N, max_parallel, results branch.
func baselineScript() string {
	step := strings.ReplaceAll(agentScript, "${item.n}", "${i}")
	return `#!/usr/bin/env bash
# Plain-git baseline of bench/engine. The results branch gets its own
# worktree made from HEAD; then, for items 1..N under xargs -P <max_parallel>:
# git worktree add -b <branch> <dir> <results-branch>, the agent's write and
# commit, git merge --no-ff into the results worktree (serialized by flock),
# git worktree remove --force, git branch -D.
#
# git 2.39's worktree commands are not safe to run concurrently: a command
# that lists worktrees (worktree add/remove, branch -D) fails with "failed to
# read .git/worktrees/<name>/commondir" while another worktree is being
# created. So the worktree metadata changes hold worktree.lock, and the
# checkout that worktree add would do (reset --hard) runs outside it.
set -euo pipefail
repo=$1 work=$2 n=$3 parallel=$4 results=$5
mkdir -p "$work/agents"
git -C "$repo" worktree add -q -b "$results" "$work/results" HEAD
export repo work results

item() {
	set -euo pipefail
	local i=$1
	local branch="bench-agent-$i" dir="$work/agents/item-$i"
	flock "$work/worktree.lock" git -C "$repo" worktree add -q --no-checkout -b "$branch" "$dir" "$results"
	git -C "$dir" reset -q --hard
	(
		cd "$dir"
` + indent(step, "\t\t") + `	)
	flock "$work/merge.lock" git -C "$work/results" merge -q --no-ff --no-edit -m "merge item $i" "$branch"
	(
		flock 9
		git -C "$repo" worktree remove --force "$dir"
		git -C "$repo" branch -q -D "$branch"
	) 9>"$work/worktree.lock"
}
export -f item

seq 1 "$n" | xargs -P "$parallel" -n 1 bash -c 'item "$1"' _
`
}

// strongScript is the strong baseline: what a git-savvy user writes for the
// same job. max_parallel worktrees are made once (detached at the results
// tip) and reused; items are dealt to them round-robin; per item the slot is
// reset to the current results tip and cleaned, the agent's lines run and
// commit, and the commit is merged on objects only — merge-tree
// --write-tree, commit-tree with both parents, update-ref compare-and-swap —
// under one flock. No merge touches a working tree. Arguments: repo, work
// dir, N, max_parallel, results branch.
func strongScript() string {
	step := strings.ReplaceAll(agentScript, "${item.n}", "${i}")
	return `#!/usr/bin/env bash
# Strong plain-git baseline of bench/engine (see strongScript in runs.go).
set -euo pipefail
repo=$1 work=$2 n=$3 parallel=$4 results=$5
mkdir -p "$work"
git -C "$repo" branch "$results" HEAD
for s in $(seq 1 "$parallel"); do
	git -C "$repo" worktree add -q --detach "$work/slot-$s" "$results"
done

merge() { # slot item commit
	local tip tree mc
	tip=$(git -C "$repo" rev-parse "refs/heads/$results")
	tree=$(git -C "$repo" merge-tree --write-tree "$tip" "$3")
	mc=$(git -C "$repo" commit-tree "$tree" -p "$tip" -p "$3" -m "merge item $2")
	git -C "$repo" update-ref "refs/heads/$results" "$mc" "$tip"
}

worker() { # slot
	local s=$1 dir="$work/slot-$1" i
	for ((i = s; i <= n; i += parallel)); do
		git -C "$dir" reset -q --hard "refs/heads/$results"
		git -C "$dir" clean -fdq
		(
			cd "$dir"
` + indent(step, "			") + `		)
		(
			flock 9
			merge "$s" "$i" "$(git -C "$dir" rev-parse HEAD)"
		) 9>"$work/merge.lock"
	done
}

pids=()
for s in $(seq 1 "$parallel"); do
	worker "$s" &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for s in $(seq 1 "$parallel"); do
	git -C "$repo" worktree remove --force "$work/slot-$s"
done
exit "$status"
`
}

// withoutEnv drops every NAME=… entry for the given names.
func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// round3 rounds to three decimals.
func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// round2 rounds to two decimals.
func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// firstWrite is a buffer that notes when it was first written to. It
// does not embed bytes.Buffer: io.Copy would use the buffer's ReadFrom and
// bypass Write.
type firstWrite struct {
	buf bytes.Buffer
	at  time.Time
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if f.at.IsZero() {
		f.at = time.Now()
	}
	return f.buf.Write(p)
}

// Bytes returns what was written.
func (f *firstWrite) Bytes() []byte { return f.buf.Bytes() }
