package shardcmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/runner"
)

func TestShardCommandsUsageErrorsExitTwo(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{
		{"plan", "wf.yml"}, {"plan", "wf.yml", "--out", t.TempDir(), "--shards", "0"}, {"plan", "wf.yml", "--out", t.TempDir(), "--shards", "257"},
		{"shard", t.TempDir(), "0"}, {"shard", t.TempDir(), "x", "--out", t.TempDir()}, {"shard", t.TempDir(), "0", "--out", t.TempDir()},
		{"gather"}, {"gather", t.TempDir()},
	} {
		if code, _, stderr := clitest.Home(home, args...); code != 2 || !strings.HasPrefix(stderr, "error: ") {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, stderr)
		}
	}
}

// TestShardCommandsAcceptRelativePaths runs plan, shard and gather with
// directories relative to the current directory (git runs elsewhere).
func TestShardCommandsAcceptRelativePaths(t *testing.T) {
	origin := gitopstest.Repo(t, map[string]string{"items.json": `[1,2,3]`})
	work := t.TempDir()
	t.Chdir(work)
	wf := `
name: rel
mode: mapreduce
setup:
  - shell: echo s > s.txt && git add -A && git commit -qm setup
map:
  input: items.json
  agent_template:
    - shell: echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
`
	if err := os.WriteFile("wf.yml", []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"p", "s0", "s1", "g"} {
		gitopstest.Out(t, work, "clone", "-q", "--no-local", origin, c)
	}
	steps := [][]string{
		{"plan", "wf.yml", "--out", "plan", "--shards", "2", "--repo", "p"},
		{"shard", "plan", "0", "--out", "out0", "--repo", "s0"},
		{"shard", "plan", "1", "--out", "out1", "--repo", "s1"},
		{"gather", "plan", "out0", "out1", "--repo", "g", "--json"},
	}
	var stdout string
	for i, args := range steps {
		code, out, stderr := clitest.Home(filepath.Join(work, fmt.Sprintf("home%d", i)), args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		stdout = out
	}
	var res runner.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Successful != 3 || res.Pending != 0 {
		t.Fatalf("gather: %+v, %v", res, err)
	}
	if got := gitopstest.Out(t, filepath.Join(work, "g"), "ls-tree", "--name-only", "prodigy/"+res.JobID); !strings.Contains(got, "s.txt") || !strings.Contains(got, "f2.txt") {
		t.Fatalf("results branch: %s", got)
	}
}
