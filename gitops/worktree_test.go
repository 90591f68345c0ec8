package gitops

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestWorktreeLifecycle(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	base := git(t, repo, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "agent-0")
	if err := c.WorktreeAdd(bg(), wt, "prodigy/agent-0", base); err != nil {
		t.Fatal(err)
	}
	if err := c.WorktreeAdd(bg(), filepath.Join(t.TempDir(), "x"), "prodigy/agent-0", base); err == nil {
		t.Error("WorktreeAdd with an existing branch succeeded")
	}
	list, err := c.Worktrees(bg())
	if err != nil {
		t.Fatal(err)
	}
	wtReal, _ := filepath.EvalSymlinks(wt)
	if len(list) != 2 || list[1].Path != wtReal || list[1].Branch != "prodigy/agent-0" || list[1].Head != base {
		t.Fatalf("Worktrees() = %+v", list)
	}
	if list[0].Branch != "main" {
		t.Errorf("main worktree = %+v", list[0])
	}

	if err := c.WorktreeRemove(bg(), wt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Errorf("worktree dir still there: %v", err)
	}
	// Resume: the branch survived; check it out again.
	if err := c.WorktreeAddExisting(bg(), wt, "prodigy/agent-0"); err != nil {
		t.Fatal(err)
	}
	if br, _ := c.CurrentBranch(bg(), wt); br != "prodigy/agent-0" {
		t.Errorf("resumed worktree branch = %q", br)
	}
	// Removing twice is fine.
	for range 2 {
		if err := c.WorktreeRemove(bg(), wt); err != nil {
			t.Errorf("WorktreeRemove: %v", err)
		}
	}
	if list, _ := c.Worktrees(bg()); len(list) != 1 {
		t.Errorf("worktrees left: %+v", list)
	}
}

func TestWorktreeRemoveTolerant(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	base := git(t, repo, "rev-parse", "HEAD")
	t.Run("dir_already_gone", func(t *testing.T) {
		wt := filepath.Join(t.TempDir(), "gone")
		if err := c.WorktreeAdd(bg(), wt, "gone", base); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(wt); err != nil {
			t.Fatal(err)
		}
		if err := c.WorktreeRemove(bg(), wt); err != nil {
			t.Fatalf("WorktreeRemove(deleted dir) = %v", err)
		}
		for _, w := range mustWorktrees(t, c) {
			if strings.HasSuffix(w.Path, "gone") {
				t.Errorf("stale entry %+v not pruned", w)
			}
		}
		// The branch is free again.
		if err := c.DeleteBranch(bg(), "gone"); err != nil {
			t.Error(err)
		}
	})
	t.Run("plain_dir_not_a_worktree", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "plain")
		writeFiles(t, dir, map[string]string{"a/b.txt": "x"})
		if err := c.WorktreeRemove(bg(), dir); err != nil {
			t.Fatalf("WorktreeRemove(plain dir) = %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("plain dir survived: %v", err)
		}
	})
	t.Run("never_deletes_a_repository", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other")
		writeFiles(t, other, map[string]string{"f": "f"})
		git(t, other, "init", "-q")
		for _, p := range []string{repo, filepath.Dir(repo), other} {
			if err := c.WorktreeRemove(bg(), p); err == nil || !strings.Contains(err.Error(), "refusing") {
				t.Errorf("WorktreeRemove(%s) = %v, want a refusal", p, err)
			}
		}
		if readFile(t, repo, "README.md") != "hello\n" || readFile(t, other, "f") != "f" {
			t.Fatal("a repository was damaged")
		}
	})
	t.Run("dirty_and_read_only", func(t *testing.T) {
		wt := filepath.Join(t.TempDir(), "dirty")
		if err := c.WorktreeAdd(bg(), wt, "dirty", base); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, wt, map[string]string{"README.md": "edited", "new/file.txt": "n", "ro/f": "f"})
		if err := os.Chmod(filepath.Join(wt, "ro"), 0o555); err != nil {
			t.Fatal(err)
		}
		if err := c.WorktreeRemove(bg(), wt); err != nil {
			t.Fatalf("WorktreeRemove(dirty) = %v", err)
		}
		if _, err := os.Stat(wt); !os.IsNotExist(err) {
			t.Errorf("dirty worktree survived: %v", err)
		}
	})
}

