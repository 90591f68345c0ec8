package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// abcFiles is a repository with directories a/, b/, c/ and root files.
func abcFiles(items int) map[string]string {
	return map[string]string{
		"items.json": itemsJSON(items), "a/keep.txt": "a\n", "a/sub/deep.txt": "deep\n",
		"b/keep.txt": "b\n", "c/keep.txt": "c\n",
	}
}

// sparseWorkflow checks, in setup, every agent and reduce, that only
// want/ (and root files) are checked out, and has each agent commit in
// want/.
func sparseWorkflow(want, absent1, absent2, block string) string {
	check := fmt.Sprintf(`test -f %[1]s/keep.txt && test -f README.md && test ! -e %[2]s && test ! -e %[3]s || { echo "not sparse: $(ls -A)" >&2; exit 1; }`, want, absent1, absent2)
	return fmt.Sprintf(`
name: sparse
%[3]s
setup:
  - shell: '%[1]s'
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: |
        %[1]s
        echo "${item.n}" > %[2]s/out-${item.n}.txt
        git add %[2]s && git commit -q -m "item ${item.n}"
reduce:
  - shell: '%[1]s && test -f %[2]s/out-0.txt'
`, check, want, block)
}

func TestSparseAgentsKeepWholeTreesInResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		iso   runner.Isolation
		merge runner.MergeMode
	}{{runner.IsolationPool, runner.MergeTree}, {runner.IsolationFresh, runner.MergeWorktree}} {
		t.Run(string(tc.iso)+"-"+string(tc.merge), func(t *testing.T) {
			t.Parallel()
			r := newTestRepo(t, abcFiles(6))
			head := r.Git("rev-parse", "HEAD")
			wf := r.Workflow(sparseWorkflow("a", "b", "c", "worktree:\n  sparse: [a/]"))
			o, _, stderr, hooks := r.options(wf)
			o.Isolation, o.Merge = tc.iso, tc.merge
			res, err := r.run(o)
			if err != nil || res.Successful != 6 {
				t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
			}
			files := r.Files(res.ResultsBranch)
			for _, f := range []string{"README.md", "items.json", "a/keep.txt", "a/sub/deep.txt", "b/keep.txt", "c/keep.txt", "a/out-0.txt", "a/out-5.txt"} {
				if !slices.Contains(files, f) {
					t.Errorf("results branch lacks %s: %q", f, files)
				}
			}
			if got := r.Git("diff", "--stat", head, res.ResultsBranch, "--", "b", "c"); got != "" {
				t.Errorf("b/ or c/ changed on the results branch:\n%s", got)
			}
			if !strings.Contains(stderr.String(), "sparse checkout of a (plus files at the top level)") {
				t.Errorf("no sparse notice in the log:\n%s", stderr)
			}
			if len(hooks.Warnings()) != 0 {
				t.Errorf("warnings: %q", hooks.Warnings())
			}
			r.AssertUntouched(head)
			if got := r.Git("config", "--type=bool", "--default=false", "core.sparseCheckout"); got != "false" {
				t.Errorf("the user's checkout became sparse: %q", got)
			}
			if wt := r.Git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
				t.Errorf("worktrees left behind:\n%s", wt)
			}
		})
	}
}

func TestSparseOptionReplacesWorkflowKey(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, abcFiles(3))
	wf := r.Workflow(sparseWorkflow("b", "a", "c", "worktree:\n  sparse: [a/]"))
	o, _, stderr, _ := r.options(wf)
	o.Sparse = []string{"b/"}
	res, err := r.run(o)
	if err != nil || res.Successful != 3 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
	if files := r.Files(res.ResultsBranch); !slices.Contains(files, "b/out-2.txt") || !slices.Contains(files, "a/keep.txt") {
		t.Errorf("results branch = %q", files)
	}

	o.JobID, o.Sparse = "job-2", []string{"../escape"}
	var ue *runner.UsageError
	if _, err := r.run(o); !errors.As(err, &ue) || !strings.Contains(err.Error(), `--sparse: sparse directory "../escape"`) {
		t.Errorf("bad --sparse: err = %v", err)
	}
}

func TestInheritedSparseCheckoutIsWarnedAbout(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, abcFiles(2))
	r.Git("sparse-checkout", "set", "--cone", "c")
	head := r.Git("rev-parse", "HEAD")
	wf := r.Workflow(sparseWorkflow("c", "a", "b", ""))
	o, _, stderr, hooks := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 2 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
	if len(hooks.Warnings()) != 1 || !strings.Contains(hooks.Warnings()[0], "is a sparse checkout: git copies its sparse patterns") {
		t.Errorf("warnings = %q", hooks.Warnings())
	}
	if files := r.Files(res.ResultsBranch); !slices.Contains(files, "a/keep.txt") || !slices.Contains(files, "c/out-1.txt") {
		t.Errorf("results branch = %q", files)
	}
	r.AssertUntouched(head)
}

// TestMapOnlyJobNeverChecksOutTheParent: with tree merges, no setup, no
// reduce and an absolute input file, nothing reads the parent worktree, so
// it is never checked out; the results branch is complete all the same.
func TestMapOnlyJobNeverChecksOutTheParent(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, abcFiles(0))
	input := filepath.Join(t.TempDir(), "items.json")
	if err := os.WriteFile(input, []byte(itemsJSON(4)), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}.ParentWorktree()
	track := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
map:
  input: %q
  max_parallel: 2
  agent_template:
    - shell: |
        ls -A %q > %s/parent-${item.n}
        echo "${item.n}" > a/out-${item.n}.txt && git add a && git commit -q -m "item ${item.n}"
`, input, parent, track))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 4 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
	for i := range 4 {
		b, err := os.ReadFile(filepath.Join(track, fmt.Sprintf("parent-%d", i)))
		if err != nil || strings.TrimSpace(string(b)) != ".git" {
			t.Errorf("item %d saw the parent worktree holding %q (%v), want only .git", i, b, err)
		}
	}
	files := r.Files(res.ResultsBranch)
	for _, f := range []string{"b/keep.txt", "a/out-0.txt", "a/out-3.txt", "items.json"} {
		if !slices.Contains(files, f) {
			t.Errorf("results branch lacks %s", f)
		}
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("parent worktree left behind: %v", err)
	}
}

// TestResumeKeepsTheSparseOption: the first run's --sparse is in the
// checkpoint, so the resumed agents check out the same directories, not
// the workflow's worktree.sparse (they fail if they see a/ instead of b/).
func TestResumeKeepsTheSparseOption(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, abcFiles(6))
	wf := r.Workflow(strings.Replace(sparseWorkflow("b", "a", "c", "worktree:\n  sparse: [a/]"), "max_parallel: 3", "max_parallel: 1", 1))
	o, _, stderr, hooks := r.options(wf)
	o.Sparse = []string{"b/"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hooks.OnItem = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	res, err := runJob(ctx, o)
	if !errors.Is(err, runner.ErrInterrupted) || res.Pending == 0 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
	o2, _, stderr2, _ := r.options(nil)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil || res2.Status != runner.StatusCompleted || res2.Successful != 6 {
		t.Fatalf("resume: %v, %+v\n%s", err, res2, stderr2)
	}
	if !strings.Contains(stderr2.String(), "sparse checkout of b (plus files at the top level)") {
		t.Errorf("the resumed run is not sparse on b/:\n%s", stderr2)
	}
	if files := r.Files(res2.ResultsBranch); !slices.Contains(files, "b/out-5.txt") || !slices.Contains(files, "a/keep.txt") {
		t.Errorf("results branch = %q", files)
	}
}
