package shard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/internal/permtest"
)

// TestShardAgentsAsAnotherUser: a sharded job whose shards run their agents
// as users of their own (each shard in its own clone) gathers every item.
func TestShardAgentsAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running agents as another user needs root (CI runs as root)")
	}
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]`})
	dir, o := shardFixture(t, r, `
name: shards-own-users
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        id -u > "uid-${item.n}.txt"
        git add -A && git commit -q -m "item ${item.n}"
`, 2)
	o.AgentUser = "auto"
	var outs []string
	for k := range 2 {
		c := r.clone(fmt.Sprintf("s%d", k))
		permtest.OpenUp(t, c.Dir, c.Home)
		out := filepath.Join(t.TempDir(), "out")
		if _, err := runShard(context.Background(), ShardOptions{Run: shardOpts(c, o), PlanDir: dir, Shard: k, OutDir: out}); err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
		outs = append(outs, out)
	}
	res, err := gatherJob(context.Background(), GatherOptions{Run: shardOpts(r, o), PlanDir: dir, Outputs: outs})
	if err != nil || res.Successful != 4 {
		t.Fatalf("gather = %+v, %v", res, err)
	}
	for n := range 4 {
		if uid := r.Git("show", fmt.Sprintf("prodigy/job-1:uid-%d.txt", n)); uid != "70000" && uid != "70001" {
			t.Errorf("item %d ran as uid %s, want 70000 or 70001", n, uid)
		}
	}
}
