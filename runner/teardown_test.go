package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// TestDeferredTeardownDeletesPoolFilesAfterTheResult: with DeferTeardown the
// job ends with its pool worktrees unregistered from git and their branches
// gone, but their files only moved aside (.discarded-*); Result.Teardown
// deletes them, and what a crashed run left moved aside too. Without it
// nothing is left when Run returns, the crashed run's leftovers included.
// A completed job's `resume` deletes what a killed run left moved aside.
func TestDeferredTeardownDeletesPoolFilesAfterTheResult(t *testing.T) {
	t.Parallel()
	for _, deferred := range []bool{true, false} {
		r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
		wf := r.Workflow(`
name: teardown
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`)
		o, _, stderr, _ := r.options(wf)
		o.DeferTeardown = deferred
		root := runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}.WorktreeRoot()
		crashed := filepath.Join(root, ".discarded-pool-crashed")
		if err := os.MkdirAll(filepath.Join(crashed, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, "src", "f.txt"), []byte("x"), 0o444); err != nil {
			t.Fatal(err)
		}
		res, err := r.run(o)
		if err != nil || res.Successful != 4 {
			t.Fatalf("deferred=%v: run: %v %+v\n%s", deferred, err, res, stderr)
		}
		if wt := r.Git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
			t.Errorf("deferred=%v: worktrees still registered:\n%s", deferred, wt)
		}
		if b := r.Git("branch", "--list", "prodigy-agent/*"); b != "" {
			t.Errorf("deferred=%v: agent branches left: %s", deferred, b)
		}
		aside, _ := filepath.Glob(filepath.Join(root, ".discarded-*"))
		if !deferred {
			if res.Teardown != nil || len(aside) != 0 {
				t.Errorf("without DeferTeardown: Teardown set %v, left %q", res.Teardown != nil, aside)
			}
			continue
		}
		if res.Teardown == nil || len(aside) != 3 {
			t.Fatalf("with DeferTeardown: Teardown set %v, moved aside %q (want 2 slots + the crashed run's)", res.Teardown != nil, aside)
		}
		for _, d := range aside {
			if d == crashed {
				continue
			}
			if _, err := os.Stat(filepath.Join(d, "items.json")); err != nil {
				t.Errorf("%s: the slot's files were not moved aside with it: %v", d, err)
			}
		}
		res.Teardown()
		res.Teardown() // twice is fine
		if left, _ := filepath.Glob(filepath.Join(root, ".discarded-*")); len(left) != 0 {
			t.Errorf("left after Teardown: %q", left)
		}
		// A run killed before its Teardown: `resume` of the completed job
		// deletes what it moved aside.
		if err := os.MkdirAll(filepath.Join(root, ".discarded-pool-killed", "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		o2, _, stderr2, _ := r.options(nil)
		if res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2}); err != nil || res2.Status != runner.StatusCompleted {
			t.Fatalf("resume: %v\n%s", err, stderr2)
		}
		if left, _ := filepath.Glob(filepath.Join(root, ".discarded-*")); len(left) != 0 {
			t.Errorf("left after resume of the completed job: %q", left)
		}
	}
}

// TestDeferredTeardownIgnoresPlantedDiscardedPaths: an agent that plants
// symbolic links named like moved-aside worktrees next to its own (one at
// the exact name its slot would be moved to) cannot make teardown follow
// them: the slot is deleted in place, the links are removed, and what
// they point at is untouched.
func TestDeferredTeardownIgnoresPlantedDiscardedPaths(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "keep.txt")
	if err := os.WriteFile(sentinel, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
	wf := r.Workflow(fmt.Sprintf(`
name: planted
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        ln -sfn %[1]q "../.discarded-$(basename "$PWD")"
        ln -sfn %[1]q ../.discarded-evil
        echo "${item.n}" > "out-${item.n}.txt" && git add "out-${item.n}.txt" && git commit -qm "item ${item.n}"
`, outside))
	o, _, stderr, _ := r.options(wf)
	o.DeferTeardown = true
	res, err := r.run(o)
	if err != nil || res.Successful != 4 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	if res.Teardown != nil {
		res.Teardown()
	}
	if b, err := os.ReadFile(sentinel); err != nil || string(b) != "mine" {
		t.Fatalf("the planted link's target was touched: %q, %v", b, err)
	}
	root := runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}.WorktreeRoot()
	if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) != 0 {
		t.Errorf("left in the job's worktree directory: %q", left)
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".discarded-*")); len(left) != 0 {
		t.Errorf("moved-aside paths left: %q", left)
	}
	if wt := r.Git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("worktrees still registered:\n%s", wt)
	}
}
