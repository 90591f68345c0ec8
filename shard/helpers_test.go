package shard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
)

// testRepo is a real git repository in a temp dir with one commit, and a
// state directory of its own.
type testRepo struct {
	t    *testing.T
	dir  string
	home string
}

func newTestRepo(t *testing.T, files map[string]string) *testRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &testRepo{t: t, dir: dir, home: filepath.Join(t.TempDir(), "home")}
	r.git("init", "-q", "-b", "main")
	files["README.md"] = "test repo\n"
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git("add", ".")
	r.git("-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "initial")
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// workflow writes a workflow file next to (not inside) the repo and loads it.
func (r *testRepo) workflow(yaml string) *config.Workflow {
	r.t.Helper()
	path := filepath.Join(filepath.Dir(r.dir), "workflow.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		r.t.Fatal(err)
	}
	wf, err := config.Load(path)
	if err != nil {
		r.t.Fatalf("load workflow: %v", err)
	}
	return wf
}

// clone makes a full (no-local) clone of r with its own state directory.
func (r *testRepo) clone(name string) *testRepo {
	r.t.Helper()
	dir := filepath.Join(r.t.TempDir(), name)
	r.git("clone", "-q", "--no-local", r.dir, dir)
	return &testRepo{t: r.t, dir: dir, home: filepath.Join(r.t.TempDir(), "home")}
}

// dlqRecords reads every DLQ record of the job.
func (r *testRepo) dlqRecords(jobID string) map[string]dlq.DeadLetteredItem {
	r.t.Helper()
	store, err := dlq.Open(runner.Paths{Home: r.home, Repo: filepath.Base(r.dir), JobID: jobID}.DLQRoot(), jobID, dlq.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]dlq.DeadLetteredItem{}
	if err := store.Each(func(it dlq.DeadLetteredItem) error { out[it.ItemID] = it; return nil }); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// files lists the files of a revision.
func (r *testRepo) files(rev string) []string {
	return strings.Split(r.git("ls-tree", "-r", "--name-only", rev), "\n")
}

// assertUntouched checks the user's checkout: same branch, same HEAD, clean.
func (r *testRepo) assertUntouched(head string) {
	r.t.Helper()
	if got := r.git("rev-parse", "HEAD"); got != head {
		r.t.Errorf("user's HEAD moved: %s -> %s", head, got)
	}
	if got := r.git("rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		r.t.Errorf("user's branch changed to %s", got)
	}
	if got := r.git("status", "--porcelain"); got != "" {
		r.t.Errorf("user's checkout is dirty:\n%s", got)
	}
}

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
	return Options{Workflow: wf, RepoDir: r.dir, Home: r.home, JobID: "job-1", Stderr: &syncBuffer{}, Hooks: &hookLog{},
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
	o := r.options(r.workflow(yaml))
	dir := filepath.Join(t.TempDir(), "plan")
	if _, err := planJob(context.Background(), PlanOptions{Run: o, Dir: dir, Shards: shards}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return dir, o
}

// shardOpts are o for the clone c: its checkout and state directory.
func shardOpts(c *testRepo, o Options) Options {
	o.RepoDir, o.Home, o.JobID, o.Workflow = c.dir, c.home, "", nil
	return o
}

// hookLog records hook calls.
type hookLog struct {
	mu     sync.Mutex
	items  []runner.ItemOutcome
	onItem func(n int)
}

func (h *hookLog) ItemFinished(it runner.ItemOutcome, _ string) {
	h.mu.Lock()
	h.items = append(h.items, it)
	n := len(h.items)
	f := h.onItem
	h.mu.Unlock()
	if f != nil {
		f(n)
	}
}

func (h *hookLog) Warning(string) {}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mountFullTmpfs mounts a tiny tmpfs at dir and fills it (as root, or
// through passwordless sudo; the test is skipped otherwise); free empties
// it again.
func mountFullTmpfs(t *testing.T, dir string) (free func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
	}
	command := func(args ...string) *exec.Cmd {
		args = append(sudo, args...)
		return exec.Command(args[0], args[1:]...)
	}
	opts := fmt.Sprintf("size=64k,uid=%d,gid=%d,mode=0755", os.Geteuid(), os.Getegid())
	if out, err := command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root or sudo): %v %s", err, out)
	}
	t.Cleanup(func() { _ = command("umount", "-l", dir).Run() })
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}
