package shard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops"
)

// TestShardAndGatherUseTheEngineGitOptions runs shard and gather in clones
// owned by another user (uid 1001, as a runner's workspace is seen from the
// Action's root container): real git refuses them as "dubious ownership"
// unless the engine's git options (Options.Git, here safe.directory) reach
// every git process of shard and gather, as they do for run and resume.
func TestShardAndGatherUseTheEngineGitOptions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the clones to another user")
	}
	r := newTestRepo(t, map[string]string{"items.json": `[{"bad":"no"},{"bad":"yes"},{"bad":"no"}]`})
	dir, o := shardFixture(t, r, dlqFullWorkflow, 2)
	ctx := context.Background()
	foreign := func(name string) (*testRepo, Options) {
		c := r.clone(name)
		if out, err := exec.Command("chown", "-R", "1001:1001", c.Dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		// Plain git refuses the clone: the test means something.
		if out, err := exec.Command("git", "-C", c.Dir, "status").CombinedOutput(); err == nil || !strings.Contains(string(out), "dubious ownership") {
			t.Fatalf("git accepts a clone owned by uid 1001 (err %v): %s", err, out)
		}
		safe := []gitops.ConfigEntry{{Key: "safe.directory", Value: c.Dir}}
		co := shardOpts(c, o)
		co.Git.Config = append(co.Git.Config, safe...)
		co.Environ = gitops.ConfigEnv(os.Environ(), safe) // as the Action passes it to agents
		return c, co
	}
	var outs []string
	for k := range 2 {
		_, co := foreign(fmt.Sprintf("s%d", k))
		out := filepath.Join(t.TempDir(), "out")
		if _, err := runShard(ctx, ShardOptions{Run: co, PlanDir: dir, Shard: k, OutDir: out}); err != nil {
			t.Fatalf("shard %d in a clone owned by uid 1001: %v", k, err)
		}
		outs = append(outs, out)
	}
	_, gopts := foreign("g")
	res, err := gatherJob(ctx, GatherOptions{Run: gopts, PlanDir: dir, Outputs: outs})
	if err != nil {
		t.Fatalf("gather in a clone owned by uid 1001: %v", err)
	}
	if res.Successful != 2 || res.Failed != 1 {
		t.Errorf("gathered %d successful, %d failed; want 2 and 1", res.Successful, res.Failed)
	}
}
