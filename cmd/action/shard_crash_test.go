package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// shardCrashWorkflow: setup commits (so the plan has a base.bundle); an
// item fails when its number modulo the first count is the second (until
// the file named first exists); items whose number modulo the third count
// is 2 (2 and 6 of the default 8: shards 0 and 1 of two) write the same
// file, so gather replays the later shards item by item; reduce commits.
const shardCrashWorkflow = `
name: shard-crash
mode: mapreduce
setup:
  - shell: echo base > setup.txt && git add -A && git commit -qm setup
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        n=${item.n}
        if [ $(( n %% %[2]d )) = %[3]d ] && [ ! -e %[1]q ]; then echo "item $n failed" >&2; exit 3; fi
        f="f$n.txt"
        if [ $(( n %% %[4]d )) = 2 ]; then f=shared.txt; fi
        echo "$n" > "$f" && git add -A && git commit -qm "item $n"
error_policy:
  on_item_failure: dlq
  continue_on_failure: true
reduce:
  - shell: files=$(ls | tr "\n" " ") && echo "$files" > files.txt && git add -A && git commit -qm reduce
`

// shardCrashEnv is one sharded job of the crash tests: an origin
// repository of 8 items, a plan directory, two shard outputs and a
// gatherer, each in its own clone and state directory.
type shardCrashEnv struct {
	t                    *testing.T
	origin, wfPath, plan string
	outs                 []string
	fixed                string
}

// shardCrashScale: 8 items over 2 shards; PRODIGY_SHARD_SCALE=ITEMSxSHARDS
// (e.g. 10000x50) runs the gather windows at scale.
func shardCrashScale(t *testing.T) (items, shards, failEvery, conflictEvery int, scaled bool) {
	s := os.Getenv("PRODIGY_SHARD_SCALE")
	if s == "" {
		return 8, 2, 5, 4, false
	}
	a, b, _ := strings.Cut(s, "x")
	n, err1 := strconv.Atoi(a)
	k, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || n < 1 || k < 1 {
		t.Fatalf("PRODIGY_SHARD_SCALE=%q: want ITEMSxSHARDS", s)
	}
	return n, k, 13, 997, true
}

