package shard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
	"github.com/prodigy-action/prodigy-action/shard"
)

func planItems(n int) []shard.PlanItem {
	out := make([]shard.PlanItem, n)
	for i := range out {
		out[i] = shard.PlanItem{ID: fmt.Sprintf("item_%d", i), Index: i}
	}
	return out
}

func TestSplitIsStableBalancedAndContiguous(t *testing.T) {
	for _, tc := range []struct{ items, n, shards int }{{10, 3, 3}, {3, 5, 3}, {0, 4, 1}, {1000, 256, 256}, {7, 1, 1}} {
		items := planItems(tc.items)
		a, b := shard.Split(items, tc.n), shard.Split(items, tc.n)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%d items in %d: not stable", tc.items, tc.n)
		}
		if len(a) != tc.shards {
			t.Fatalf("%d items in %d: %d shards, want %d", tc.items, tc.n, len(a), tc.shards)
		}
		var all []string
		lo, hi := tc.items, 0
		for k, s := range a {
			if s.Shard != k {
				t.Fatalf("shard %d numbered %d", k, s.Shard)
			}
			all = append(all, s.Items...)
			lo, hi = min(lo, len(s.Items)), max(hi, len(s.Items))
		}
		if hi-lo > 1 {
			t.Errorf("%d items in %d: shard sizes from %d to %d", tc.items, tc.n, lo, hi)
		}
		var want []string
		for _, it := range items {
			want = append(want, it.ID)
		}
		if !slices.Equal(all, want) {
			t.Errorf("%d items in %d: shards do not hold every item once in order", tc.items, tc.n)
		}
	}
}