func mustWorktrees(t *testing.T, c *Client) []Worktree {
	t.Helper()
	l, err := c.Worktrees(bg())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWorktreeRemoveUndeletable makes a file git cannot delete. chmod does not
// stop root, so the immutable attribute (chattr +i) is used; the test is
// skipped where that is unavailable (not root, or a file system without
// attributes such as tmpfs).
func TestWorktreeRemoveUndeletable(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	wt := filepath.Join(t.TempDir(), "stuck")
	if err := c.WorktreeAdd(bg(), wt, "stuck", git(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatal(err)
	}
	stuck := filepath.Join(wt, "immutable.txt")
	writeFiles(t, wt, map[string]string{"immutable.txt": "x"})
	if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
		t.Skipf("chattr +i unavailable (needs root and an ext4-like file system): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", stuck).Run() })

	err := c.WorktreeRemove(bg(), wt)
	if err == nil {
		t.Fatal("WorktreeRemove succeeded with an immutable file inside")
	}
	if !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), "immutable.txt") {
		t.Errorf("error = %v, want EPERM naming the file", err)
	}
	if _, statErr := os.Stat(stuck); statErr != nil {
		t.Fatalf("immutable file vanished: %v", statErr)
	}
	// Once the cause is gone, removal completes (spec 136 clean-orphaned).
	if out, err := exec.Command("chattr", "-i", stuck).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	if err := c.WorktreeRemove(bg(), wt); err != nil {
		t.Fatalf("WorktreeRemove after chattr -i = %v", err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Errorf("worktree survived: %v", err)
	}
	if err := c.DeleteBranch(bg(), "stuck"); err != nil {
		t.Error(err)
	}
	if n := len(mustWorktrees(t, c)); n != 1 {
		t.Errorf("%d worktrees listed, want only the main one", n)
	}
}

