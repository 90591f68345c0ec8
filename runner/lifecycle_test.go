package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

func TestCleanupFailureKeepsItemSuccessfulAndRecordsOrphan(t *testing.T) {
	runnertest.RequireImmutableFiles(t)
	for _, iso := range []runner.Isolation{runner.IsolationPool, runner.IsolationFresh} {
		t.Run(string(iso), func(t *testing.T) {
			r := newTestRepo(t, map[string]string{"items.json": `[{"id": "stuck"}]`})
			wf := r.Workflow(`
name: cleanup
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: |
        echo done > done.txt && git add done.txt && git commit -qm done
        mkdir -p junk && echo x > junk/locked && chattr +i junk/locked
`)
			o, _, stderr, hooks := r.options(wf)
			o.Isolation = iso
			runnertest.UnlockJunkAfter(t, r.Home)
			res, err := r.run(o)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			if res.Successful != 1 || res.Failed != 0 || res.Status != runner.StatusCompleted {
				t.Fatalf("result = %+v", res)
			}
			if len(res.OrphanedWorktrees) != 1 {
				t.Fatalf("orphans = %+v", res.OrphanedWorktrees)
			}
			orphan := res.OrphanedWorktrees[0]
			if orphan.ItemID != "item_0" || orphan.AgentID == "" || orphan.Error == "" {
				t.Errorf("orphan = %+v", orphan)
			}
			if !strings.Contains(stderr.String(), "WARN cleanup failed for agent") || len(hooks.Warnings()) == 0 {
				t.Errorf("no cleanup warning logged:\n%s", stderr)
			}
			events, _ := os.ReadFile(filepath.Join(r.Home, "events", "repo", "job-1", "events.jsonl"))
			if !strings.Contains(string(events), `"cleanup_status":{"Failed":`) {
				t.Errorf("agent_completed lacks cleanup_status Failed:\n%s", events)
			}
			if len(r.DLQRecords("job-1")) != 0 {
				t.Errorf("cleanup failure put the item in the DLQ")
			}
			if !strings.Contains(strings.Join(r.Files(res.ResultsBranch), " "), "done.txt") {
				t.Errorf("work was not merged")
			}
			// The registry holds it (cli/worktreecmd's tests clean it).
			sets, err := jobstore.FindOrphans(r.Home, "job-1")
			if err != nil || len(sets) != 1 {
				t.Fatalf("FindOrphans = %v, %v", sets, err)
			}
			if w := sets[0].Worktrees; len(w) != 1 || w[0].Path != orphan.Path || sets[0].RepoDir == "" {
				t.Errorf("registry = %+v, want the orphan %s and its repository", sets[0], orphan.Path)
			}
		})
	}
}

func TestInterruptCheckpointsAndResumeFinishesExactlyOnce(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(12)})
	wf := r.Workflow(`
name: interrupt
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        sleep 0.1
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
reduce:
  - shell: echo "reduce saw ${map.successful} of ${map.total}"
`)
	o, _, stderr, hooks := r.options(wf)
	ctx, cancel := context.WithCancel(context.Background())
	hooks.OnItem = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	o.InterruptGrace = 20 * time.Second
	res, err := runJob(ctx, o)
	if !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("err = %v, want interrupted\n%s", err, stderr)
	}
	if res.Status != runner.StatusInterrupted || res.Pending == 0 || res.Successful < 3 {
		t.Fatalf("result = %+v", res)
	}
	st, err := runner.Status(r.Home, "job-1")
	if err != nil || st.Status != runner.StatusInterrupted || st.Pending != res.Pending {
		t.Fatalf("status = %+v, %v", st, err)
	}
	// The summary (text `status`) reads no items and says the same.
	sum, err := runner.StatusSummary(r.Home, "job-1")
	st.Items = nil
	if err != nil || mustJSON(t, sum) != mustJSON(t, st) {
		t.Fatalf("status summary = %s, %v\nwant %s", mustJSON(t, sum), err, mustJSON(t, st))
	}
	o2, _, stderr2, _ := r.options(nil)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if res2.Status != runner.StatusCompleted || res2.Successful != 12 || res2.Pending != 0 {
		t.Fatalf("resumed result = %+v", res2)
	}
	if merges := r.Git("rev-list", "--merges", "--count", res2.ResultsBranch); merges != "12" {
		t.Errorf("%s merges, want 12 (each item exactly once)", merges)
	}
	if !strings.Contains(stderr2.String(), "reduce saw 12 of 12") {
		t.Errorf("reduce did not run with the full counts:\n%s", stderr2)
	}
}