func TestAutoCountFitsTheJobLimit(t *testing.T) {
	load := func(y string) *config.Workflow {
		t.Helper()
		wf, err := config.Parse("wf.yml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return wf
	}
	hourly := load("name: x\nmode: mapreduce\nmap:\n  input: i.json\n  agent_timeout_secs: 3600\n  agent_template:\n    - shell: 'true'\n")
	// 5 one-hour items fit a 5-hour shard per slot.
	for _, tc := range []struct{ items, par, want int }{{5, 1, 1}, {6, 1, 2}, {12, 1, 3}, {12, 2, 2}, {100000, 1, 256}, {0, 1, 1}} {
		if got := shard.AutoCount(hourly, tc.items, tc.par); got != tc.want {
			t.Errorf("%d items, max_parallel %d: %d shards, want %d", tc.items, tc.par, got, tc.want)
		}
	}
	retried := load("name: x\nmode: mapreduce\nmap:\n  input: i.json\n  agent_timeout_secs: 3600\n  agent_template:\n    - shell: 'true'\nerror_policy:\n  retry_config:\n    attempts: 2\n    backoff: fixed\n    initial_delay: 30m\n")
	// 2 attempts + 30m backoff = 2.5h worst case: 2 per slot.
	if got := shard.AutoCount(retried, 4, 1); got != 2 {
		t.Errorf("retried: %d shards, want 2", got)
	}
}

const stopWorkflow = `
name: stop
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.bad}" = yes ]; then echo bad >&2; exit 1; fi
        echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: stop
reduce:
  - shell: echo "${map.successful}" > reduced.txt && git add -A && git commit -qm reduce
`

// TestFailedShardWritesItsOutputAndGatherWaitsForIt: a shard stopped by
// on_item_failure: stop fails (ErrJobFailed) yet writes its output; gather
// imports what finished and applies the policy to the whole job, as a
// single runner would: the job fails naming the stop and reduce does not
// run; no setup commit means no base.bundle.
func TestFailedShardWritesItsOutputAndGatherWaitsForIt(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[{"bad":"no"},{"bad":"yes"},{"bad":"no"},{"bad":"no"}]`})
	dir, o := shardFixture(t, r, stopWorkflow, 2)
	if _, err := os.Stat(shard.BaseBundle(dir)); !os.IsNotExist(err) {
		t.Fatalf("base.bundle written although setup made no commit: %v", err)
	}
	if jobstore.HasCheckpoint(jobstore.Paths{Home: r.Home, Repo: "repo", JobID: "job-1"}) {
		t.Fatal("plan left its job state behind")
	}
	ctx := context.Background()
	var outs []string
	for k := range 2 {
		c := r.clone(fmt.Sprintf("s%d", k))
		out := filepath.Join(t.TempDir(), "out")
		sr, err := runShard(ctx, ShardOptions{Run: shardOpts(c, o), PlanDir: dir, Shard: k, OutDir: out})
		if k == 0 {
			if !errors.Is(err, runner.ErrJobFailed) || sr == nil || sr.Pending != 0 || sr.Failed != 1 || sr.Successful != 1 {
				t.Fatalf("shard 0 (stops on item_1): %+v, %v", sr, err)
			}
		} else if err != nil {
			t.Fatalf("shard 1: %v", err)
		}
		if _, err := os.Stat(filepath.Join(out, shard.ResultFile)); err != nil {
			t.Fatalf("shard %d wrote no result: %v", k, err)
		}
		outs = append(outs, out)
	}
	// Gather in the planning repository itself: the results branch is there, at the base.
	head := r.Git("rev-parse", "HEAD")
	res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(r, o), PlanDir: dir, Outputs: outs})
	if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "on_item_failure: stop") || !strings.Contains(err.Error(), "dlq retry job-1") {
		t.Fatalf("gather = %v, want the job stopped by on_item_failure: stop across the shards", err)
	}
	if res == nil || res.Successful != 3 || res.Failed != 1 || res.Pending != 0 {
		t.Fatalf("gather: %+v", res)
	}
	if out := r.Git("ls-tree", "--name-only", "prodigy/job-1"); strings.Contains(out, "reduced.txt") {
		t.Fatal("reduce ran in a job its failure policy stopped")
	}
	r.AssertUntouched(head)
	if rec := r.DLQRecords("job-1"); len(rec) != 1 || rec["item_1"].FailureCount != 1 {
		t.Fatalf("DLQ = %v", rec)
	}
}

// TestJobWidePoliciesHoldAcrossShards: a failure policy is the job's, not
// each shard's. A shard that continue_on_failure: false stopped with
// items pending is closed at once (not waited for) and the gather names
// the fix-then-continue command; failure_threshold counts the whole job,
// so shards too small to reach it alone (5 items each) still stop the
// job at gather.
func TestJobWidePoliciesHoldAcrossShards(t *testing.T) {
	ctx := context.Background()
	t.Run("continue_on_failure false", func(t *testing.T) {
		r := newTestRepo(t, map[string]string{"items.json": `[{"bad":"yes"},{"bad":"no"},{"bad":"no"},{"bad":"no"}]`})
		dir, o := shardFixture(t, r, strings.Replace(stopWorkflow, "on_item_failure: stop", "continue_on_failure: false", 1), 2)
		outs := runShardsAllowingStops(t, r, dir, o, 2)
		g := r.clone("g")
		res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
		if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "stopped: continue_on_failure: false") ||
			!strings.Contains(err.Error(), "fix the cause of the stop, then continue them with `plan WORKFLOW --from-pending job-1") {
			t.Fatalf("gather = %v, want shard 0 closed as stopped and the continue command", err)
		}
		if res.Pending != 1 || res.Failed != 1 || res.Successful != 2 {
			t.Fatalf("gather: %+v", res)
		}
	})
	t.Run("failure_threshold", func(t *testing.T) {
		var items []string
		for i := range 20 {
			items = append(items, fmt.Sprintf(`{"bad":%q}`, map[bool]string{true: "yes", false: "no"}[i%5 < 2]))
		}
		r := newTestRepo(t, map[string]string{"items.json": "[" + strings.Join(items, ",") + "]"})
		wf := strings.Replace(stopWorkflow, "on_item_failure: stop", "on_item_failure: dlq\n  failure_threshold: 0.3", 1)
		dir, o := shardFixture(t, r, wf, 4)
		outs := runShardsAllowingStops(t, r, dir, o, 4)
		g := r.clone("g")
		res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
		if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "failure rate 40% (8 of 20) exceeds failure_threshold 30% across the shards") {
			t.Fatalf("gather = %v, want the job stopped by its failure_threshold", err)
		}
		if res.Failed != 8 || res.Successful != 12 {
			t.Fatalf("gather: %+v", res)
		}
		if out := g.Git("ls-tree", "--name-only", "prodigy/job-1"); strings.Contains(out, "reduced.txt") {
			t.Fatal("reduce ran in a job its failure policy stopped")
		}
	})
}

