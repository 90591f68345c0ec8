package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
)

// testRepo is a real git repository in a temp dir with one commit.
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
	if files == nil {
		files = map[string]string{}
	}
	if _, ok := files["README.md"]; !ok {
		files["README.md"] = "test repo\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
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

// hookLog records hook calls.
type hookLog struct {
	mu       sync.Mutex
	items    []runner.ItemOutcome
	warnings []string
	onItem   func(n int)
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

func (h *hookLog) Warning(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warnings = append(h.warnings, msg)
}

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

// options returns runner options for the repo with a fake clock.
func (r *testRepo) options(wf *config.Workflow) (Options, *retrytest.FakeClock, *syncBuffer, *hookLog) {
	clock := retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	stderr := &syncBuffer{}
	hooks := &hookLog{}
	return Options{
		Workflow: wf, RepoDir: r.dir, Home: r.home, JobID: "job-1",
		Stderr: stderr, Hooks: hooks, Clock: clock, Rand: func() float64 { return 0.5 },
		Getenv: func(string) string { return "" },
	}, clock, stderr, hooks
}

func (r *testRepo) run(o Options) (*runner.Result, error) {
	r.t.Helper()
	return runJob(context.Background(), o)
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
	out := r.git("ls-tree", "-r", "--name-only", rev)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
