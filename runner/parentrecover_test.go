package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestResumeRemakesAParentWorktreeAKilledGitLeftHalfUpdated: a git killed
// while it brought the parent worktree up to the results branch (a
// `read-tree -m -u` of many files: reduce's, or gather's in the
// background) leaves files of the branch that its index does not list, and
// the next update refuses to overwrite them. Resume then makes the parent
// worktree again from the branch (it holds nothing the branch does not)
// instead of failing, and reduce sees every item's file.
func TestResumeRemakesAParentWorktreeAKilledGitLeftHalfUpdated(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
	wf := r.Workflow(`
name: half
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: echo "${item.n}" > "f-${item.n}.txt" && git add -A && git commit -qm "item ${item.n}"
reduce:
  - shell: ls f-*.txt | wc -l | tr -d ' ' > count.txt && git add count.txt && git commit -qm reduce
`)
	ctx, cancel := context.WithCancel(context.Background())
	o, _, stderr, hooks := r.options(wf)
	o.InterruptGrace = 10 * time.Second
	hooks.OnItem = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	if _, err := runJob(ctx, o); !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("err = %v, want interrupted\n%s", err, stderr)
	}
	// The interrupted job left its parent worktree at the results branch
	// (two items' files); its index is put back to the base, as a git
	// killed after writing the files and before writing the index leaves it.
	parent := runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}.ParentWorktree()
	if _, err := os.Stat(filepath.Join(parent, "f-0.txt")); err != nil {
		t.Fatalf("the interrupted job's parent worktree lacks its merged files: %v", err)
	}
	gitIn := func(args ...string) string { return gitopstest.Out(t, parent, args...) }
	gitIn("read-tree", r.Git("rev-parse", "main"))
	if out := gitIn("status", "--porcelain"); !strings.Contains(out, "?? f-0.txt") {
		t.Fatalf("the fixture wants untracked merged files in the parent worktree:\n%s", out)
	}
	o2, _, stderr2, _ := r.options(nil)
	res, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if res.Successful != 4 {
		t.Fatalf("result = %+v", res)
	}
	if got := r.Git("show", res.ResultsBranch+":count.txt"); got != "4" {
		t.Errorf("reduce counted %s files, want 4", got)
	}
}