func TestDLQRetryRedrivesThroughTheRealWorkflow(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": "a", "priority": 1}, {"id": "b", "priority": 5}, {"id": "c", "priority": 7}]`})
	fixed := filepath.Join(t.TempDir(), "fixed")
	wf := r.Workflow(fmt.Sprintf(`
name: redrive
mode: mapreduce
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: |
        if [ "${item.id}" != a ] && [ ! -e %[1]s-${item.id} ]; then echo "service unavailable: network timeout" >&2; exit 1; fi
        echo "${item.id}" > "out-${item.id}.txt" && git add . && git commit -qm "item ${item.id}"
  error_policy:
    retry_config:
      attempts: 2
      backoff: exponential
      initial_delay: 1s
reduce:
  - shell: echo "reduce total ${map.successful}"
`, fixed))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 1 || res.Failed != 2 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	// Dry run changes nothing.
	o2, _, _, _ := r.options(nil)
	dry, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", DryRun: true, Filter: "item.priority >= 5", Run: o2})
	if err != nil || len(dry.Items) != 2 {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	// Fix the cause for c only, then redrive items with priority >= 5.
	if err := os.WriteFile(fixed+"-c", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o3, _, stderr3, _ := r.options(nil)
	res3, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", Filter: "item.priority >= 5", MaxRetries: 2, Run: o3})
	if err != nil {
		t.Fatalf("retry: %v\n%s", err, stderr3)
	}
	recs := r.DLQRecords("job-1")
	if _, ok := recs["item_2"]; ok {
		t.Errorf("c succeeded but is still in the DLQ")
	}
	b, ok := recs["item_1"]
	if !ok || b.FailureCount != 4 || len(b.FailureHistory) != 4 || b.FailureHistory[3].AttemptNumber != 4 {
		t.Fatalf("b should have 4 failures (2 per run): %s", mustJSON(t, b))
	}
	files := strings.Join(r.Files(res3.ResultsBranch), " ")
	if !strings.Contains(files, "out-c.txt") || !strings.Contains(files, "out-a.txt") || strings.Contains(files, "out-b.txt") {
		t.Errorf("results branch files: %s", files)
	}
	if res3.Successful != 2 || res3.Failed != 1 || res3.DLQCount != 1 {
		t.Errorf("redrive result = %+v", res3)
	}
	if !strings.Contains(stderr3.String(), "reduce total 2") {
		t.Errorf("reduce did not re-run:\n%s", stderr3)
	}
}

// TestResumeRereadsACheckpointWrittenBeforeItsLock: a resume reads the
// checkpoint before it can lock the job; when another runner finishes the
// job in between, the resume sees the finished job once it holds the lock
// (it says so and runs nothing) instead of acting on what it read first.
// Not parallel: it sets a package hook.
func TestResumeRereadsACheckpointWrittenBeforeItsLock(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(6)})
	reduced := filepath.Join(t.TempDir(), "reduced")
	wf := r.Workflow(fmt.Sprintf(`
name: race
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
reduce:
  - shell: echo reduce >> %s
`, reduced))
	o, _, stderr, hooks := r.options(wf)
	ctx, cancel := context.WithCancel(context.Background())
	hooks.OnItem = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	o.InterruptGrace = 20 * time.Second
	if _, err := runJob(ctx, o); !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("err = %v, want interrupted\n%s", err, stderr)
	}
	var inner *runner.Result
	restore := runner.SetBeforeLock(func() {
		restoreInner := runner.SetBeforeLock(nil)
		defer restoreInner()
		oi, _, stderrI, _ := r.options(nil)
		var err error
		if inner, err = resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: oi}); err != nil {
			t.Errorf("the other runner's resume: %v\n%s", err, stderrI)
		}
	})
	defer restore()
	o2, _, stderr2, _ := r.options(nil)
	res, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if inner == nil || inner.Status != runner.StatusCompleted || inner.Successful != 6 {
		t.Fatalf("the other runner's result = %+v", inner)
	}
	if res.Status != runner.StatusCompleted || res.Successful != 6 || !strings.Contains(stderr2.String(), "already completed") {
		t.Errorf("resume after the other runner finished = %+v\n%s", res, stderr2)
	}
	if merges := r.Git("rev-list", "--merges", "--count", res.ResultsBranch); merges != "6" {
		t.Errorf("%s merges, want 6", merges)
	}
	if b, _ := os.ReadFile(reduced); strings.Count(string(b), "reduce") != 1 {
		t.Errorf("reduce ran %d times, want once", strings.Count(string(b), "reduce"))
	}
}

// TestCleanupFailureOfAFailedItemIsOnlyAWarning is spec 136's "cleanup
// error handling consistent across all merge paths (success/failure)" on
// the failure path: a failed item whose worktree cannot be removed stays
// failed for its own reason (one DLQ history entry, the step's error), and
// the cleanup failure is a warning and an orphan entry, never a second
// failure or a changed error.
func TestCleanupFailureOfAFailedItemIsOnlyAWarning(t *testing.T) {
	runnertest.RequireImmutableFiles(t)
	for _, iso := range []runner.Isolation{runner.IsolationPool, runner.IsolationFresh} {
		t.Run(string(iso), func(t *testing.T) {
			r := newTestRepo(t, map[string]string{"items.json": `[{"id": "stuck"}]`})
			wf := r.Workflow(`
name: cleanup-failed
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: |
        mkdir -p junk && echo x > junk/locked && chattr +i junk/locked
        echo "the work failed" >&2; exit 7
`)
			o, _, stderr, _ := r.options(wf)
			o.Isolation = iso
			runnertest.UnlockJunkAfter(t, r.Home)
			res, err := r.run(o)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			if res.Failed != 1 || res.Successful != 0 || res.Status != runner.StatusCompleted {
				t.Fatalf("result = %+v\n%s", res, stderr)
			}
			recs := r.DLQRecords("job-1")
			if len(recs) != 1 {
				t.Fatalf("DLQ records = %d, want 1", len(recs))
			}
			rec := recs["item_0"]
			if rec.FailureCount != 1 || len(rec.FailureHistory) != 1 || rec.FailureHistory[0].ErrorType.Kind != "CommandFailed" ||
				strings.Contains(strings.ToLower(rec.FailureHistory[0].ErrorMessage), "cleanup") {
				t.Fatalf("the record is not the step's one failure: %+v", rec.FailureHistory)
			}
			if len(res.OrphanedWorktrees) != 1 || !strings.Contains(stderr.String(), "WARN") {
				t.Fatalf("cleanup failure not reported as a warning and an orphan: orphans %+v\n%s", res.OrphanedWorktrees, stderr)
			}
		})
	}
}
