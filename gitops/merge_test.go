package gitops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// mergeFixture is a repository with a parent worktree on branch "parent"
// (for MergeNoFF), a branch "tparent" at the same commit (for MergeTree) and
// helpers to make agent branches from the base commit.
type mergeFixture struct {
	c      *Client
	repo   string
	parent string // worktree of branch "parent"
	base   string
}

func newMergeFixture(t *testing.T) *mergeFixture {
	t.Helper()
	files := map[string]string{
		"shared.txt": "line1\nline2\nline3\n",
		"keep.txt":   "keep\n",
		"old.txt":    "rename me\nwith enough content\nto be detected\n",
		"del.txt":    "delete me\n",
	}
	repo, c := newRepo(t, files, true)
	base := git(t, repo, "rev-parse", "HEAD")
	parent := filepath.Join(t.TempDir(), "parent")
	if err := c.WorktreeAdd(bg(), parent, "parent", base); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "branch", "tparent", base)
	return &mergeFixture{c: c, repo: repo, parent: parent, base: base}
}

// agent makes branch name from base with one commit applying files
// ("<delete>" deletes, a "from->to" key renames).
func (f *mergeFixture) agent(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), name)
	if err := f.c.WorktreeAdd(bg(), wt, name, f.base); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		switch content {
		case "<delete>":
			git(t, wt, "rm", "-q", p)
		case "<rename>":
			git(t, wt, "mv", p, p+".renamed")
		default:
			writeFiles(t, wt, map[string]string{p: content})
		}
	}
	head := commitFiles(t, wt, "agent "+name, nil)
	if err := f.c.WorktreeRemove(bg(), wt); err != nil {
		t.Fatal(err)
	}
	return head
}

func TestMergeModesGiveIdenticalTrees(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	agents := []map[string]string{
		{"a1.txt": "agent 1\n"},
		{"shared.txt": "line1 changed\nline2\nline3\n"},
		{"shared.txt": "line1\nline2\nline3 changed\n", "dir/new.txt": "n"}, // same file, other hunk
		{"old.txt": "<rename>"},
		{"del.txt": "<delete>"},
		{"keep.txt": "keep\nmore\n", "a1b.txt": "x"},
	}
	for i, files := range agents {
		name := fmt.Sprintf("agent-%d", i)
		f.agent(t, name, files)
		noff, err := f.c.MergeNoFF(bg(), f.parent, name, "Merge "+name)
		if err != nil {
			t.Fatalf("MergeNoFF(%s): %v", name, err)
		}
		tree, err := f.c.MergeTree(bg(), "tparent", name, "Merge "+name)
		if err != nil {
			t.Fatalf("MergeTree(%s): %v", name, err)
		}
		if tn, tt := git(t, f.repo, "rev-parse", noff+"^{tree}"), git(t, f.repo, "rev-parse", tree+"^{tree}"); tn != tt {
			t.Fatalf("after %s: worktree mode tree %s != tree mode tree %s", name, tn, tt)
		}
		// Both are real merge commits with the agent as second parent.
		for _, c := range []string{noff, tree} {
			if p := git(t, f.repo, "rev-parse", c+"^2"); p != git(t, f.repo, "rev-parse", name) {
				t.Errorf("%s second parent = %s, want %s", c, p, name)
			}
		}
		if got := git(t, f.repo, "rev-parse", "tparent"); got != tree {
			t.Errorf("tparent = %s, want %s", got, tree)
		}
	}
	if got := readFile(t, f.parent, "shared.txt"); got != "line1 changed\nline2\nline3 changed\n" {
		t.Errorf("parent shared.txt = %q", got)
	}
	if s := git(t, f.parent, "status", "--porcelain"); s != "" {
		t.Errorf("parent worktree not clean after merges: %q", s)
	}
}

