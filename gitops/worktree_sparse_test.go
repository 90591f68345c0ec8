package gitops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// abcRepo is a repository with directories a/, b/, c/ and a root file.
func abcRepo(t *testing.T) (string, *Client) {
	t.Helper()
	return newRepo(t, map[string]string{
		"README.md": "root\n", "a/x.txt": "a\n", "a/deep/y.txt": "ay\n",
		"b/x.txt": "b\n", "c/x.txt": "c\n", "ab/x.txt": "ab\n",
	}, true)
}

// files lists the regular files under dir (relative, "/"-separated), .git excluded.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestWorktreeCreateSparse(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "agent")
	if err := c.WorktreeCreate(bg(), wt, "prodigy/agent-1", base, CheckoutOptions{Sparse: []string{"a/"}, UntrackedCache: true}); err != nil {
		t.Fatal(err)
	}
	// Cone mode: a/ recursively, plus files at the top level; not ab/.
	if got, want := files(t, wt), []string{"README.md", "a/deep/y.txt", "a/x.txt"}; !slices.Equal(got, want) {
		t.Errorf("sparse worktree files = %q, want %q", got, want)
	}
	if br := git(t, wt, "symbolic-ref", "--short", "HEAD"); br != "prodigy/agent-1" {
		t.Errorf("branch = %q", br)
	}
	if st := git(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("fresh sparse worktree is not clean: %q", st)
	}
	if v := git(t, wt, "config", "--get", "index.sparse"); v != "true" {
		t.Errorf("index.sparse = %q", v)
	}
	idx, err := os.ReadFile(filepath.Join(repo, ".git", "worktrees", "agent", "index"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(idx, []byte("UNTR")) {
		t.Error("the index has no untracked cache extension")
	}
	// The user's checkout is untouched: still full, not sparse.
	if sp, err := c.IsSparse(bg()); err != nil || sp {
		t.Errorf("IsSparse of the main worktree = %v, %v", sp, err)
	}
	if got := files(t, repo); len(got) != 6 {
		t.Errorf("main worktree files = %q", got)
	}

	// The agent commits in a/; the object-only merge keeps b/ and c/.
	commitFiles(t, wt, "agent work", map[string]string{"a/new.txt": "new\n"})
	git(t, repo, "branch", "results", base)
	if _, err := c.MergeTree(bg(), "results", "prodigy/agent-1", ""); err != nil {
		t.Fatal(err)
	}
	tree := git(t, repo, "ls-tree", "-r", "--name-only", "results")
	want := "README.md\na/deep/y.txt\na/new.txt\na/x.txt\nab/x.txt\nb/x.txt\nc/x.txt"
	if tree != want {
		t.Errorf("results tree:\n%s\nwant:\n%s", tree, want)
	}
	// Switching the sparse slot to another branch keeps it sparse.
	if err := c.ResetWorktree(bg(), wt, "prodigy/agent-2", "results"); err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, wt), []string{"README.md", "a/deep/y.txt", "a/new.txt", "a/x.txt"}; !slices.Equal(got, want) {
		t.Errorf("after reset, files = %q, want %q", got, want)
	}
}

func TestWorktreeCreateFullAndDetached(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "slot")
	if err := c.WorktreeCreate(bg(), wt, "", base, CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, wt); len(got) != 6 {
		t.Errorf("full worktree files = %q", got)
	}
	if head := git(t, wt, "rev-parse", "HEAD"); head != base {
		t.Errorf("HEAD = %s, want %s", head, base)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees", "slot", "config.worktree")); err == nil {
		t.Error("a full worktree got a config.worktree")
	}
	if out := git(t, wt, "status", "--porcelain", "-b"); out != "## HEAD (no branch)" {
		t.Errorf("status = %q", out)
	}
}

func TestWorktreeCreateRejects(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	for _, sp := range [][]string{{"/etc"}, {"../x"}, {"a/*"}, {""}, {"a/.git"}, {"--help"}} {
		wt := filepath.Join(dir, "x")
		err := c.WorktreeCreate(bg(), wt, "", base, CheckoutOptions{Sparse: sp})
		if sp[0] == "--help" {
			// A directory name that looks like an option is just a name (read from stdin).
			if err != nil {
				t.Errorf("sparse %q: %v", sp, err)
			}
			if got := files(t, wt); !slices.Equal(got, []string{"README.md"}) {
				t.Errorf("sparse --help: files = %q", got)
			}
			continue
		}
		if err == nil {
			t.Errorf("sparse %q accepted", sp)
		}
		if _, err := os.Stat(wt); err == nil {
			t.Errorf("sparse %q: worktree created", sp)
		}
	}
	// A failing checkout step removes the half-made worktree.
	wt := filepath.Join(dir, "bad")
	if err := c.WorktreeCreate(bg(), wt, "prodigy/x", "no-such-commit", CheckoutOptions{}); err == nil {
		t.Error("bad commit accepted")
	}
	if list, _ := c.Worktrees(bg()); len(list) != 2 { // main + the --help one
		t.Errorf("worktrees = %+v", list)
	}
}

