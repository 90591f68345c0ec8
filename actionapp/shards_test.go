package actionapp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestActionModeShardedFanOut runs the Action's plan, two shards (each in
// its own clone, as matrix jobs would) and gather (in a third clone, with
// the outputs laid out as actions/download-artifact does): the plan sets
// the matrix output, gather reports like run (outputs, summary, one DLQ
// artifact, one comment).
func TestActionModeShardedFanOut(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	fo := newFanOut(t, gh, actionItems)
	repo, clone, planDir, outs := fo.repo, fo.clone, fo.plan, fo.outs

	at := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMAND": "plan", "INPUT_SHARDS": "2", "INPUT_PLAN-DIR": planDir})
	if code := at.run(t); code != exitOK {
		t.Fatalf("plan: exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	out := at.outputs(t)
	if out["matrix"] != `{"shard":[0,1]}` || out["shards"] != "2" || out["total"] != "3" || out["plan-dir"] != planDir {
		t.Fatalf("plan outputs = %v", out)
	}
	for k := range 2 {
		fo.shard(k)
	}
	// What the shards' items cost (their claude steps; item outcomes carry
	// cost_usd) reaches gather's cost-usd output.
	for k, cost := range []float64{0.25, 0.5} {
		p := filepath.Join(outs, fmt.Sprintf("prodigy-shard-555-1-%d", k), "result.json")
		var res map[string]any
		if data, err := os.ReadFile(p); err != nil || json.Unmarshal(data, &res) != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		res["items"].([]any)[0].(map[string]any)["cost_usd"] = cost
		data, _ := json.Marshal(res)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(gh.arts) != 0 || len(gh.comments) != 0 {
		t.Fatalf("plan or shard published: %d artifact(s), %d comment(s)", len(gh.arts), len(gh.comments))
	}
	gt := newActionTest(t, gh, clone("gather"), map[string]string{"INPUT_COMMAND": "gather", "INPUT_PLAN-DIR": planDir, "INPUT_SHARD-OUTPUTS": outs + "\n"})
	if code := gt.run(t); code != exitOK {
		t.Fatalf("gather: exit %d\n%s\n%s", code, gt.out.String(), gt.errb.String())
	}
	out = gt.outputs(t)
	for k, v := range map[string]string{"total": "3", "successful": "2", "failed": "1", "dlq-count": "1", "dlq-artifact-name": "prodigy-dlq-555-1", "cost-usd": "0.7500"} {
		if out[k] != v {
			t.Errorf("gather output %s = %q, want %q", k, out[k], v)
		}
	}
	if summary := gt.file(t, "GITHUB_STEP_SUMMARY"); !strings.Contains(summary, "| 3 | 2 | 1 | 0 | 0 | 1 |") {
		t.Errorf("summary:\n%s", summary)
	}
	if len(gh.comments) != 1 {
		t.Errorf("comments = %d, want 1", len(gh.comments))
	}
	files := gh.unzipped(t, "prodigy-dlq-555-1")
	if _, ok := files["items/item_1.json"]; !ok {
		t.Errorf("DLQ artifact lacks item_1: %v", keys(files))
	}
}

func TestNewestAttemptsKeepsOneOutputPerShard(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, shard int) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "result.json"), []byte(fmt.Sprintf(`{"shard": %d}`, shard)), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := mk("prodigy-shard-9-1-0", 0)
	b := mk("prodigy-shard-9-1-1", 1)
	c := mk("prodigy-shard-9-2-1", 1)
	d := mk("prodigy-shard-9-10-0", 0)
	got := newestAttempts([]string{a, c, b, d, filepath.Join(root, "missing")})
	slices.Sort(got)
	want := []string{filepath.Join(root, "missing"), d, c}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Live snapshots of one attempt beside its final output, and a re-run:
	// result.json decides (run_attempt, then output_seq), never the name.
	mkr := func(name, result string) string {
		d := mk(name, 0)
		if err := os.WriteFile(filepath.Join(d, "result.json"), []byte(result), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	live1 := mkr("prodigy-shard-9-1-live1-2", `{"shard": 2, "run_attempt": 1, "output_seq": 3}`)
	live2 := mkr("prodigy-shard-9-1-live2-2", `{"shard": 2, "run_attempt": 1, "output_seq": 9}`)
	final1 := mkr("prodigy-shard-9-1-2", `{"shard": 2, "run_attempt": 1, "output_seq": 12}`)
	rerunLive := mkr("prodigy-shard-9-2-live1-2", `{"shard": 2, "run_attempt": 2, "output_seq": 1}`)
	for _, tc := range []struct {
		dirs []string
		want string
	}{
		{[]string{live1, live2}, live2},
		{[]string{live2, live1}, live2},
		{[]string{final1, live2, live1}, final1},
		{[]string{live2, final1}, final1},
		{[]string{final1, rerunLive, live2}, rerunLive},
	} {
		if got := newestAttempts(tc.dirs); len(got) != 1 || got[0] != tc.want {
			t.Errorf("newestAttempts(%v) = %v, want %s", tc.dirs, got, tc.want)
		}
	}
}

// A re-run of a shard job on a new runner (fresh clone, fresh state)
// continues from the earlier attempt's downloaded output: its finished
// items are adopted, not run again.
func TestActionShardRerunContinuesFromTheEarlierAttempt(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	clone := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		if out, err := exec.Command("git", "clone", "-q", "--no-local", repo, dir).CombinedOutput(); err != nil {
			t.Fatalf("clone: %v %s", err, out)
		}
		return dir
	}
	planDir := filepath.Join(t.TempDir(), "plan")
	if code := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMAND": "plan", "INPUT_SHARDS": "1", "INPUT_PLAN-DIR": planDir}).run(t); code != exitOK {
		t.Fatalf("plan: exit %d", code)
	}
	previous := filepath.Join(t.TempDir(), "previous")
	first := newActionTest(t, gh, clone("attempt1"), map[string]string{"INPUT_COMMAND": "shard", "INPUT_SHARD": "0", "INPUT_PLAN-DIR": planDir,
		"INPUT_SHARD-OUT": filepath.Join(previous, "prodigy-shard-j-1-0")})
	if code := first.run(t); code != exitOK {
		t.Fatalf("attempt 1: exit %d\n%s", code, first.errb.String())
	}
	second := newActionTest(t, gh, clone("attempt2"), map[string]string{"INPUT_COMMAND": "shard", "INPUT_SHARD": "0", "INPUT_PLAN-DIR": planDir,
		"INPUT_SHARD-OUT": filepath.Join(t.TempDir(), "out"), "INPUT_SHARD-CONTINUE": previous})
	if code := second.run(t); code != exitOK {
		t.Fatalf("attempt 2: exit %d\n%s", code, second.errb.String())
	}
	if log := second.errb.String(); !strings.Contains(log, "3 of 3 item(s) already final") || strings.Contains(log, "succeeded (") {
		t.Errorf("attempt 2 did not continue from attempt 1's output:\n%s", log)
	}
	if out := second.outputs(t); out["successful"] != "2" || out["dlq-count"] != "1" {
		t.Errorf("attempt 2 outputs = %v", out)
	}
	// A first attempt has nothing to continue from.
	if got := previousShardOutput(filepath.Join(t.TempDir(), "none"), 0); got != "" {
		t.Errorf("previousShardOutput of a missing directory = %q", got)
	}
}

// TestActionGatherBehindAReviewGate: with review-environment set, gather
// publishes only after an approval of that environment in the run's review
// history (fails closed without one: exit 1, no push, no artifact, no
// comment), and an approving reviewer's "reject ITEM_ID: reason" lines
// (plus the reject input) leave those items out and dead-letter them with
// the reason.
func TestActionGatherBehindAReviewGate(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	fo := newFanOut(t, gh, `{"items":[{"name":"a","broken":false},{"name":"b","broken":false},{"name":"c","broken":false},{"name":"d","broken":false}]}`)
	clone, planDir, outs := fo.clone, fo.plan, fo.outs
	if at := newActionTest(t, gh, fo.repo, map[string]string{"INPUT_COMMAND": "plan", "INPUT_SHARDS": "2", "INPUT_PLAN-DIR": planDir}); at.run(t) != exitOK {
		t.Fatalf("plan failed\n%s", at.errb.String())
	}
	for k := range 2 {
		fo.shard(k)
	}
	gather := map[string]string{"INPUT_COMMAND": "gather", "INPUT_PLAN-DIR": planDir, "INPUT_SHARD-OUTPUTS": outs, "INPUT_REVIEW-ENVIRONMENT": "Publish"}
	// No approval (an environment without required reviewers): nothing published.
	gh.approvals = map[string][]map[string]any{"555": {{"state": "approved", "comment": "reject item_0", "environments": []map[string]any{{"name": "staging"}}, "user": map[string]any{"login": "other"}}}}
	gt := newActionTest(t, gh, clone("gather0"), gather)
	if code := gt.run(t); code != 1 || !strings.Contains(gt.out.String()+gt.errb.String(), "no approved review of that environment") {
		t.Fatalf("unapproved gather: exit %d\n%s\n%s", code, gt.out.String(), gt.errb.String())
	}
	if len(gh.arts) != 0 || len(gh.comments) != 0 {
		t.Fatalf("an unapproved gather published: %d artifact(s), %d comment(s)", len(gh.arts), len(gh.comments))
	}
	// Approved, with two items rejected (one in the comment, one in the input).
	gh.approvals["555"] = append(gh.approvals["555"], map[string]any{"state": "approved", "environments": []map[string]any{{"name": "publish"}},
		"user": map[string]any{"login": "reviewer"}, "comment": "Looks fine except:\nreject item_1: renames a public function\nthanks"})
	gather["INPUT_REJECT"] = "item_2: no tests"
	gt = newActionTest(t, gh, clone("gather1"), gather)
	if code := gt.run(t); code != exitOK {
		t.Fatalf("approved gather: exit %d\n%s\n%s", code, gt.out.String(), gt.errb.String())
	}
	out := gt.outputs(t)
	if out["successful"] != "2" || out["dlq-count"] != "2" {
		t.Fatalf("approved gather outputs = %v, want 2 merged and the 2 rejected in the DLQ", out)
	}
	files := gh.unzipped(t, "prodigy-dlq-555-1")
	for id, why := range map[string]string{"item_1": "rejected in review: renames a public function (@reviewer)", "item_2": "rejected in review: no tests"} {
		rec, ok := files["items/"+id+".json"]
		if !ok || !strings.Contains(string(rec), why) || !strings.Contains(string(rec), "ValidationFailed") {
			t.Errorf("DLQ artifact record of %s = %s, want ValidationFailed %q", id, rec, why)
		}
	}
}

// fanOut is a sharded fan-out of the Action's test workflow over items: a
// repository, its clones (one per matrix job, as GitHub gives each job a
// fresh checkout), the plan directory and where the shard outputs go.
type fanOut struct {
	t                *testing.T
	gh               *fakeGitHub
	repo, plan, outs string
}

func newFanOut(t *testing.T, gh *fakeGitHub, items string) *fanOut {
	t.Helper()
	return &fanOut{t: t, gh: gh, repo: cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": items}),
		plan: filepath.Join(t.TempDir(), "plan"), outs: filepath.Join(t.TempDir(), "outs")}
}

// clone is a fresh clone of the repository.
func (f *fanOut) clone(name string) string {
	f.t.Helper()
	dir := filepath.Join(f.t.TempDir(), name)
	if out, err := exec.Command("git", "clone", "-q", "--no-local", f.repo, dir).CombinedOutput(); err != nil {
		f.t.Fatalf("clone: %v %s", err, out)
	}
	return dir
}

// shard runs shard k in its own clone, its output laid out as
// actions/download-artifact does for the gather.
func (f *fanOut) shard(k int) {
	f.t.Helper()
	st := newActionTest(f.t, f.gh, f.clone(fmt.Sprintf("shard%d", k)), map[string]string{"INPUT_COMMAND": "shard", "INPUT_SHARD": fmt.Sprint(k), "INPUT_PLAN-DIR": f.plan,
		"INPUT_SHARD-OUT": filepath.Join(f.outs, fmt.Sprintf("prodigy-shard-555-1-%d", k))})
	if code := st.run(f.t); code != exitOK {
		f.t.Fatalf("shard %d: exit %d\n%s\n%s", k, code, st.out.String(), st.errb.String())
	}
}

// TestActionReportsAFailureStorm: the breaker's stop reaches the step's
// exit code (3), the job summary and the sticky comment (the signature,
// the items, what to do), and the outputs count the items never started.
func TestActionReportsAFailureStorm(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	wf := `name: storm
mode: mapreduce
map:
  input: items.json
  json_path: "$.items[*]"
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.broken}" = "true" ]; then echo "registry unavailable" >&2; exit 3; fi
        echo "${item.name}" > "out-${item.name}.txt" && git add . && git commit -qm "do ${item.name}"
  error_policy:
    circuit_breaker: 2
`
	items := `{"items":[{"name":"a","broken":true},{"name":"b","broken":true},{"name":"c","broken":false},{"name":"d","broken":false}]}`
	at := newActionTest(t, gh, cliRepo(t, map[string]string{"workflow.yml": wf, "items.json": items}), nil)
	if code := at.run(t); code != 3 {
		t.Fatalf("exit %d, want 3 (stopped by the breaker)\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	for _, want := range []string{"Failure storm: launching stopped.", "2 items in a row failed with CommandFailed", "2 item(s) were not started", "run this workflow again"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	if len(gh.comments) != 1 || !strings.Contains(fmt.Sprint(gh.comments[0]["body"]), "Failure storm") {
		t.Errorf("comment: %v", gh.comments)
	}
	if out := at.outputs(t); out["successful"] != "0" || out["failed"] != "2" {
		t.Errorf("outputs %v", out)
	}
}
