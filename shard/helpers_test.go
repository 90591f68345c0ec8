package shard_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
	"github.com/prodigy-action/prodigy-action/shard"
)

// testRepo is a real git repository in a temp dir with one commit and a
// state directory of its own (runnertest.Repo).
type testRepo struct{ *runnertest.Repo }

func newTestRepo(t *testing.T, files map[string]string) *testRepo {
	return &testRepo{runnertest.NewRepo(t, files)}
}

// clone makes a full (no-local) clone of r with its own state directory.
func (r *testRepo) clone(name string) *testRepo { return &testRepo{r.Clone(name)} }

type (
	hookLog    = runnertest.HookLog
	syncBuffer = runnertest.SyncBuffer
)

// Options is how these tests describe an operation: the Engine's
// dependencies and the operation's choices in one value.
type Options struct {
	Workflow   *config.Workflow
	RepoDir    string
	Home       string
	JobID      string
	MaxCostUSD float64
	AgentUser  string
	Stderr     io.Writer
	Hooks      runner.Hooks
	Environ    []string
	Git        gitops.Options
	clock      retry.Clock
}

// options are Options for the repo with a fake clock.
func (r *testRepo) options(wf *config.Workflow) Options {
	return Options{Workflow: wf, RepoDir: r.Dir, Home: r.Home, JobID: "job-1", Stderr: &syncBuffer{}, Hooks: &hookLog{},
		clock: retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

// engine is the Engine of o's dependencies.
func (o Options) engine() *runner.Engine {
	return &runner.Engine{Home: o.Home, Git: o.Git, Clock: o.clock, Rand: func() float64 { return 0.5 },
		Stderr: o.Stderr, Hooks: o.Hooks, Getenv: func(string) string { return "" }, Environ: o.Environ}
}

func (o Options) agents() runner.Agents { return runner.Agents{User: o.AgentUser} }

// PlanOptions is a plan of Run's workflow into Dir.
type PlanOptions struct {
	Run         Options
	Dir         string
	Shards      int
	FromPending string
}

func planJob(ctx context.Context, po PlanOptions) (*shard.Plan, error) {
	o := po.Run
	return shard.NewPlan(ctx, o.engine(), shard.PlanSpec{Workflow: o.Workflow, RepoDir: o.RepoDir, JobID: o.JobID,
		MaxCostUSD: o.MaxCostUSD, Dir: po.Dir, Shards: po.Shards, FromPending: po.FromPending})
}

// ShardOptions is shard Shard of the plan in PlanDir.
type ShardOptions struct {
	Run     Options
	PlanDir string
	Shard   int
	OutDir  string
}

func runShard(ctx context.Context, so ShardOptions) (*shard.Result, error) {
	o := so.Run
	return shard.Run(ctx, o.engine(), shard.RunSpec{RepoDir: o.RepoDir, PlanDir: so.PlanDir, Shard: so.Shard, OutDir: so.OutDir, Agents: o.agents()})
}

// GatherOptions is a gather of Outputs of the plan in PlanDir.
type GatherOptions struct {
	Run     Options
	PlanDir string
	Outputs []string
	Reject  map[string]string
}

func gatherJob(ctx context.Context, g GatherOptions) (*runner.Result, error) {
	o := g.Run
	return shard.Gather(ctx, o.engine(), shard.GatherSpec{RepoDir: o.RepoDir, PlanDir: g.PlanDir, Outputs: g.Outputs, Reject: g.Reject})
}

// shardFixture plans a workflow in repo r and returns the plan directory.
func shardFixture(t *testing.T, r *testRepo, yaml string, shards int) (string, Options) {
	t.Helper()
	o := r.options(r.Workflow(yaml))
	dir := filepath.Join(t.TempDir(), "plan")
	if _, err := planJob(context.Background(), PlanOptions{Run: o, Dir: dir, Shards: shards}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return dir, o
}

// shardOpts are o for the clone c: its checkout and state directory.
func shardOpts(c *testRepo, o Options) Options {
	o.RepoDir, o.Home, o.JobID, o.Workflow = c.Dir, c.Home, "", nil
	return o
}

// mountFullTmpfs is runnertest.MountFullTmpfs.
var mountFullTmpfs = runnertest.MountFullTmpfs