// TestShardStormStopsTheGatheredJob: each shard has its own failure-storm
// breaker; a shard it stopped is closed at gather (not waited for), and
// the gathered job ends stopped_by_breaker (exit 3) with the shard's storm
// and the --from-pending command, while the other shard's work is merged.
func TestShardStormStopsTheGatheredJob(t *testing.T) {
	var items []string
	for i := range 30 {
		items = append(items, fmt.Sprintf(`{"bad":%q}`, map[bool]string{true: "yes", false: "no"}[i >= 15]))
	}
	r := newTestRepo(t, map[string]string{"items.json": "[" + strings.Join(items, ",") + "]"})
	dir, o := shardFixture(t, r, strings.Replace(stopWorkflow, "on_item_failure: stop", "on_item_failure: dlq", 1), 2)
	outs := runShardsAllowingStops(t, r, dir, o, 2)
	g := r.clone("g")
	res, err := gatherJob(context.Background(), GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
	if runner.ExitCode(err) != runner.ExitStorm || res.Status != runner.StatusStoppedByBreaker || res.Storm == nil || res.Storm.Limit != 10 ||
		!strings.Contains(err.Error(), "stopped: failure storm") || !strings.Contains(err.Error(), "--from-pending job-1") {
		t.Fatalf("gather = %+v, %v (exit %d), want the shard's storm to stop the job", res, err, runner.ExitCode(err))
	}
	if res.Successful != 15 || res.Failed != 10 || res.Pending != 5 {
		t.Fatalf("gather: %+v, want shard 0's 15 merged, the storm's 10 failed, 5 never started", res)
	}
}

// runShardsAllowingStops runs every shard in its own clone; a shard may
// fail because its failure policy stopped it.
func runShardsAllowingStops(t *testing.T, r *testRepo, dir string, o Options, n int) []string {
	t.Helper()
	return runShards(t, r, dir, o, n, true)
}

// okWorkflow is runnertest.CountWorkflow.
const okWorkflow = runnertest.CountWorkflow

// TestGatherReportsAnUnreadableShardAndCompletesLater: a corrupt bundle
// leaves its shard's items pending and names the shard; gathering again
// with the good output completes the job; re-running a finished shard
// writes the same output.
func TestGatherReportsAnUnreadableShardAndCompletesLater(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1,2,3,4,5,6]`})
	dir, o := shardFixture(t, r, okWorkflow, 3)
	ctx := context.Background()
	var outs []string
	clones := map[int]*testRepo{}
	for k := range 3 {
		c := r.clone(fmt.Sprintf("s%d", k))
		clones[k] = c
		out := filepath.Join(t.TempDir(), "out")
		if _, err := runShard(ctx, ShardOptions{Run: shardOpts(c, o), PlanDir: dir, Shard: k, OutDir: out}); err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
		outs = append(outs, out)
	}
	g := r.clone("g")
	// An output without result.json is reported and its shard stays missing.
	res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: []string{outs[0], t.TempDir()}})
	if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "shard 1") || !strings.Contains(err.Error(), "shard 2") || res.Pending != 4 || res.Successful != 2 {
		t.Fatalf("gather with an empty output: %+v, %v", res, err)
	}
	bundle := filepath.Join(outs[1], shard.BundleFile)
	good, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Shard 2 is held back until shard 1 is in: shards merge in plan order.
	res, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
	if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "shard 1 (output unreadable)") || !strings.Contains(err.Error(), "held back") || res.Pending != 4 || res.Successful != 2 {
		t.Fatalf("gather with a corrupt bundle: %+v, %v", res, err)
	}
	// Re-running shard 1 (already completed) rewrites its output.
	if _, err := runShard(ctx, ShardOptions{Run: shardOpts(clones[1], o), PlanDir: dir, Shard: 1, OutDir: outs[1]}); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(bundle)
	if len(again) == 0 || string(again) == "garbage" || len(again) != len(good) {
		t.Fatalf("re-run shard wrote a different bundle (%d bytes, want %d)", len(again), len(good))
	}
	res, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
	if err != nil || res.Successful != 6 || res.Pending != 0 {
		t.Fatalf("second gather: %+v, %v", res, err)
	}
	if got := g.Git("show", "prodigy/job-1:count.txt"); got != "6" {
		t.Fatalf("count.txt = %q", got)
	}
	if got := g.Files("prodigy/job-1"); !slices.Contains(got, "setup.txt") {
		t.Fatalf("setup's commit is not on the results branch: %v", got)
	}
}

// TestPlanFailureLeavesNothingBehind: a failing setup leaves no branch,
// state or plan.
func TestPlanFailureLeavesNothingBehind(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1]`})
	wf := r.Workflow(strings.Replace(okWorkflow, "echo s > setup.txt", "exit 7; echo", 1))
	o := r.options(wf)
	dir := filepath.Join(t.TempDir(), "plan")
	_, err := planJob(context.Background(), PlanOptions{Run: o, Dir: dir, Shards: 1})
	if !errors.Is(err, runner.ErrJobFailed) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(shard.PlanFile(dir)); !os.IsNotExist(err) {
		t.Fatal("a plan was written")
	}
	if out := r.Git("branch", "--list", "prodigy/*"); out != "" {
		t.Fatalf("branches left: %s", out)
	}
}

