package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
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
	case <-time.After(faultWait()):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not reach fault %s within %v:\n%s", args, fault, faultWait(), &out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("%v with fault %s ended with %v, want death by SIGKILL:\n%s", args, fault, err, &out)
	}
}

// faultWait is how long a command may take to reach its fault: 2 minutes,
// or an hour at PRODIGY_SHARD_SCALE (a gather of 50 shards of 200 items
// under load took more than 2 minutes to reach its 50th merge).
func faultWait() time.Duration {
	if os.Getenv("PRODIGY_SHARD_SCALE") != "" {
		return time.Hour
	}
	return 2 * time.Minute
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
	return fmt.Sprintf("%s %v", tree, clitest.DLQSummary(e.t, home, filepath.Base(repo), "fan"))
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
// never killed. The killed shard is gathered with the reference's other
// outputs, so every window costs one shard and one gather, which keeps it
// affordable at scale (PRODIGY_SHARD_SCALE=10000x50). At scale a killed
// plan is compared with the reference plan (same items, shards, limits and
// base tree) and one of its shards with the reference's, since running
// every shard again would only repeat the small-scale check; forged and
// foreign outputs among the real ones are refused.
func TestShardCrashWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	_, shards, _, _, scaled := shardCrashScale(t)
	ref := newShardCrashEnv(t)
	fresh := func(e *shardCrashEnv, name string) (string, string) {
		return clitest.Clone(t, e.origin, name), t.TempDir()
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
	var otherPlanOut string // outlives the subtest that made it
	keep := func(dir string) { otherPlanOut = copyDir(t, dir) }
	for _, fault := range []string{runner.FaultJobIntent + ":1", runner.FaultJobCreated + ":1", runner.FaultPlanWritten + ":1"} {
		t.Run("plan "+fault, func(t *testing.T) {
			start := time.Now()
			e := newShardCrashEnv(t)
			e.origin, e.wfPath, e.fixed = ref.origin, ref.wfPath, ref.fixed
			p, h := fresh(e, "planner")
			e.crash(e.planCmd(p, h), fault)
			if scaled {
				if diff := planDiff(t, e.plan, ref.plan, p); diff != "" {
					t.Fatalf("the plan made after a killed plan differs from the reference in %s", diff)
				}
				k := len(e.outs) - 1
				s, sh := fresh(e, "shard")
				e.run(e.shardCmd(k, s, sh))
				if got, want := shardOutcomes(t, e.outs[k]), shardOutcomes(t, ref.outs[k]); got != want {
					t.Fatalf("shard %d of the plan made after a killed plan: %s\nwant %s", k, got, want)
				}
				keep(e.outs[k])
				t.Logf("killed and completed in %v", time.Since(start))
				return
			}
			if got := all(e, true); got != want {
				t.Fatalf("after a killed plan: %s\nwant %s", got, want)
			}
			keep(e.outs[0])
		})
	}
	for _, fault := range []string{runner.FaultShardIntent + ":1", runner.FaultParentCreated + ":1", runner.FaultItemMerged + ":1", runner.FaultDLQAdded + ":1"} {
		t.Run("shard "+fault, func(t *testing.T) {
			start := time.Now()
			e := *ref
			e.t = t
			e.outs = slices.Clone(ref.outs)
			e.outs[1] = filepath.Join(t.TempDir(), "out1")
			s1, h1 := fresh(&e, "shard1")
			e.crash(e.shardCmd(1, s1, h1), fault)
			if got, want := shardOutcomes(t, e.outs[1]), shardOutcomes(t, ref.outs[1]); got != want {
				t.Fatalf("shard 1 after a kill: %s\nwant %s", got, want)
			}
			g, h := fresh(&e, "gatherer")
			e.run(e.gatherCmd(g, h))
			if got := e.result(g, h); got != want {
				t.Fatalf("after a killed shard: %s\nwant %s", got, want)
			}
			t.Logf("killed and completed in %v", time.Since(start))
		})
	}
	t.Run("forged and foreign outputs", func(t *testing.T) {
		ref.refusals(t, fresh, otherPlanOut)
	})
	ref.gatherWindows(t, want, fresh, shards)
}

// refusals gathers the reference's outputs with one of them replaced by a
// forged or foreign output: each gather is refused (exit 2) naming that
// output, before any state is written.
func (e *shardCrashEnv) refusals(t *testing.T, fresh func(*shardCrashEnv, string) (string, string), otherPlan string) {
	last := len(e.outs) - 1
	var plan shard.Plan
	data, err := os.ReadFile(shard.PlanFile(e.plan))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &plan); err != nil {
		t.Fatal(err)
	}
	foreignItem := plan.Shards[0].Items[0]
	claim := copyDir(t, e.outs[last])
	editShardResult(t, claim, func(sr map[string]any) {
		items := sr["items"].([]any)
		items[0].(map[string]any)["item_id"] = foreignItem
	})
	record := copyDir(t, e.outs[last])
	rec := fmt.Sprintf(`{"item_id":%q,"item_data":0,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","failure_count":1,"failure_history":[{"attempt_number":1,"timestamp":"2026-01-01T00:00:00Z","error_type":"CommandFailed","error_message":"x"}],"error_signature":"x","reprocess_eligible":true,"manual_review_required":false}`, foreignItem)
	if err := os.WriteFile(filepath.Join(record, shard.DLQDir, foreignItem+".json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := copyDir(t, e.outs[last])
	if err := os.Truncate(filepath.Join(huge, shard.ResultFile), 3<<30); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, out, want string }{
		{"an item of another shard in result.json", claim, "which is not an item of shard"},
		{"a DLQ record of another shard's item", record, "not an item of shard"},
		{"result.json past its limit", huge, "file too large"},
	}
	if otherPlan != "" {
		cases = append(cases, struct{ name, out, want string }{"an output of another plan of the job", otherPlan, "another plan of job fan"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, h := fresh(e, "gatherer")
			outs := slices.Clone(e.outs)
			outs[last] = c.out
			args := append([]string{"gather", e.plan, "--repo", g}, outs...)
			code, _, errOut := runCLI(t, h, args...)
			if code != 2 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, c.out) {
				t.Fatalf("gather with %s: exit %d, want 2 and a refusal naming %s and %q:\n%s", c.name, code, c.out, c.want, errOut)
			}
			if code, out, errOut := runCLI(t, h, "status", "--json"); code == 0 || !strings.Contains(errOut, "no jobs") {
				t.Fatalf("a refused gather left state: status exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// planDiff names the keys of plan.json in which the plans in dirs got and
// want differ, besides what differs between two plans of the same job
// (plan id, trace, the base commit's id: its tree must be the same); ""
// when they agree. repo is a clone to read the base trees in.
func planDiff(t *testing.T, got, want, repo string) string {
	t.Helper()
	read := func(dir string) map[string]json.RawMessage {
		data, err := os.ReadFile(shard.PlanFile(dir))
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		// The base commit's id differs (setup's commit time); its tree must not.
		var base string
		if err := json.Unmarshal(p["base_commit"], &base); err != nil {
			t.Fatal(err)
		}
		gitOut(t, repo, "fetch", "-q", shard.BaseBundle(dir), "+refs/heads/*:refs/plan-base/*")
		p["base_commit"] = json.RawMessage(strconv.Quote(gitOut(t, repo, "rev-parse", base+"^{tree}")))
		delete(p, "plan_id")
		delete(p, "trace_parent")
		return p
	}
	g, w := read(got), read(want)
	var diff []string
	for k := range w {
		if !bytes.Equal(g[k], w[k]) {
			diff = append(diff, k)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	return strings.Join(diff, ", ")
}

// shardOutcomes is a shard output's items (id, state, attempts, error
// type) and the tree of its branch tip.
func shardOutcomes(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, shard.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	var sr shard.Result
	if err := json.Unmarshal(data, &sr); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pending %d:", sr.Pending)
	for _, it := range sr.Items {
		fmt.Fprintf(&b, " %s:%s:%d:%s", it.ItemID, it.State, it.Attempts, it.ErrorType)
	}
	recs, _ := filepath.Glob(filepath.Join(dir, shard.DLQDir, "*.json"))
	fmt.Fprintf(&b, " dlq %d", len(recs))
	return b.String()
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func editShardResult(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, shard.ResultFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sr map[string]any
	if err := json.Unmarshal(data, &sr); err != nil {
		t.Fatal(err)
	}
	edit(sr)
	if data, err = json.Marshal(sr); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
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
	fresh := func(name string) (string, string) { return clitest.Clone(t, e.origin, name), t.TempDir() }
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
	refRepo, refHome := g, h
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
	// The same tree and the same failed items with the same last error; a
	// kill during a failing item's attempt adds that attempt to its
	// history (a lost attempt that ran is a failure_history entry, and it
	// does not spend the item's budget), so attempts may only be more.
	got := e.result(g, h)
	wantDLQ := clitest.DLQSummary(t, refHome, filepath.Base(refRepo), "fan")
	gotDLQ := clitest.DLQSummary(t, h, filepath.Base(g), "fan")
	if strings.Fields(got)[0] != strings.Fields(want)[0] || len(gotDLQ) != len(wantDLQ) {
		t.Fatalf("after random kills: %s\nwant %s", got, want)
	}
	for id, w := range wantDLQ {
		gt, ok := gotDLQ[id]
		wType, wRest, _ := strings.Cut(w, "/")
		gType, gRest, _ := strings.Cut(gt, "/")
		wCount, _, _ := strings.Cut(wRest, "/")
		gCount, _, _ := strings.Cut(gRest, "/")
		wn, _ := strconv.Atoi(wCount)
		gn, _ := strconv.Atoi(gCount)
		if !ok || gType != wType || gn < wn {
			t.Fatalf("after random kills, DLQ record of %s: %s, want %s (or more attempts)\ngot %s\nwant %s", id, gt, w, got, want)
		}
	}
}