func TestWorktreeCreateInheritsUserSparse(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	git(t, repo, "sparse-checkout", "set", "--cone", "b")
	base := git(t, repo, "rev-parse", "HEAD")
	if sp, err := c.IsSparse(bg()); err != nil || !sp {
		t.Fatalf("IsSparse = %v, %v; want true", sp, err)
	}
	dir := t.TempDir()
	inh := filepath.Join(dir, "inherited")
	if err := c.WorktreeCreate(bg(), inh, "", base, CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, inh), []string{"README.md", "b/x.txt"}; !slices.Equal(got, want) {
		t.Errorf("inherited sparse: files = %q, want %q", got, want)
	}
	exp := filepath.Join(dir, "explicit")
	if err := c.WorktreeCreate(bg(), exp, "", base, CheckoutOptions{Sparse: []string{"c"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, exp), []string{"README.md", "c/x.txt"}; !slices.Equal(got, want) {
		t.Errorf("explicit sparse: files = %q, want %q", got, want)
	}
	// The user's own checkout keeps its cone.
	if got, want := files(t, repo), []string{"README.md", "b/x.txt"}; !slices.Equal(got, want) {
		t.Errorf("user checkout: files = %q, want %q", got, want)
	}
}

func TestWorktreeCreateConcurrentAndDiscard(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	paths := make([]string, n)
	for i := range n {
		paths[i] = filepath.Join(dir, fmt.Sprintf("slot-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sp []string
			if i%2 == 0 {
				sp = []string{"a"}
			}
			errs[i] = c.WorktreeCreate(context.Background(), paths[i], "", base, CheckoutOptions{Sparse: sp})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	if list, err := c.Worktrees(bg()); err != nil || len(list) != n+1 {
		t.Fatalf("worktrees = %d, %v", len(list), err)
	}
	// A locked worktree and a non-worktree directory go through WorktreeRemove.
	git(t, repo, "worktree", "lock", paths[0])
	plain := filepath.Join(dir, "plain")
	if err := os.MkdirAll(filepath.Join(plain, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.WorktreeDiscard(context.Background(), paths[i]) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("discard slot %d: %v", i, err)
		}
		if _, err := os.Stat(paths[i]); !os.IsNotExist(err) {
			t.Errorf("slot %d still there: %v", i, err)
		}
	}
	if list, _ := c.Worktrees(bg()); len(list) != 1 {
		t.Errorf("worktrees left: %+v", list)
	}
	if err := c.WorktreeDiscard(bg(), plain); err == nil || !strings.Contains(err.Error(), "is a repository") {
		t.Errorf("discard of a repository dir: %v", err)
	}
	if err := c.WorktreeDiscard(bg(), paths[1]); err != nil {
		t.Errorf("discarding twice: %v", err)
	}
}

func TestSyncWorktreeLeavesUncheckedOutWorktree(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "parent")
	if err := c.WorktreeAddNoCheckout(bg(), wt, "results", base); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, repo, "more", map[string]string{"b/new.txt": "n\n"})
	git(t, repo, "update-ref", "refs/heads/results", git(t, repo, "rev-parse", "HEAD"))
	if err := c.SyncWorktree(bg(), wt); err != nil {
		t.Fatal(err)
	}
	if got := files(t, wt); len(got) != 0 {
		t.Errorf("a never-checked-out worktree got files: %q", got)
	}
	// Once populated, it follows its branch.
	if err := c.WorktreePopulate(bg(), wt, CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, wt); len(got) != 7 {
		t.Errorf("populated worktree files = %q", got)
	}
	if err := c.WorktreeRemove(bg(), wt); err != nil {
		t.Fatal(err)
	}
}

func TestWorktreeDetachMovesFilesAsideAndFreesTheBranch(t *testing.T) {
	t.Parallel()
	repo, c := abcRepo(t)
	base := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	slot, aside := filepath.Join(dir, "pool-1"), filepath.Join(dir, ".discarded-pool-1")
	if err := c.WorktreeCreate(bg(), slot, "agent/1", base, CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, slot, map[string]string{"untracked.txt": "u"})
	moved, err := c.WorktreeDetach(bg(), slot, aside)
	if err != nil || !moved {
		t.Fatalf("detach = %v, %v", moved, err)
	}
	if _, err := os.Stat(slot); !os.IsNotExist(err) {
		t.Errorf("the slot is still at its path: %v", err)
	}
	if got := readFile(t, aside, "untracked.txt"); got != "u" {
		t.Errorf("files not moved aside: untracked.txt = %q", got)
	}
	if list, _ := c.Worktrees(bg()); len(list) != 1 {
		t.Errorf("worktrees after detach: %+v", list)
	}
	// The branch is free: another worktree may check it out.
	other := filepath.Join(dir, "other")
	git(t, repo, "worktree", "add", "-q", other, "agent/1")
	if err := RemoveDetached(aside); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(aside); !os.IsNotExist(err) {
		t.Errorf("the detached files are still there: %v", err)
	}
	// Locked: discarded through git, nothing moved aside.
	git(t, repo, "worktree", "lock", other)
	if moved, err := c.WorktreeDetach(bg(), other, filepath.Join(dir, ".discarded-other")); err != nil || moved {
		t.Errorf("detach of a locked worktree = %v, %v; want discarded in place", moved, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".discarded-other")); !os.IsNotExist(err) {
		t.Errorf("a locked worktree was moved aside: %v", err)
	}
	if moved, err := c.WorktreeDetach(bg(), filepath.Join(dir, "gone"), filepath.Join(dir, ".discarded-gone")); err != nil || moved {
		t.Errorf("detach of a missing path = %v, %v", moved, err)
	}
}