// TestInterruptedShardResumesWhenRunAgain: a shard interrupted after its
// first item writes its output with the rest pending (ErrInterrupted);
// running the same shard again resumes it, runs every other item once,
// and its output then gathers completely.
func TestInterruptedShardResumesWhenRunAgain(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1,2,3,4]`})
	wfText := strings.Replace(okWorkflow, "max_parallel: 2", "max_parallel: 1", 1)
	wfText = strings.Replace(wfText, `git commit -qm "item $PRODIGY_ITEM_INDEX"`, `git commit -qm "item $PRODIGY_ITEM_INDEX" && echo "$PRODIGY_ITEM_INDEX" >> "$RUNS"`, 1)
	runs := filepath.Join(t.TempDir(), "runs")
	t.Setenv("RUNS", runs)
	dir, o := shardFixture(t, r, wfText, 1)
	c := r.clone("s0")
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	so := shardOpts(c, o)
	hooks := &hookLog{OnItem: func(int) { cancel() }}
	so.Hooks = hooks
	so.Environ = append(os.Environ(), "RUNS="+runs)
	sr, err := runShard(ctx, ShardOptions{Run: so, PlanDir: dir, Shard: 0, OutDir: out})
	if !errors.Is(err, runner.ErrInterrupted) || sr == nil || sr.Successful != 1 || sr.Pending != 3 {
		t.Fatalf("interrupted shard: %+v, %v", sr, err)
	}
	if _, err := os.Stat(filepath.Join(out, shard.ResultFile)); err != nil {
		t.Fatalf("interrupted shard wrote no result: %v", err)
	}
	so.Hooks = &hookLog{}
	sr, err = runShard(context.Background(), ShardOptions{Run: so, PlanDir: dir, Shard: 0, OutDir: out})
	if err != nil || sr.Successful != 4 || sr.Pending != 0 {
		t.Fatalf("resumed shard: %+v, %v", sr, err)
	}
	data, _ := os.ReadFile(runs)
	if lines := strings.Fields(string(data)); len(lines) != 4 || len(slices.Compact(slices.Sorted(slices.Values(lines)))) != 4 {
		t.Fatalf("item runs = %q, want each of 4 items once", data)
	}
	g := r.clone("g")
	res, err := gatherJob(context.Background(), GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: []string{out}})
	if err != nil || res.Successful != 4 {
		t.Fatalf("gather: %+v, %v", res, err)
	}
}

// TestGatherRejectionsGoToTheDLQ: a review gate's verdict. Rejected items'
// merges are left out of the results branch (the shard is replayed item by
// item without them), they go to the DLQ as ValidationFailed with the
// reviewer's reason (marked for manual review, as every ValidationFailed
// record), reduce sees only what was accepted, and `dlq retry --force`
// redrives them. An id not in the plan is refused before
// anything is gathered; rejections are fixed by the job's first gather.
func TestGatherRejectionsGoToTheDLQ(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1,2,3,4,5,6]`})
	dir, o := shardFixture(t, r, okWorkflow, 2)
	outs := runAllShards(t, r, dir, o, 2)
	ctx := context.Background()
	g := r.clone("g")
	_, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs, Reject: map[string]string{"item_9": "x"}})
	if runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), `"item_9": no such item`) {
		t.Fatalf("rejecting an unknown item = %v, want a usage error", err)
	}
	if jobs, _ := jobstore.ListJobs(g.Home, ""); len(jobs) != 0 {
		t.Fatalf("a refused gather left state: %+v", jobs)
	}
	reject := map[string]string{"item_1": "breaks the public API", "item_4": ""}
	res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs, Reject: reject})
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 4 || res.Failed != 2 {
		t.Fatalf("gather with rejections: %+v, %v", res, err)
	}
	files := g.Git("ls-tree", "--name-only", "prodigy/job-1")
	for _, f := range []string{"f0.txt", "f2.txt", "f3.txt", "f5.txt"} {
		if !strings.Contains(files, f) {
			t.Errorf("accepted %s missing from the results branch:\n%s", f, files)
		}
	}
	for _, f := range []string{"f1.txt", "f4.txt"} {
		if strings.Contains(files, f) {
			t.Errorf("rejected %s is on the results branch", f)
		}
	}
	if got := strings.TrimSpace(g.Git("show", "prodigy/job-1:count.txt")); got != "4" {
		t.Errorf("reduce counted %s files, want the 4 accepted", got)
	}
	recs := g.DLQRecords("job-1")
	if len(recs) != 2 {
		t.Fatalf("DLQ = %v, want the two rejected items", recs)
	}
	for id, why := range map[string]string{"item_1": "rejected in review: breaks the public API", "item_4": "rejected in review: rejected by the reviewer"} {
		h := recs[id].FailureHistory
		if len(h) != 1 || h[0].ErrorType.String() != "ValidationFailed" || h[0].ErrorMessage != why || !recs[id].ManualReviewRequired {
			t.Errorf("%s: history %+v, want one ValidationFailed attempt %q, marked for manual review", id, h, why)
		}
	}
	// The same gather again (after a crash, say) changes nothing; a new
	// rejection now is refused.
	if res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs, Reject: reject}); err != nil || res.Failed != 2 {
		t.Fatalf("gather again: %+v, %v", res, err)
	}
	_, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs, Reject: map[string]string{"item_2": "late"}})
	if runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), "first gather") {
		t.Fatalf("a rejection after the first gather = %v, want a usage error", err)
	}
	// A human rejected them, so they need a human to redrive them (as
	// every ValidationFailed record): dlq retry --force.
	o2 := shardOpts(g, o)
	o2.Workflow = nil
	res, err = o2.engine().Redrive(ctx, runner.RedriveSpec{JobID: "job-1", Force: true})
	if err != nil || res.Successful != 6 {
		t.Fatalf("dlq retry of the rejected items: %+v, %v", res, err)
	}
}