func newShardCrashEnv(t *testing.T) *shardCrashEnv {
	t.Helper()
	n, shards, failEvery, conflictEvery, _ := shardCrashScale(t)
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"n": %d}`, i))
	}
	e := &shardCrashEnv{t: t, origin: cliRepo(t, map[string]string{"items.json": "[" + strings.Join(items, ",") + "]"})}
	e.fixed = filepath.Join(t.TempDir(), "fixed")
	e.wfPath = filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(e.wfPath, []byte(fmt.Sprintf(shardCrashWorkflow, e.fixed, failEvery, failEvery-1, conflictEvery)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.plan = filepath.Join(t.TempDir(), "plan")
	e.outs = make([]string, shards)
	for k := range e.outs {
		e.outs[k] = filepath.Join(t.TempDir(), fmt.Sprintf("out%d", k))
	}
	return e
}

// spawnFault runs the real CLI (this test binary) with state directory
// home until the fault kills it with SIGKILL.
func spawnFault(t *testing.T, home, fault string, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home, "PRODIGY_TEST_FAULT="+fault+":KILL")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not reach fault %s:\n%s", args, fault, &out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("%v with fault %s ended with %v, want death by SIGKILL:\n%s", args, fault, err, &out)
	}
}

// cmd is one CLI command of the job: its state directory and arguments.
type shardCmd struct {
	home string
	args []string
}

func (e *shardCrashEnv) planCmd(repo, home string) shardCmd {
	return shardCmd{home, []string{"plan", e.wfPath, "--out", e.plan, "--shards", strconv.Itoa(len(e.outs)), "--repo", repo, "--job-id", "fan"}}
}

func (e *shardCrashEnv) shardCmd(k int, repo, home string) shardCmd {
	return shardCmd{home, []string{"shard", e.plan, fmt.Sprint(k), "--out", e.outs[k], "--repo", repo}}
}

// gatherCmd gathers the outputs given in reverse shard order.
func (e *shardCrashEnv) gatherCmd(repo, home string) shardCmd {
	args := []string{"gather", e.plan, "--repo", repo}
	for k := len(e.outs) - 1; k >= 0; k-- {
		args = append(args, e.outs[k])
	}
	return shardCmd{home, args}
}

// run runs c in-process and wants exit 0.
func (e *shardCrashEnv) run(c shardCmd) {
	e.t.Helper()
	if code, out, errOut := runCLI(e.t, c.home, c.args...); code != 0 {
		e.t.Fatalf("%v: exit %d\n%s\n%s", c.args, code, out, errOut)
	}
}

// crash runs c killed at fault, then runs the same command again, which
// must complete.
func (e *shardCrashEnv) crash(c shardCmd, fault string) {
	e.t.Helper()
	spawnFault(e.t, c.home, fault, c.args...)
	e.run(c)
}

// result is the gathered job: the results tree and the DLQ.
func (e *shardCrashEnv) result(repo, home string) string {
	e.t.Helper()
	if st := e.cliOut(home, "status", "fan", "--json"); !strings.Contains(st, `"status": "completed"`) {
		e.t.Fatalf("gathered job not completed:\n%s", st)
	}
	tree := gitOut(e.t, repo, "rev-parse", "prodigy/fan^{tree}")
	return fmt.Sprintf("%s %v", tree, dlqSummary(e.t, home, filepath.Base(repo), "fan"))
}

func (e *shardCrashEnv) cliOut(home string, args ...string) string {
	e.t.Helper()
	code, out, errOut := runCLI(e.t, home, args...)
	if code != 0 {
		e.t.Fatalf("%v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// TestShardCrashWindows kills the real `plan`, `shard` and `gather` with
// SIGKILL at each named moment, runs the same command again, and checks
// the job completes with the same results tree and DLQ as a run that was
// never killed.
func TestShardCrashWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	_, shards, _, _, scaled := shardCrashScale(t)
	ref := newShardCrashEnv(t)
	fresh := func(e *shardCrashEnv, name string) (string, string) {
		return cloneRepo(t, e.origin, name), t.TempDir()
	}
	all := func(e *shardCrashEnv, planned bool) string {
		if !planned {
			e.run(e.planCmd(fresh(e, "planner")))
		}
		for k := range e.outs {
			s, h := fresh(e, fmt.Sprintf("shard%d", k))
			e.run(e.shardCmd(k, s, h))
		}
		g, h := fresh(e, "gatherer")
		e.run(e.gatherCmd(g, h))
		return e.result(g, h)
	}
	start := time.Now()
	want := all(ref, false)
	t.Logf("reference: plan, %d shards and gather in %v", shards, time.Since(start))
	if !strings.Contains(want, "MergeConflict") || !strings.Contains(want, "CommandFailed") {
		t.Fatalf("the fixture has no cross-shard conflict or failure: %s", want)
	}
	if scaled {
		// At scale only gather and discard are killed (over the
		// reference's outputs): a shard at scale is the same shard.
		ref.gatherWindows(t, want, fresh, shards)
		return
	}
	for _, fault := range []string{runner.FaultJobIntent + ":1", runner.FaultJobCreated + ":1", runner.FaultPlanWritten + ":1"} {
		t.Run("plan "+fault, func(t *testing.T) {
			e := newShardCrashEnv(t)
			e.origin = ref.origin
			e.crash(e.planCmd(fresh(e, "planner")), fault)
			if got := all(e, true); got != want {
				t.Fatalf("after a killed plan: %s\nwant %s", got, want)
			}
		})
	}
	for _, fault := range []string{runner.FaultShardIntent + ":1", runner.FaultParentCreated + ":1", runner.FaultItemMerged + ":1", runner.FaultDLQAdded + ":1"} {
		t.Run("shard "+fault, func(t *testing.T) {
			e := newShardCrashEnv(t)
			e.origin = ref.origin
			e.run(e.planCmd(fresh(e, "planner")))
			s1, h1 := fresh(e, "shard1")
			e.crash(e.shardCmd(1, s1, h1), fault)
			s0, h0 := fresh(e, "shard0")
			e.run(e.shardCmd(0, s0, h0))
			g, h := fresh(e, "gatherer")
			e.run(e.gatherCmd(g, h))
			if got := e.result(g, h); got != want {
				t.Fatalf("after a killed shard: %s\nwant %s", got, want)
			}
		})
	}
	ref.gatherWindows(t, want, fresh, shards)
}

// gatherWindows kills `gather` (over e's outputs, each time in a new
// clone) and `jobs discard` at their windows and checks the next run.
func (e *shardCrashEnv) gatherWindows(t *testing.T, want string, fresh func(*shardCrashEnv, string) (string, string), shards int) {
	for _, fault := range []string{runner.FaultGatherIntent + ":1", runner.FaultParentCreated + ":1", runner.FaultGatherShardMerged + ":1",
		runner.FaultGatherShardClosed + ":1", runner.FaultGatherShardMerged + ":" + strconv.Itoa(shards), runner.FaultReduceStepDone + ":1"} {
		t.Run("gather "+fault, func(t *testing.T) {
			start := time.Now()
			g, h := fresh(e, "gatherer")
			e.crash(e.gatherCmd(g, h), fault)
			if got := e.result(g, h); got != want {
				t.Fatalf("after a killed gather: %s\nwant %s", got, want)
			}
			if runs := strings.Count(gitOut(t, g, "log", "--format=%s", "prodigy/fan"), "reduce"); runs != 1 {
				t.Errorf("%d reduce commits, want 1", runs)
			}
			t.Logf("killed and completed in %v", time.Since(start))
		})
	}
	t.Run("jobs discard "+runner.FaultDiscardWorktrees, func(t *testing.T) {
		g, h := fresh(e, "gatherer")
		e.run(e.gatherCmd(g, h))
		discard := shardCmd{h, []string{"jobs", "discard", "fan", "--yes"}}
		e.crash(discard, runner.FaultDiscardWorktrees+":1")
		var left []string
		_ = filepath.WalkDir(h, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(path, "fan") {
				left = append(left, path)
			}
			return nil
		})
		if len(left) > 0 {
			t.Fatalf("discard left files of the job: %v", left)
		}
	})
}

// TestRedriveKilledInReduceIsFinished: a `dlq retry` killed after its
// reduce's first step committed (every redriven item merged, the DLQ
// empty) is finished by the next `dlq retry` — which used to find nothing
// to retry, exit 0 and leave the job running — or by `resume`.
func TestRedriveKilledInReduceIsFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	for _, next := range []string{"dlq retry", "resume"} {
		t.Run(next, func(t *testing.T) {
			e := newCrashEnv(t, 4, 3, 1, "0")
			e.cli(0, e.runArgs()...)
			if err := os.WriteFile(e.fixed, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			e.runFault(runner.FaultReduceStepDone+":1:KILL", "dlq", "retry", e.jobID)
			if st := e.cli(0, "status", e.jobID, "--json"); strings.Contains(st, `"status": "completed"`) {
				t.Fatalf("the killed redrive completed the job:\n%s", st)
			}
			e.cli(0, append(strings.Fields(next), e.jobID)...)
			e.check(append(evens(4), odds(4)...), nil, 2, false)
		})
	}
}

// TestShardAndGatherRandomKills kills the real `shard` and `gather` with
// SIGKILL at random moments (PRODIGY_CRASH_LOOP kills each, default 3),
// running the same command again after each kill, and checks the job
// completes with the reference tree and DLQ.
func TestShardAndGatherRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	kills, rng := crashLoop(t, 3)
	t.Setenv("PRODIGY_SHARD_SCALE", "")
	e := newShardCrashEnv(t)
	fresh := func(name string) (string, string) { return cloneRepo(t, e.origin, name), t.TempDir() }
	e.run(e.planCmd(fresh("planner")))
	// The reference: both shards and a gather never killed.
	var ref shardCrashEnv = *e
	ref.outs = []string{filepath.Join(t.TempDir(), "r0"), filepath.Join(t.TempDir(), "r1")}
	for k := range ref.outs {
		s, h := fresh(fmt.Sprintf("r%d", k))
		ref.run(ref.shardCmd(k, s, h))
	}
	g, h := fresh("rg")
	ref.run(ref.gatherCmd(g, h))
	want := ref.result(g, h)
	// killLoop runs c, killing it at random moments, until it completes
	// or has been killed n times; then runs it to completion.
	killLoop := func(c shardCmd, n int) int {
		killed := 0
		for killed < n {
			cmd := exec.Command(os.Args[0], c.args...)
			cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+c.home)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v after %d kill(s): %v\n%s", c.args, killed, err, &out)
				}
				return killed
			case <-time.After(time.Duration(rng.IntN(1200)) * time.Millisecond):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				killed++
				time.Sleep(200 * time.Millisecond) // steps of the dead process end
			}
		}
		e.run(c)
		return killed
	}
	total := 0
	for k := range e.outs {
		s, h := fresh(fmt.Sprintf("shard%d", k))
		total += killLoop(e.shardCmd(k, s, h), kills)
	}
	g, h = fresh("gatherer")
	total += killLoop(e.gatherCmd(g, h), kills)
	t.Logf("%d kill(s)", total)
	if got := e.result(g, h); got != want {
		t.Fatalf("after random kills: %s\nwant %s", got, want)
	}
}
