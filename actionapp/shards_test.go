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
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	clone := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		if out, err := exec.Command("git", "clone", "-q", "--no-local", repo, dir).CombinedOutput(); err != nil {
			t.Fatalf("clone: %v %s", err, out)
		}
		return dir
	}
	planDir := filepath.Join(t.TempDir(), "plan")
	outs := filepath.Join(t.TempDir(), "outs")

	at := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMAND": "plan", "INPUT_SHARDS": "2", "INPUT_PLAN-DIR": planDir})
	if code := at.run(t); code != exitOK {
		t.Fatalf("plan: exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	out := at.outputs(t)
	if out["matrix"] != `{"shard":[0,1]}` || out["shards"] != "2" || out["total"] != "3" || out["plan-dir"] != planDir {
		t.Fatalf("plan outputs = %v", out)
	}
	for k := range 2 {
		ws := clone(fmt.Sprintf("shard%d", k))
		st := newActionTest(t, gh, ws, map[string]string{"INPUT_COMMAND": "shard", "INPUT_SHARD": fmt.Sprint(k), "INPUT_PLAN-DIR": planDir,
			"INPUT_SHARD-OUT": filepath.Join(outs, fmt.Sprintf("prodigy-shard-555-1-%d", k))})
		if code := st.run(t); code != exitOK {
			t.Fatalf("shard %d: exit %d\n%s\n%s", k, code, st.out.String(), st.errb.String())
		}
	}
	// What the shards paid (their claude steps) reaches gather's cost-usd.
	for k, cost := range []float64{0.25, 0.5} {
		p := filepath.Join(outs, fmt.Sprintf("prodigy-shard-555-1-%d", k), "result.json")
		var res map[string]any
		if data, err := os.ReadFile(p); err != nil || json.Unmarshal(data, &res) != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		res["cost_usd"] = cost
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
}