func TestMergeConflictLeavesParentUntouched(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "first", map[string]string{"shared.txt": "first\nline2\nline3\n", "f1.txt": "1"})
	f.agent(t, "second", map[string]string{"shared.txt": "second\nline2\nline3\n", "f2.txt": "2"})
	// An untracked and an ignored file in the parent must survive the abort.
	writeFiles(t, f.parent, map[string]string{"untracked.txt": "u", ".gitignore": "*.log\n", "x.log": "l"})
	if _, err := f.c.MergeNoFF(bg(), f.parent, "first", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.MergeTree(bg(), "tparent", "first", ""); err != nil {
		t.Fatal(err)
	}

	t.Run("worktree_mode", func(t *testing.T) {
		before := takeSnapshot(t, f.parent)
		_, err := f.c.MergeNoFF(bg(), f.parent, "second", "")
		checkConflict(t, err, "second", []string{"shared.txt"})
		if after := takeSnapshot(t, f.parent); after != before {
			t.Errorf("parent changed by a conflicted merge:\nbefore %+v\nafter  %+v", before, after)
		}
		if got := readFile(t, f.parent, "shared.txt"); got != "first\nline2\nline3\n" {
			t.Errorf("shared.txt = %q, want the first agent's version", got)
		}
		if readFile(t, f.parent, "f2.txt") != "<missing>" {
			t.Error("f2.txt of the conflicting agent leaked into the parent")
		}
		if inProgress, _ := f.c.mergeInProgress(bg(), f.parent); inProgress {
			t.Error("MERGE_HEAD left behind")
		}
	})
	t.Run("tree_mode", func(t *testing.T) {
		before := git(t, f.repo, "rev-parse", "tparent")
		_, err := f.c.MergeTree(bg(), "tparent", "second", "")
		checkConflict(t, err, "second", []string{"shared.txt"})
		if after := git(t, f.repo, "rev-parse", "tparent"); after != before {
			t.Errorf("tparent moved from %s to %s on conflict", before, after)
		}
	})
}

func checkConflict(t *testing.T, err error, branch string, files []string) {
	t.Helper()
	var mc *MergeConflictError
	if !errors.Is(err, ErrMergeConflict) || !errors.As(err, &mc) {
		t.Fatalf("error = %v, want a MergeConflictError", err)
	}
	if mc.Branch != branch || !slices.Equal(mc.Files, files) {
		t.Errorf("conflict = %+v, want branch %s files %v", mc, branch, files)
	}
	if mc.Detail != "CONFLICT (content): Merge conflict in shared.txt" {
		t.Errorf("Detail = %q", mc.Detail)
	}
}

func TestMergeAlreadyMerged(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"a.txt": "a"})
	n1, err := f.c.MergeNoFF(bg(), f.parent, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	t1, err := f.c.MergeTree(bg(), "tparent", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	n2, err := f.c.MergeNoFF(bg(), f.parent, "a", "")
	if err != nil || n2 != n1 {
		t.Errorf("second MergeNoFF = %s, %v; want unchanged %s", n2, err, n1)
	}
	t2, err := f.c.MergeTree(bg(), "tparent", "a", "")
	if err != nil || t2 != t1 {
		t.Errorf("second MergeTree = %s, %v; want unchanged %s", t2, err, t1)
	}
	// Merging the base (an ancestor, same tree after a revert) is a no-op too.
	if got, err := f.c.MergeTree(bg(), "tparent", f.base, ""); err != nil || got != t1 {
		t.Errorf("MergeTree(ancestor) = %s, %v; want %s", got, err, t1)
	}
	// A fresh target equal to the branch is a no-op.
	git(t, f.repo, "branch", "same", "a")
	if got, err := f.c.MergeTree(bg(), "refs/heads/same", "a", ""); err != nil || got != git(t, f.repo, "rev-parse", "a") {
		t.Errorf("MergeTree(same) = %s, %v", got, err)
	}
}

func TestMergeTreeSameTreeNotAncestor(t *testing.T) {
	t.Parallel()
	// An agent whose commits cancel out yields the target's tree but is not
	// an ancestor: like git merge --no-ff, a merge commit is still made.
	f := newMergeFixture(t)
	wt := filepath.Join(t.TempDir(), "wt")
	if err := f.c.WorktreeAdd(bg(), wt, "noop", f.base); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, wt, "change", map[string]string{"keep.txt": "changed\n"})
	commitFiles(t, wt, "revert", map[string]string{"keep.txt": "keep\n"})
	got, err := f.c.MergeTree(bg(), "tparent", "noop", "")
	if err != nil || got == f.base {
		t.Fatalf("MergeTree(noop) = %s, %v; want a new merge commit", got, err)
	}
	noff, err := f.c.MergeNoFF(bg(), f.parent, "noop", "")
	if err != nil || noff == f.base {
		t.Fatalf("MergeNoFF(noop) = %s, %v; want a new merge commit", noff, err)
	}
}

