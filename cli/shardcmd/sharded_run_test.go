package shardcmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
)

// shardWorkflow has successes, a permanent failure, a flaky item that
// succeeds on its second attempt, and two items (0 and 6, in shards 0 and
// 2 of 3) that write the same file differently. In a single runner the two
// are made to start from the same base and item 6 to merge second (it
// waits for item 0's merge), so both modes see the same conflict.
const shardWorkflow = `
name: fanout
mode: mapreduce
env:
  SYNC: %[1]s
setup:
  - shell: echo base > base.txt && git add base.txt && git commit -qm setup
map:
  input: items.json
  max_parallel: 9
  agent_template:
    - shell: |
        single=1
        case "$PRODIGY_RESULTS_BRANCH" in */shard-*) single=0 ;; esac
        case "${item.kind}" in
          ok) echo "$PRODIGY_ITEM_INDEX" > "out-$PRODIGY_ITEM_INDEX.txt" ;;
          fail) echo "permanent failure" >&2; exit 3 ;;
          flaky) if [ "$PRODIGY_ATTEMPT" -lt 2 ]; then echo "flaky boom" >&2; exit 1; fi
                 echo "$PRODIGY_ITEM_INDEX" > "out-$PRODIGY_ITEM_INDEX.txt" ;;
          first) echo first > shared.txt
                 if [ $single = 1 ]; then n=0; until [ -e "$SYNC/$PRODIGY_JOB_ID.second" ] || [ $n -gt 400 ]; do sleep 0.05; n=$((n+1)); done; fi ;;
          second) touch "$SYNC/$PRODIGY_JOB_ID.second"; echo second > shared.txt
                 if [ $single = 1 ]; then n=0; until git cat-file -e "refs/heads/$PRODIGY_RESULTS_BRANCH:shared.txt" 2>/dev/null || [ $n -gt 400 ]; do sleep 0.05; n=$((n+1)); done; fi ;;
        esac
        git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: dlq
  continue_on_failure: true
  retry_config:
    attempts: 3
    backoff: fixed
    retry_on:
      - pattern: flaky
reduce:
  - shell: |
      echo "$PRODIGY_JOB_ID" >> "$SYNC/reduce-runs"
      echo "${map.total} ${map.successful} ${map.failed}" > reduce.txt && git add reduce.txt && git commit -qm reduce
`

var shardItems = []string{
	`{"kind": "first"}`, `{"kind": "ok"}`, `{"kind": "fail"}`,
	`{"kind": "ok"}`, `{"kind": "flaky"}`, `{"kind": "ok"}`,
	`{"kind": "second"}`, `{"kind": "fail"}`, `{"kind": "ok"}`,
}

func TestShardedRunMatchesSingleRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five clones")
	}
	origin := gitopstest.Repo(t, map[string]string{"items.json": "[" + strings.Join(shardItems, ",") + "]"})
	sync := t.TempDir()
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wfPath, []byte(fmt.Sprintf(shardWorkflow, sync)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The single runner.
	single := clitest.Clone(t, origin, "single")
	homeS := t.TempDir()
	code, stdout, stderr := clitest.Home(homeS, "run", wfPath, "--repo", single, "--job-id", "solo", "--json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	var solo runner.Result
	if err := json.Unmarshal([]byte(stdout), &solo); err != nil {
		t.Fatal(err)
	}

	// Plan in one clone, three shards in three more, gather in a fifth.
	planRepo := clitest.Clone(t, origin, "planner")
	planDir := filepath.Join(t.TempDir(), "plan")
	code, stdout, stderr = clitest.Home(t.TempDir(), "plan", wfPath, "--out", planDir, "--shards", "3", "--repo", planRepo, "--job-id", "fan", "--json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	var po struct {
		JobID  string `json:"job_id"`
		Shards int    `json:"shards"`
		Total  int    `json:"total"`
		Matrix struct {
			Shard []int `json:"shard"`
		} `json:"matrix"`
		Plan string `json:"plan"`
	}
	if err := json.Unmarshal([]byte(stdout), &po); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, stdout)
	}
	if po.JobID != "fan" || po.Shards != 3 || po.Total != 9 || !slices.Equal(po.Matrix.Shard, []int{0, 1, 2}) || po.Plan != filepath.Join(planDir, "plan.json") {
		t.Fatalf("plan --json = %+v", po)
	}
	if _, err := os.Stat(filepath.Join(planDir, "base.bundle")); err != nil {
		t.Fatalf("setup made a commit but there is no base.bundle: %v", err)
	}
	var outs []string
	for k := range 3 {
		clone := clitest.Clone(t, origin, fmt.Sprintf("shard%d", k))
		out := filepath.Join(t.TempDir(), fmt.Sprintf("out%d", k))
		code, _, stderr := clitest.Home(t.TempDir(), "shard", planDir, fmt.Sprint(k), "--out", out, "--repo", clone, "--json")
		if code != 0 {
			t.Fatalf("shard %d: exit %d\n%s", k, code, stderr)
		}
		for _, f := range []string{"result.json", "events.jsonl", "dlq"} {
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Errorf("shard %d output: %v", k, err)
			}
		}
		outs = append(outs, out)
	}
	gatherRepo := clitest.Clone(t, origin, "gatherer")
	homeG := t.TempDir()

	// Shard 1's output is missing: its items stay pending and shard 2 is
	// held back (shards merge in plan order), exit 1.
	code, stdout, stderr = clitest.Home(homeG, "gather", planDir, outs[0], outs[2], "--repo", gatherRepo, "--json")
	if code != 1 || !strings.Contains(stderr, "shard 1") || !strings.Contains(stderr, "held back") {
		t.Fatalf("gather without shard 1: exit %d, want 1 naming shard 1 and holding shard 2\n%s", code, stderr)
	}
	var partial runner.Result
	if err := json.Unmarshal([]byte(stdout), &partial); err != nil {
		t.Fatal(err)
	}
	if partial.Pending != 6 {
		t.Fatalf("pending after a partial gather = %d, want shard 1's and 2's 6", partial.Pending)
	}
	if data, _ := os.ReadFile(filepath.Join(sync, "reduce-runs")); strings.Contains(string(data), "fan") {
		t.Fatal("reduce ran although a shard was missing")
	}

	// A later gather with every output completes the job.
	code, stdout, stderr = clitest.Home(homeG, "gather", planDir, outs[2], outs[1], outs[0], "--repo", gatherRepo, "--json")
	if code != 0 {
		t.Fatalf("gather: exit %d\n%s", code, stderr)
	}
	var fan runner.Result
	if err := json.Unmarshal([]byte(stdout), &fan); err != nil {
		t.Fatal(err)
	}

	// Same totals, same per-item states, same files, same DLQ.
	if fan.Total != solo.Total || fan.Successful != solo.Successful || fan.Failed != solo.Failed || fan.Pending != 0 || fan.Status != runner.StatusCompleted {
		t.Fatalf("totals differ: sharded %+v\nsingle %+v", fan, solo)
	}
	states := func(r runner.Result) string {
		var s []string
		for _, it := range r.Items {
			s = append(s, fmt.Sprintf("%s:%s:%d:%s", it.ItemID, it.State, it.Attempts, it.ErrorType))
		}
		return strings.Join(s, " ")
	}
	if states(fan) != states(solo) {
		t.Fatalf("item outcomes differ:\nsharded %s\nsingle  %s", states(fan), states(solo))
	}
	treeS := gitopstest.Out(t, single, "rev-parse", "refs/heads/prodigy/solo^{tree}")
	treeF := gitopstest.Out(t, gatherRepo, "rev-parse", "refs/heads/prodigy/fan^{tree}")
	if treeS != treeF {
		t.Fatalf("results differ:\nsingle:\n%s\nsharded:\n%s", gitopstest.Out(t, single, "ls-tree", "-r", "prodigy/solo"), gitopstest.Out(t, gatherRepo, "ls-tree", "-r", "prodigy/fan"))
	}
	if got := gitopstest.Out(t, gatherRepo, "show", "prodigy/fan:shared.txt"); got != "first" {
		t.Fatalf("shared.txt = %q, want the first item's", got)
	}
	dlqS, dlqF := clitest.DLQSummary(t, homeS, "single", "solo"), clitest.DLQSummary(t, homeG, "gatherer", "fan")
	if fmt.Sprint(dlqS) != fmt.Sprint(dlqF) {
		t.Fatalf("DLQs differ:\nsingle  %v\nsharded %v", dlqS, dlqF)
	}
	if !strings.HasPrefix(dlqF["item_6"], "MergeConflict/1/") || !strings.HasPrefix(dlqF["item_2"], "CommandFailed/1/") || len(dlqF) != 3 {
		t.Fatalf("sharded DLQ = %v, want item_2 and item_7 failed, item_6 a merge conflict", dlqF)
	}
	t.Logf("outcomes: %s\nDLQ: %v", states(fan), dlqF)
	runs, _ := os.ReadFile(filepath.Join(sync, "reduce-runs"))
	if string(runs) != "solo\nfan\n" {
		t.Fatalf("reduce runs = %q, want once per job", runs)
	}

	// A second gather is a no-op.
	tip := gitopstest.Out(t, gatherRepo, "rev-parse", "refs/heads/prodigy/fan")
	code, stdout, stderr = clitest.Home(homeG, "gather", planDir, outs[0], outs[1], outs[2], "--repo", gatherRepo, "--json")
	if code != 0 {
		t.Fatalf("second gather: exit %d\n%s", code, stderr)
	}
	var again runner.Result
	_ = json.Unmarshal([]byte(stdout), &again)
	if states(again) != states(fan) || again.DLQCount != fan.DLQCount {
		t.Fatalf("second gather changed the result:\n%s\n%s", states(again), states(fan))
	}
	if now := gitopstest.Out(t, gatherRepo, "rev-parse", "refs/heads/prodigy/fan"); now != tip {
		t.Fatal("second gather moved the results branch")
	}
	if got := clitest.DLQSummary(t, homeG, "gatherer", "fan"); fmt.Sprint(got) != fmt.Sprint(dlqF) {
		t.Fatalf("second gather changed the DLQ: %v", got)
	}
	if runs2, _ := os.ReadFile(filepath.Join(sync, "reduce-runs")); string(runs2) != string(runs) {
		t.Fatalf("second gather ran reduce again: %q", runs2)
	}

	// plan --from-dlq re-packs exactly the (eligible) failures.
	plan2 := filepath.Join(t.TempDir(), "plan2")
	code, _, stderr = clitest.Home(homeG, "plan", wfPath, "--out", plan2, "--shards", "2", "--repo", gatherRepo, "--job-id", "fan2", "--from-dlq", "fan", "--json")
	if code != 0 {
		t.Fatalf("plan --from-dlq: exit %d\n%s", code, stderr)
	}
	p2, err := shard.LoadPlan(plan2)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range p2.Items {
		ids = append(ids, it.ID)
		if it.Attempts != 1 {
			t.Errorf("redriven %s keeps %d attempt(s), want 1", it.ID, it.Attempts)
		}
	}
	slices.Sort(ids)
	if want := []string{"item_2", "item_6", "item_7"}; !slices.Equal(ids, want) {
		t.Fatalf("plan --from-dlq items = %v, want %v", ids, want)
	}

	// The redrive runs like any plan; histories continue in attempt order.
	var outs2 []string
	for k := range p2.Shards {
		clone := clitest.Clone(t, origin, fmt.Sprintf("redrive%d", k))
		out := filepath.Join(t.TempDir(), fmt.Sprintf("r%d", k))
		if code, _, stderr := clitest.Home(t.TempDir(), "shard", plan2, fmt.Sprint(k), "--out", out, "--repo", clone); code != 0 {
			t.Fatalf("redrive shard %d: exit %d\n%s", k, code, stderr)
		}
		outs2 = append(outs2, out)
	}
	code, _, stderr = clitest.Home(homeG, append([]string{"gather", plan2, "--repo", gatherRepo}, outs2...)...)
	if code != 0 {
		t.Fatalf("redrive gather: exit %d\n%s", code, stderr)
	}
	if got := fmt.Sprint(clitest.DLQSummary(t, homeG, "gatherer", "fan2")); got != "map[item_2:CommandFailed/2/1,2 item_7:CommandFailed/2/1,2]" {
		t.Fatalf("redrive DLQ = %s", got)
	}
	if got := gitopstest.Out(t, gatherRepo, "show", "prodigy/fan2:shared.txt"); got != "second" {
		t.Fatalf("redriven item_6 did not land on the earlier results: shared.txt = %q", got)
	}
	if runs3, _ := os.ReadFile(filepath.Join(sync, "reduce-runs")); string(runs3) != "solo\nfan\nfan2\n" {
		t.Fatalf("reduce runs = %q", runs3)
	}
}
