package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// A kill -9 while one of the job's git processes holds a lock (the parent
// worktree's index.lock or HEAD.lock, the results branch's ref lock)
// leaves the lock behind; git then refuses to touch that worktree or ref.
// Resume removes such locks of the job's own worktrees and refs and
// finishes the job.
func TestResumeRemovesStaleGitLocks(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(6)})
	wf := r.Workflow(`
name: locks
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
reduce:
  - shell: echo reduced > reduce.txt && git add reduce.txt && git commit -qm reduce
`)
	o, _, stderr, hooks := r.options(wf)
	ctx, cancel := context.WithCancel(context.Background())
	hooks.OnItem = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	res, err := runJob(ctx, o)
	if !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("err = %v, want interrupted\n%s", err, stderr)
	}
	var parent string
	for _, l := range strings.Split(r.Git("worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok && filepath.Base(p) == "parent" {
			parent = p
		}
	}
	if parent == "" {
		t.Fatal("no parent worktree")
	}
	admin := strings.TrimSpace(r.Git("-C", parent, "rev-parse", "--absolute-git-dir"))
	common := filepath.Join(r.Dir, ".git")
	old := time.Now().Add(-time.Minute)
	locks := []string{
		filepath.Join(admin, "index.lock"),
		filepath.Join(admin, "HEAD.lock"),
		filepath.Join(common, "refs", "heads", filepath.FromSlash(res.ResultsBranch)+".lock"),
	}
	for _, p := range locks {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	userLock := filepath.Join(common, "refs", "heads", "main.lock") // not the job's: left alone
	if err := os.WriteFile(userLock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr2, _ := r.options(nil)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: res.JobID, Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if res2.Status != runner.StatusCompleted || res2.Successful != 6 {
		t.Fatalf("resumed result = %+v\n%s", res2, stderr2)
	}
	for _, p := range locks {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
		if !strings.Contains(stderr2.String(), "removed stale git lock "+p) {
			t.Errorf("resume did not say it removed %s:\n%s", p, stderr2)
		}
	}
	if _, err := os.Stat(userLock); err != nil {
		t.Errorf("the lock of a branch that is not the job's was removed")
	}
}
