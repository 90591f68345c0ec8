package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

// mountFullTmpfs and mountTmpfs are runnertest's (a full tmpfs: every
// write fails with ENOSPC; skipped where mounting is not allowed).
var (
	mountFullTmpfs = runnertest.MountFullTmpfs
	mountTmpfs     = runnertest.MountTmpfs
)

// TestDLQWriteFailureKeepsItemFailedUnrecorded fills the disk under the DLQ:
// the failed item is not lost — it stays failed-unrecorded in the
// checkpoint, the job ends with exit 1 naming it and `resume`, and resume
// (with space again) writes its record with exactly the attempts that ran.
func TestDLQWriteFailureKeepsItemFailedUnrecorded(t *testing.T) {
	r := newTestRepo(t, nil)
	wf := r.Workflow(`
name: full
mode: mapreduce
map:
  input: "printf '[{\"id\":\"ok\"},{\"id\":\"bad\"}]'"
  max_parallel: 1
  error_policy:
    on_item_failure: dlq
    continue_on_failure: true
    retry_config:
      max_attempts: 2
      backoff: fixed
  agent_template:
    - shell: |
        if [ "${item.id}" = bad ]; then echo "bad item" >&2; exit 4; fi
        echo ok > ok.txt && git add ok.txt && git commit -qm ok
`)
	o, _, stderr, _ := r.options(wf)
	paths := runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}
	free := mountFullTmpfs(t, filepath.Join(r.Home, "dlq"))

	res, err := r.run(o)
	if !errors.Is(err, runner.ErrJobFailed) || runner.ExitCode(err) != 1 {
		t.Fatalf("run error = %v, want a job failure (exit 1)\n%s", err, stderr)
	}
	for _, want := range []string{`"item_1"`, "no DLQ record", "resume job-1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if res == nil || res.Status != runner.StatusFailed {
		t.Fatalf("result = %+v", res)
	}
	cp, lerr := jobstore.LoadCheckpoint(paths)
	if lerr != nil {
		t.Fatal(lerr)
	}
	var bad *jobstore.CheckpointItem
	for _, it := range cp.Items {
		if it.ItemID == "item_1" {
			bad = it
		}
	}
	if bad == nil || bad.State != jobstore.ItemDLQ || bad.PendingRecord == nil || bad.Attempts != 2 {
		t.Fatalf("checkpoint item bad = %+v, want dlq with a pending record after 2 attempts", bad)
	}
	if n := cp.Counts().Unrecorded; n != 1 {
		t.Errorf("unrecorded = %d, want 1", n)
	}

	free()
	o2, _, stderr2, _ := r.options(wf)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if res2.Status != runner.StatusCompleted || res2.DLQCount != 1 || res2.Successful != 1 {
		t.Fatalf("resume result = %+v", res2)
	}
	rec, ok := r.DLQRecords("job-1")["item_1"]
	if !ok {
		t.Fatal("no DLQ record for bad after resume")
	}
	if len(rec.FailureHistory) != 2 || rec.FailureHistory[0].AttemptNumber != 1 || rec.FailureHistory[1].AttemptNumber != 2 {
		t.Errorf("failure_history = %+v, want attempts 1 and 2", rec.FailureHistory)
	}
	if got := rec.LastErrorType(); got != dlq.CommandFailedWith(4) {
		t.Errorf("error type = %v", got)
	}
	if strings.Count(r.Git("log", "--merges", "--format=%s", "prodigy/job-1"), "item_0") != 1 {
		t.Errorf("ok not merged exactly once")
	}
}

// TestDiskFullStepIsResourceExhausted: a step that fails because the disk
// is full (a real ENOSPC from a full tmpfs) is ResourceExhausted, not
// CommandFailed.
func TestDiskFullStepIsResourceExhausted(t *testing.T) {
	r := newTestRepo(t, nil)
	full := filepath.Join(t.TempDir(), "full")
	mountFullTmpfs(t, full)
	wf := r.Workflow(`
name: full-step
mode: mapreduce
map:
  input: "printf '[{\"id\":\"x\"}]'"
  agent_template:
    - shell: echo data > ` + full + `/out.txt
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.DLQCount != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	rec := r.DLQRecords("job-1")["item_0"]
	if got := rec.LastErrorType(); got.Kind != dlq.ResourceExhausted {
		t.Errorf("error type = %v, want ResourceExhausted (%s)", got, rec.FailureHistory[0].ErrorMessage)
	}
}

// TestCheckpointWriteFailureIsNeverDropped: the disk under the job's state
// fills while items run. The failed checkpoint write is not dropped: no
// new item starts, the job ends failed naming the write, and after space
// is freed `resume` finishes every item exactly once from the state on
// disk.
func TestCheckpointWriteFailureIsNeverDropped(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1,2,3,4,5,6,7,8]`})
	state := runner.Paths{Home: r.Home, Repo: "repo", JobID: "job-1"}.JobStateDir()
	mountTmpfs(t, state, "512k")
	filler := filepath.Join(state, "filler")
	// Item 3 fills the disk under the state directory once it is done.
	wf := r.Workflow(fmt.Sprintf(`
name: full
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
        if [ "$PRODIGY_ITEM_INDEX" = 2 ]; then head -c 1048576 /dev/zero > %q 2>/dev/null || true; fi
`, filler))
	o, _, _, _ := r.options(wf)
	res, err := r.run(o)
	if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "write the checkpoint") || !strings.Contains(err.Error(), "resume job-1") {
		t.Fatalf("run on a full disk = %v, want the job failed naming the checkpoint write", err)
	}
	if res != nil && res.Successful+res.Pending != 8 {
		t.Fatalf("result %+v: every item merged or pending", res)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res, err = resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o})
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 8 {
		t.Fatalf("resume after freeing space: %+v, %v", res, err)
	}
	log := r.Git("log", "--format=%s", "prodigy/job-1") + "\n"
	for i := range 8 {
		if n := strings.Count(log, fmt.Sprintf("item %d\n", i)); n != 1 {
			t.Errorf("item %d is on the results branch %d times:\n%s", i, n, log)
		}
	}
}
