//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// A shard killed outright (SIGKILL: a runner past GitHub's cancel
// sequence, an OOM kill) leaves an output holding every item finished
// before the kill, because the output is rewritten after each item: gather
// (with --final, since the shard's output still has pending items) merges
// those, imports their DLQ records and leaves only the item that was
// running and the one never started pending. Before, a killed shard left no output at all.
// A re-run on another clone continues from that output (--continue): only
// the unfinished items run, and a gather of the re-run's output completes
// the job.
func TestKilledShardLeavesWhatFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a shard and kills it")
	}
	t.Parallel()
	pidDir := t.TempDir()
	origin, planDir := killableShardJob(t, pidDir)
	shardRepo := clitest.Clone(t, origin, "shard")
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0], "shard", planDir, "0", "--out", out, "--repo", shardRepo)
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+t.TempDir())
	var stderr syncedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		killLongAgent(pidDir) // the killed shard cannot end its agent
	})
	// Wait for an output listing item_0 merged and item_1 failed while
	// item_3 runs (item_4 never starts: max_parallel 1).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var sr struct {
			Items []struct {
				ItemID string `json:"item_id"`
				State  string `json:"state"`
			} `json:"items"`
		}
		data, err := os.ReadFile(filepath.Join(out, "result.json"))
		states := map[string]string{}
		if err == nil && json.Unmarshal(data, &sr) == nil {
			for _, it := range sr.Items {
				states[it.ItemID] = it.State
			}
		}
		if states["item_2"] == "merged" && states["item_1"] == "dlq" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live output with item_2 merged (states %v):\n%s", states, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	gatherRepo := clitest.Clone(t, origin, "gather")
	home := t.TempDir()
	// Gather merges shards in plan order and waits for a shard whose output
	// still has pending items (it may be run again to finish them) ...
	code, stdout, gerr := runCLI(t, home, "gather", planDir, out, "--repo", gatherRepo, "--json")
	if code != 1 || !strings.Contains(stdout+gerr, "waiting for shard 0") || !strings.Contains(stdout+gerr, "--final") {
		t.Fatalf("gather: exit %d, want 1 waiting for shard 0 and naming --final\n%s\n%s", code, stdout, gerr)
	}
	// ... and with --final closes it as it is: what finished is merged.
	code, stdout, gerr = runCLI(t, home, "gather", planDir, out, "--repo", gatherRepo, "--final", "--json")
	if code != 1 || !strings.Contains(gerr, "pending") {
		t.Fatalf("gather --final: exit %d, want 1 with items pending\n%s\n%s", code, stdout, gerr)
	}
	var res struct {
		Successful, Failed, Pending int
		ResultsBranch               string `json:"results_branch"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("gather --json: %v\n%s", err, stdout)
	}
	if res.Successful != 2 || res.Failed != 1 || res.Pending != 2 {
		t.Errorf("gathered %+v, want 2 merged, 1 failed, 2 pending", res)
	}
	files := gitOut(t, gatherRepo, "ls-tree", "--name-only", res.ResultsBranch)
	if !strings.Contains(files, "out-0.txt") || !strings.Contains(files, "out-2.txt") || strings.Contains(files, "out-4.txt") {
		t.Errorf("results branch files:\n%s", files)
	}

	// The re-run, on a fresh clone and state, continues from the output.
	if err := os.WriteFile(filepath.Join(pidDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "out2")
	if code, _, serr := runCLI(t, t.TempDir(), "shard", planDir, "0", "--out", out2, "--repo", clitest.Clone(t, origin, "rerun"), "--continue", out); code != 0 {
		t.Fatalf("re-run: exit %d\n%s", code, serr)
	}
	runs, _ := os.ReadFile(filepath.Join(pidDir, "runs"))
	if got := strings.Fields(string(runs)); strings.Join(got, " ") != "0 1 2 3 4" {
		t.Errorf("items run (in order, over both attempts) = %v, want each once: 0 1 2 3 4", got)
	}
	gatherRepo2 := clitest.Clone(t, origin, "gather2")
	code, stdout, gerr = runCLI(t, t.TempDir(), "gather", planDir, out2, "--repo", gatherRepo2, "--json")
	if code != 0 {
		t.Fatalf("gather of the re-run: exit %d\n%s\n%s", code, stdout, gerr)
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Successful != 4 || res.Failed != 1 || res.Pending != 0 {
		t.Errorf("gather of the re-run: %+v (%v), want 4 merged, 1 failed", res, err)
	}
	files = gitOut(t, gatherRepo2, "ls-tree", "--name-only", res.ResultsBranch)
	for _, f := range []string{"out-0.txt", "out-2.txt", "out-3.txt", "out-4.txt"} {
		if !strings.Contains(files, f) {
			t.Errorf("results branch lacks %s:\n%s", f, files)
		}
	}
}

// killableShardJob makes the job both kill tests run, planned as one
// shard: items ok, fail (permanently: the DLQ), ok, long (sleeps 300 s
// unless $PIDDIR/go exists; its pid in long.pid), ok, one agent at a
// time; every run of an item appends its index to $PIDDIR/runs and an
// item that succeeds commits out-<index>.txt.
func killableShardJob(t *testing.T, pidDir string) (origin, planDir string) {
	t.Helper()
	wf := strings.ReplaceAll(`
name: live
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        case "${item.kind}" in
          ok) ;;
          fail) echo "$PRODIGY_ITEM_INDEX" >> "$PIDDIR/runs"; echo "permanent failure" >&2; exit 3 ;;
          long) if [ ! -e "$PIDDIR/go" ]; then echo $$ > "$PIDDIR/long.pid"; sleep 300; fi ;;
        esac
        echo "$PRODIGY_ITEM_INDEX" >> "$PIDDIR/runs"
        echo "$PRODIGY_ITEM_INDEX" > "out-$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: dlq
  retry_config:
    attempts: 1
`, "$PIDDIR", pidDir)
	origin = cliRepo(t, map[string]string{"wf.yml": wf,
		"items.json": `[{"kind":"ok"},{"kind":"fail"},{"kind":"ok"},{"kind":"long"},{"kind":"ok"}]`})
	planDir = filepath.Join(t.TempDir(), "plan")
	if code, _, stderr := runCLI(t, t.TempDir(), "plan", filepath.Join(origin, "wf.yml"), "--repo", origin, "--out", planDir, "--shards", "1"); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	return origin, planDir
}

// killLongAgent ends the process group of killableShardJob's long agent.
func killLongAgent(pidDir string) {
	if data, err := os.ReadFile(filepath.Join(pidDir, "long.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}