func TestMergeNoFFRefusesOverLocalChanges(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"keep.txt": "agent\n"})
	writeFiles(t, f.parent, map[string]string{"keep.txt": "local edit\n"})
	before := takeSnapshot(t, f.parent)
	_, err := f.c.MergeNoFF(bg(), f.parent, "a", "")
	var ge *GitError
	if err == nil || errors.Is(err, ErrMergeConflict) || !errors.As(err, &ge) {
		t.Fatalf("error = %v, want a GitError that is not a conflict", err)
	}
	if after := takeSnapshot(t, f.parent); after != before {
		t.Errorf("parent changed: before %+v after %+v", before, after)
	}
	if _, err := f.c.MergeNoFF(bg(), f.parent, "no-such-branch", ""); err == nil || errors.Is(err, ErrMergeConflict) {
		t.Errorf("merge of a missing branch = %v, want a plain error", err)
	}
}

// TestMergeTreeCompareAndSwap: a writer that keeps moving the target right
// before each update-ref makes MergeTree give up with ErrRefChanged after
// MaxMergeRetries attempts, never overwriting the writer's commit.
func TestMergeTreeCompareAndSwap(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"a.txt": "a"})
	intruders := []string{
		f.agent(t, "intruder1", map[string]string{"i.txt": "1"}),
		f.agent(t, "intruder2", map[string]string{"i.txt": "2"}),
	}
	var mu sync.Mutex
	updates := 0
	c, err := New(f.repo, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	c.beforeSwap = func() { // right before each compare-and-swap
		mu.Lock()
		git(t, f.repo, "update-ref", "refs/heads/tparent", intruders[updates%2])
		updates++
		mu.Unlock()
	}
	_, err = c.MergeTree(bg(), "tparent", "a", "")
	if !errors.Is(err, ErrRefChanged) {
		t.Fatalf("MergeTree with a racing writer = %v, want ErrRefChanged", err)
	}
	if updates != MaxMergeRetries {
		t.Errorf("%d update attempts, want %d", updates, MaxMergeRetries)
	}
	if got := git(t, f.repo, "rev-parse", "tparent"); got != intruders[(updates-1)%2] {
		t.Errorf("tparent = %s, want the last intruder's %s (not overwritten)", got, intruders[(updates-1)%2])
	}
}

// TestMergeTreeRedoesOnMovedTip: when another writer wins the race once,
// the merge is redone on the new tip: both changes end up in the result.
func TestMergeTreeRedoesOnMovedTip(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"a.txt": "a"})
	intruder := f.agent(t, "intruder", map[string]string{"i.txt": "i"})
	var once sync.Once
	c, err := New(f.repo, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	c.beforeSwap = func() { once.Do(func() { git(t, f.repo, "update-ref", "refs/heads/tparent", intruder) }) }
	got, err := c.MergeTree(bg(), "tparent", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if parents := git(t, f.repo, "rev-list", "--parents", "-n", "1", got); parents != got+" "+intruder+" "+git(t, f.repo, "rev-parse", "a") {
		t.Errorf("parents = %q, want the intruder's tip first", parents)
	}
	files := git(t, f.repo, "ls-tree", "--name-only", got)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "i.txt") {
		t.Errorf("merged tree lacks a change: %q", files)
	}
}

func TestMergeCancelledContext(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"a.txt": "a"})
	ctx, cancel := context.WithCancel(bg())
	cancel()
	before := takeSnapshot(t, f.parent)
	if _, err := f.c.MergeNoFF(ctx, f.parent, "a", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("MergeNoFF(cancelled) = %v, want context.Canceled", err)
	}
	if after := takeSnapshot(t, f.parent); after != before {
		t.Errorf("parent changed: before %+v after %+v", before, after)
	}
}
