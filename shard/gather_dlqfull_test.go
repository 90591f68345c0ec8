package shard_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

const dlqFullWorkflow = `
name: gather-full
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.bad}" = yes ]; then echo "bad item" >&2; exit 4; fi
        echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: dlq
  continue_on_failure: true
  retry_config:
    max_attempts: 2
    backoff: fixed
reduce:
  - shell: echo "${map.successful}/${map.failed}" > reduced.txt && git add -A && git commit -qm reduce
`

// TestGatherDLQWriteFailureKeepsItemsFailedUnrecorded fills the disk under
// the gatherer's DLQ (a real ENOSPC from a full tmpfs) while it imports the
// shards' records: as with `run`, the failed items are not lost — they stay
// failed-unrecorded in the checkpoint, gather fails with exit 1 naming them
// and `resume`, and then (with space again) gathering again or `resume`
// writes their records with exactly the attempts the shards ran, without
// running reduce a second time.
func TestGatherDLQWriteFailureKeepsItemsFailedUnrecorded(t *testing.T) {
	for _, finish := range []string{"gather", "resume"} {
		t.Run(finish, func(t *testing.T) {
			r := newTestRepo(t, map[string]string{"items.json": `[{"bad":"no"},{"bad":"yes"},{"bad":"no"},{"bad":"yes"}]`})
			dir, o := shardFixture(t, r, dlqFullWorkflow, 2)
			ctx := context.Background()
			outs := runAllShards(t, r, dir, o, 2)
			g := r.clone("g")
			free := mountFullTmpfs(t, filepath.Join(g.Home, "dlq"))
			gopts := shardOpts(g, o)
			stderr := &syncBuffer{}
			gopts.Stderr = stderr
			res, err := gatherJob(ctx, GatherOptions{Run: gopts, PlanDir: dir, Outputs: outs})
			if !errors.Is(err, runner.ErrJobFailed) || runner.ExitCode(err) != 1 {
				t.Fatalf("gather error = %v, want a job failure (exit 1)\n%s", err, stderr)
			}
			for _, want := range []string{`"item_1"`, `"item_3"`, "no DLQ record", "resume job-1"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			if res == nil || res.Status != runner.StatusFailed || res.Successful != 2 || res.Failed != 2 || res.Pending != 0 {
				t.Fatalf("result = %+v", res)
			}
			if !strings.Contains(stderr.String(), "failed-unrecorded") {
				t.Errorf("gather did not warn about the unwritten records:\n%s", stderr)
			}
			paths := jobstore.Paths{Home: g.Home, Repo: filepath.Base(g.Dir), JobID: "job-1"}
			cp, err := jobstore.LoadCheckpoint(paths)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range cp.Items {
				bad := it.ItemID == "item_1" || it.ItemID == "item_3"
				if bad && (it.State != jobstore.ItemDLQ || it.PendingRecord == nil || it.Attempts != 2) {
					t.Errorf("checkpoint item %s = %+v, want dlq with a pending record after 2 attempts", it.ItemID, it)
				}
				if !bad && (it.State != jobstore.ItemMerged || it.PendingRecord != nil) {
					t.Errorf("checkpoint item %s = %+v, want merged", it.ItemID, it)
				}
			}
			if n := cp.Counts().Unrecorded; n != 2 {
				t.Errorf("unrecorded = %d, want 2", n)
			}
			if got := g.Git("show", "prodigy/job-1:reduced.txt"); got != "2/2" {
				t.Errorf("reduce saw %q, want 2/2", got)
			}

			free()
			o2 := shardOpts(g, o)
			stderr2 := &syncBuffer{}
			o2.Stderr = stderr2
			switch finish {
			case "gather":
				res, err = gatherJob(ctx, GatherOptions{Run: o2, PlanDir: dir, Outputs: outs})
			case "resume":
				res, err = o2.engine().Resume(ctx, runner.ResumeSpec{JobID: "job-1"})
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", finish, err, stderr2)
			}
			if res.Status != runner.StatusCompleted || res.DLQCount != 2 || res.Successful != 2 || res.Failed != 2 {
				t.Fatalf("%s result = %+v", finish, res)
			}
			recs := g.DLQRecords("job-1")
			for _, id := range []string{"item_1", "item_3"} {
				rec, ok := recs[id]
				if !ok {
					t.Fatalf("no DLQ record for %s after %s", id, finish)
				}
				if rec.FailureCount != 2 || len(rec.FailureHistory) != 2 || rec.FailureHistory[0].AttemptNumber != 1 || rec.FailureHistory[1].AttemptNumber != 2 {
					t.Errorf("%s: failure_count %d, history %+v; want attempts 1 and 2", id, rec.FailureCount, rec.FailureHistory)
				}
			}
			if len(recs) != 2 {
				t.Errorf("DLQ holds %d records, want 2", len(recs))
			}
			cp, err = jobstore.LoadCheckpoint(paths)
			if err != nil {
				t.Fatal(err)
			}
			if n := cp.Counts().Unrecorded; n != 0 {
				t.Errorf("unrecorded after %s = %d, want 0", finish, n)
			}
			if n := strings.Count(g.Git("log", "--format=%s", "prodigy/job-1"), "reduce"); n != 1 {
				t.Errorf("reduce committed %d times, want once", n)
			}
			// Gathering once more changes nothing.
			res, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
			if err != nil || res.DLQCount != 2 {
				t.Fatalf("gather after %s: %+v, %v", finish, res, err)
			}
			if got := g.DLQRecords("job-1")["item_1"].FailureCount; got != 2 {
				t.Errorf("item_1 failure_count after another gather = %d", got)
			}
		})
	}
}