func TestWorktreeConcurrentAddRemove(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	base := git(t, repo, "rev-parse", "HEAD")
	// A second Client of the same repository shares the lock.
	c2, err := New(repo, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c
			if i%2 == 1 {
				cl = c2
			}
			wt := filepath.Join(root, fmt.Sprintf("w%d", i))
			if err := cl.WorktreeAdd(bg(), wt, fmt.Sprintf("b%d", i), base); err != nil {
				errs[i] = err
				return
			}
			if err := cl.WorktreeRemove(bg(), wt); err != nil {
				errs[i] = err
				return
			}
			errs[i] = cl.DeleteBranch(bg(), fmt.Sprintf("b%d", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if l := mustWorktrees(t, c); len(l) != 1 {
		t.Errorf("worktrees left: %+v", l)
	}
	if got := git(t, repo, "branch", "--list", "b*"); got != "" {
		t.Errorf("branches left: %q", got)
	}
}

func TestWorktreePrune(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	wt := filepath.Join(t.TempDir(), "p")
	if err := c.WorktreeAdd(bg(), wt, "p", git(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if l := mustWorktrees(t, c); len(l) != 2 || !l[1].Prunable {
		t.Fatalf("before prune: %+v, want a prunable entry", l)
	}
	if err := c.WorktreePrune(bg()); err != nil {
		t.Fatal(err)
	}
	if l := mustWorktrees(t, c); len(l) != 1 {
		t.Errorf("after prune: %+v", l)
	}
}

func TestParseWorktrees(t *testing.T) {
	t.Parallel()
	out := "worktree /r\x00HEAD 1111111111111111111111111111111111111111\x00branch refs/heads/main\x00\x00" +
		"worktree /w\x00HEAD 2222222222222222222222222222222222222222\x00detached\x00locked why\x00prunable gitdir file points to non-existent location\x00\x00" +
		"worktree /b\x00bare\x00\x00"
	got := parseWorktrees(out)
	want := []Worktree{
		{Path: "/r", Head: "1111111111111111111111111111111111111111", Branch: "main"},
		{Path: "/w", Head: "2222222222222222222222222222222222222222", Detached: true, Locked: true, Prunable: true},
		{Path: "/b", Bare: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseWorktrees = %+v\nwant %+v", got, want)
	}
}

func TestResetWorktree(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{
		".gitignore": "*.log\nbuild/\n", "same.txt": "unchanged\n", "item.txt": "base\n",
	}, true)
	base := git(t, repo, "rev-parse", "HEAD")
	next := commitFiles(t, repo, "parent moved on", map[string]string{"item.txt": "parent v2\n", "added.txt": "new"})

	pool := filepath.Join(t.TempDir(), "pool-0")
	if err := c.WorktreeAdd(bg(), pool, "agent/item-1", base); err != nil {
		t.Fatal(err)
	}
	// Item 1 leaves everything behind: a commit, edits, untracked, ignored,
	// a nested repository.
	commitFiles(t, pool, "item 1 work", map[string]string{"item1.txt": "1"})
	writeFiles(t, pool, map[string]string{
		"item.txt": "dirty edit\n", "untracked/x.txt": "u", "debug.log": "l", "build/out.bin": "b",
	})
	git(t, pool, "init", "-q", "nested")
	inode := func(p string) uint64 {
		fi, err := os.Stat(filepath.Join(pool, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	sameBefore := inode("same.txt")

	if err := c.ResetWorktree(bg(), pool, "agent/item-2", next); err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Head(bg(), pool); h != next {
		t.Errorf("HEAD = %s, want %s", h, next)
	}
	if br, _ := c.CurrentBranch(bg(), pool); br != "agent/item-2" {
		t.Errorf("branch = %q, want agent/item-2", br)
	}
	if s := git(t, pool, "status", "--porcelain", "--ignored", "--untracked-files=all"); s != "" {
		t.Errorf("leftovers after reset: %q", s)
	}
	for p, want := range map[string]string{
		"item.txt": "parent v2\n", "added.txt": "new", "item1.txt": "<missing>", "debug.log": "<missing>",
		"build/out.bin": "<missing>", "untracked/x.txt": "<missing>", "nested/.git/HEAD": "<missing>",
	} {
		if got := readFile(t, pool, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if inode("same.txt") != sameBefore {
		t.Error("unchanged file was rewritten (inode changed)")
	}
	// The old item branch still exists for the caller to merge or delete.
	if ok, _ := c.BranchExists(bg(), "agent/item-1"); !ok {
		t.Error("agent/item-1 vanished")
	}
	// Resetting onto an existing branch name moves it (-B).
	if err := c.ResetWorktree(bg(), pool, "agent/item-1", base); err != nil {
		t.Fatal(err)
	}
	if got := git(t, repo, "rev-parse", "agent/item-1"); got != base {
		t.Errorf("agent/item-1 = %s, want reset to %s", got, base)
	}
	mainHead := git(t, repo, "rev-parse", "main")
	if err := c.ResetWorktree(bg(), pool, "main", base); err == nil || !strings.Contains(err.Error(), "checked out in") {
		t.Errorf("ResetWorktree onto a branch checked out elsewhere = %v, want refusal", err)
	}
	if got := git(t, repo, "rev-parse", "main"); got != mainHead {
		t.Errorf("main moved from %s to %s", mainHead, got)
	}
}

func TestSyncWorktree(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	f.agent(t, "a", map[string]string{"keep.txt": "from agent\n", "new.txt": "n"})
	f.agent(t, "b", map[string]string{"del.txt": "<delete>"})
	// The parent worktree has "parent" checked out; merge into it by ref.
	writeFiles(t, f.parent, map[string]string{"shared.txt": "local edit kept\n", "scratch.txt": "s"})
	for _, br := range []string{"a", "b"} {
		if _, err := f.c.MergeTree(bg(), "parent", br, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.c.SyncWorktree(bg(), f.parent); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"keep.txt": "from agent\n", "new.txt": "n", "del.txt": "<missing>",
		"shared.txt": "local edit kept\n", "scratch.txt": "s",
	} {
		if got := readFile(t, f.parent, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if s := git(t, f.parent, "status", "--porcelain"); s != "M shared.txt\n?? scratch.txt" {
		t.Errorf("status after sync = %q, want only the local edits", s)
	}
	// In sync already: a no-op.
	if err := f.c.SyncWorktree(bg(), f.parent); err != nil {
		t.Errorf("second SyncWorktree: %v", err)
	}

	// A local edit to a path the update must change: refused, nothing changed.
	f.agent(t, "c", map[string]string{"shared.txt": "agent c\n"})
	if _, err := f.c.MergeTree(bg(), "parent", "c", ""); err != nil {
		t.Fatal(err)
	}
	index := git(t, f.parent, "write-tree")
	if err := f.c.SyncWorktree(bg(), f.parent); err == nil {
		t.Fatal("SyncWorktree over a conflicting local edit succeeded")
	}
	if got := readFile(t, f.parent, "shared.txt"); got != "local edit kept\n" {
		t.Errorf("shared.txt = %q, local edit lost", got)
	}
	if got := git(t, f.parent, "write-tree"); got != index {
		t.Error("index changed by a refused sync")
	}
}

func TestAttachBranchOnAFreshSlot(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{"a/x.txt": "x\n", "b/y.txt": "y\n", "top.txt": "t\n"}, true)
	base := git(t, repo, "rev-parse", "HEAD")
	next := commitFiles(t, repo, "parent moved on", map[string]string{"a/x.txt": "x2\n"})
	slot := filepath.Join(t.TempDir(), "pool-0")
	if err := c.WorktreeAddNoCheckout(bg(), slot, "", base); err != nil {
		t.Fatal(err)
	}
	if err := c.WorktreePopulate(bg(), slot, CheckoutOptions{UntrackedCache: true}); err != nil {
		t.Fatal(err)
	}
	// Files older than the index, so no entry is racily clean (git would
	// rewrite the index to smudge it, walk or no walk).
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"a/x.txt", "b/y.txt", "top.txt"} {
		if err := os.Chtimes(filepath.Join(slot, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	git(t, slot, "update-index", "-q", "--refresh")
	index := filepath.Join(git(t, slot, "rev-parse", "--absolute-git-dir"), "index")
	stamp := func() string {
		fi, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %d", fi.Sys().(*syscall.Stat_t).Ino, fi.ModTime().UnixNano())
	}
	before := stamp()
	git(t, repo, "branch", "agent/a", next) // an existing branch is reset (-C)

	if err := c.AttachBranch(bg(), slot, "agent/a", base); err != nil {
		t.Fatal(err)
	}
	if br, _ := c.CurrentBranch(bg(), slot); br != "agent/a" {
		t.Errorf("branch = %q, want agent/a", br)
	}
	if got := git(t, repo, "rev-parse", "agent/a"); got != base {
		t.Errorf("agent/a = %s, want %s", got, base)
	}
	if s := git(t, slot, "status", "--porcelain", "--ignored", "--untracked-files=all"); s != "" {
		t.Errorf("status after attach: %q", s)
	}
	if stamp() != before {
		t.Error("the index was rewritten: the attach walked the worktree")
	}

	// HEAD now on a branch: AttachBranch is SwitchBranch, which discards.
	writeFiles(t, slot, map[string]string{"top.txt": "dirty\n"})
	if err := c.AttachBranch(bg(), slot, "agent/b", next); err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Head(bg(), slot); h != next {
		t.Errorf("HEAD = %s, want %s", h, next)
	}
	if got := readFile(t, slot, "top.txt"); got != "t\n" {
		t.Errorf("top.txt = %q, want the edit discarded", got)
	}
	if got := readFile(t, slot, "a/x.txt"); got != "x2\n" {
		t.Errorf("a/x.txt = %q, want x2", got)
	}

	// Detached elsewhere than commit: also SwitchBranch.
	git(t, slot, "checkout", "-q", "--detach", base)
	if err := c.AttachBranch(bg(), slot, "agent/c", next); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, slot, "a/x.txt"); got != "x2\n" {
		t.Errorf("a/x.txt = %q after attaching at %s", got, next)
	}
	// A branch checked out in another worktree is refused, as by SwitchBranch.
	git(t, slot, "checkout", "-q", "--detach", base)
	if err := c.AttachBranch(bg(), slot, "main", base); err == nil || !strings.Contains(err.Error(), "checked out in") {
		t.Errorf("AttachBranch onto main = %v, want refused", err)
	}
	if err := c.AttachBranch(bg(), slot, "-bad", base); err == nil {
		t.Error("invalid branch name accepted")
	}
}
