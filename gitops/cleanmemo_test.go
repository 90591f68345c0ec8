package gitops

import (
	"crypto/sha1"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cleanRepo is a repository whose tree has a few levels of directories, and
// a counting Client on it whose clock runs an hour ahead: every directory
// is old enough for its stamp to be trusted (racyStamp).
func cleanRepo(t *testing.T) (string, *Client, func(string) int) {
	t.Helper()
	files := map[string]string{".gitignore": "*.log\n", "top.txt": "t\n"}
	for i := range 24 {
		files[fmt.Sprintf("src/m%d/p%d/f%02d.txt", i%3, i%4, i)] = fmt.Sprintf("file %d\n", i)
	}
	dir, _ := newRepo(t, files, true)
	c, count := countingClient(t, dir, isolatedEnv())
	c.clock = func() time.Time { return time.Now().Add(time.Hour) }
	if !stampsKept(dir) {
		t.Skipf("%s is not on a file system whose directory change times CleanWorktree trusts", dir)
	}
	return dir, c, count
}

// waitTick returns once a change made now would get a later change time
// than any made before the call, on the file system of dir: the kernel
// stamps changes with a coarse clock (one tick, up to 10 ms), so a
// directory changed twice within a tick keeps one change time. The clean
// guards against that with racyStamp; tests whose clock runs an hour ahead
// to trust every directory wait here instead (at most one tick; no wait
// where the kernel stamps a change after a look with a fine clock).
func waitTick(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(filepath.Dir(dir), "tick-probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctime := func() dirStamp {
		fi, err := os.Lstat(probe)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := dirStampOf(fi)
		return st
	}
	first := ctime()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		now := time.Now()
		if err := os.Chtimes(probe, now, now); err != nil { // sets the change time to now
			t.Fatal(err)
		}
		if ctime() != first {
			return
		}
	}
	t.Fatal("the file system's change times did not move in a second")
}

// listTree lists every path under dir (but .git) with its kind and, for
// files, content.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if rel == ".git" {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+" = "+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wouldRemove is what `git clean -ffdx` would delete in dir (its dry run):
// paths relative to dir, directories with a trailing slash.
func wouldRemove(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for l := range strings.SplitSeq(git(t, dir, "-c", "core.quotePath=false", "clean", "-ffdxn"), "\n") {
		if p, ok := strings.CutPrefix(l, "Would remove "); ok {
			out = append(out, p)
		}
	}
	return out
}

// TestCleanWorktreeMatchesGitClean: round after round of what agents leave
// — untracked and ignored files and directories, nested repositories,
// symbolic links, files dropped from the index while left on the disk,
// directories whose modification time is set back — the in-process clean,
// its memory of the last round warm, deletes exactly what `git clean
// -ffdx` would have, without running git.
func TestCleanWorktreeMatchesGitClean(t *testing.T) {
	t.Parallel()
	dir, c, count := cleanRepo(t)
	outside := filepath.Join(filepath.Dir(dir), "outside")
	writeFiles(t, outside, map[string]string{"keep.txt": "outside\n"})
	rng := rand.New(rand.NewPCG(26, 3))
	old := time.Now().Add(-48 * time.Hour)
	memo, fewest := c.cleaned, int64(1<<62)
	for round := range 40 {
		dirs := []string{"", "src", "src/m0", "src/m1/p1", "src/m2/p2", "new", "new/deeper"}
		pick := func() string { return dirs[rng.IntN(len(dirs))] }
		for op := range 1 + rng.IntN(4) {
			d := pick()
			name := fmt.Sprintf("r%d-%d", round, op)
			switch rng.IntN(8) {
			case 0:
				writeFiles(t, dir, map[string]string{filepath.Join(d, name+".tmp"): "untracked\n"})
			case 1:
				writeFiles(t, dir, map[string]string{filepath.Join(d, name+".log"): "ignored\n"})
			case 2:
				writeFiles(t, dir, map[string]string{filepath.Join(d, name, "a", "b.txt"): "deep\n"})
			case 3:
				if err := os.MkdirAll(filepath.Join(dir, d, name), 0o755); err != nil {
					t.Fatal(err)
				}
			case 4:
				git(t, dir, "init", "-q", filepath.Join(d, name))
			case 5:
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(dir, d, name)); err != nil {
					t.Fatal(err)
				}
			case 6: // a tracked file dropped from the index, left on the disk
				tracked := strings.Split(git(t, dir, "ls-files", "src"), "\n")
				git(t, dir, "rm", "-q", "--cached", tracked[rng.IntN(len(tracked))])
			case 7: // a commit that adds files, then a new untracked one
				f := "src/m0/" + name + ".txt"
				writeFiles(t, dir, map[string]string{f: "committed\n"})
				git(t, dir, "add", f)
				git(t, dir, "commit", "-q", "-m", name)
				writeFiles(t, dir, map[string]string{filepath.Join("src/m0", name+".new"): "untracked\n"})
			}
			// Whatever changed, its directory's modification time set back.
			if full := filepath.Join(dir, d); d != "" {
				_ = os.Chtimes(full, old, old)
			}
		}
		before, gone := listTree(t, dir), wouldRemove(t, dir)
		reads := memo.reads.Load()
		if err := c.CleanWorktree(bg(), dir); err != nil {
			t.Fatal(err)
		}
		fewest = min(fewest, memo.reads.Load()-reads)
		waitTick(t, dir)
		var want []string
		for _, p := range before {
			if !slices.ContainsFunc(gone, func(g string) bool {
				if strings.HasSuffix(g, "/") {
					return strings.HasPrefix(p, g) // the directory and all under it
				}
				return strings.HasPrefix(p, g+" ") // "name = content" or "name -> target"
			}) {
				want = append(want, p)
			}
		}
		if got := listTree(t, dir); !slices.Equal(got, want) {
			t.Fatalf("round %d: after the clean\n%s\nwant (git clean -ffdx would remove %q)\n%s", round, strings.Join(got, "\n"), gone, strings.Join(want, "\n"))
		}
		if left := wouldRemove(t, dir); len(left) > 0 {
			t.Fatalf("round %d: git clean would still remove %q", round, left)
		}
		if git(t, dir, "status", "--porcelain") != "" && round%5 == 0 {
			git(t, dir, "reset", "-q", "--hard") // the dropped files back into the index
		}
	}
	if n := count("clean"); n != 0 {
		t.Errorf("git clean ran %d times", n)
	}
	if fewest > 3 {
		t.Errorf("every clean listed at least %d directories: the memory of the last one was not used", fewest)
	}
	if got := readFile(t, outside, "keep.txt"); got != "outside\n" {
		t.Errorf("outside the worktree: %q", got)
	}
}

// TestCleanWorktreeListsOnlyWhatChanged: a clean after a clean lists no
// directory; a file added deep in the tree, its directory's modification
// time set back as an agent could, has that directory listed again and the
// file deleted; a tracked file dropped from the index (the directory
// unchanged) is found by the index's entries there, and deleted.
func TestCleanWorktreeListsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	dir, c, count := cleanRepo(t)
	memo := c.cleaned
	clean := func() int64 {
		t.Helper()
		before := memo.reads.Load()
		if err := c.CleanWorktree(bg(), dir); err != nil {
			t.Fatal(err)
		}
		waitTick(t, dir)
		return memo.reads.Load() - before
	}
	if n := clean(); n != 17 { // the top, src, 3 × m, 12 × m/p
		t.Fatalf("first clean listed %d directories, want 17", n)
	}
	if n := clean(); n != 0 {
		t.Fatalf("second clean listed %d directories, want 0", n)
	}
	deep := filepath.Join(dir, "src", "m1", "p1")
	fi, err := os.Stat(deep)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"src/m1/p1/planted.sh": "evil\n"})
	if err := os.Chtimes(deep, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if n := clean(); n != 1 {
		t.Errorf("after a file was planted: listed %d directories, want 1", n)
	}
	if _, err := os.Lstat(filepath.Join(deep, "planted.sh")); !os.IsNotExist(err) {
		t.Errorf("the planted file survived the clean (%v)", err)
	}
	clean() // lists it again, now remembered clean
	git(t, dir, "rm", "-q", "--cached", "src/m2/p0/f08.txt")
	if n := clean(); n != 1 {
		t.Errorf("after an index entry was dropped: listed %d directories, want 1", n)
	}
	if _, err := os.Lstat(filepath.Join(dir, "src/m2/p0/f08.txt")); !os.IsNotExist(err) {
		t.Errorf("the file dropped from the index survived the clean (%v)", err)
	}
	if n := count("clean"); n != 0 {
		t.Errorf("git clean ran %d times", n)
	}
}

// TestCleanWorktreeDoesNotTrustRecentChanges: a directory changed less than
// racyStamp before it is looked at is listed again at the next clean: a
// later change could leave it the same change time (the kernel stamps
// changes with a coarse clock).
func TestCleanWorktreeDoesNotTrustRecentChanges(t *testing.T) {
	t.Parallel()
	dir, c, _ := cleanRepo(t)
	memo := c.cleaned
	// The clock stops at the oldest change of any directory: every one is
	// recent, however long the machine takes to get here.
	oldest := time.Now()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st, ok := dirStampOf(fi); ok && time.Unix(st.sec, st.nsec).Before(oldest) {
			oldest = time.Unix(st.sec, st.nsec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.clock = func() time.Time { return oldest }
	for range 2 {
		before := memo.reads.Load()
		if err := c.CleanWorktree(bg(), dir); err != nil {
			t.Fatal(err)
		}
		if n := memo.reads.Load() - before; n != 17 {
			t.Errorf("listed %d directories, want all 17", n)
		}
	}
}

// TestCleanWorktreeStaysInside: a symbolic link the agent left (to a
// directory outside) is deleted, not followed; an index written by hand
// with a path out of the worktree ("../") is left to git, and nothing
// outside the worktree is touched either way.
func TestCleanWorktreeStaysInside(t *testing.T) {
	t.Parallel()
	t.Run("link to outside", func(t *testing.T) {
		t.Parallel()
		dir, c, _ := cleanRepo(t)
		outside := filepath.Join(filepath.Dir(dir), "outside")
		writeFiles(t, outside, map[string]string{"keep.txt": "k\n"})
		if err := os.Symlink(outside, filepath.Join(dir, "src", "link")); err != nil {
			t.Fatal(err)
		}
		if err := c.CleanWorktree(bg(), dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "src", "link")); !os.IsNotExist(err) {
			t.Errorf("the link survived (%v)", err)
		}
		if got := readFile(t, outside, "keep.txt"); got != "k\n" {
			t.Errorf("outside: %q", got)
		}
	})
	t.Run("index naming ..", func(t *testing.T) {
		t.Parallel()
		dir, c, count := cleanRepo(t)
		victim := filepath.Join(filepath.Dir(dir), "victim.txt")
		writeFiles(t, filepath.Dir(dir), map[string]string{"victim.txt": "v\n"})
		// "top.txt" becomes "t/../xx" in the index (same length, same
		// place in the order), the checksum fixed: a path git itself
		// never writes.
		index := filepath.Join(dir, ".git", "index")
		data, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		at := strings.Index(string(data), "top.txt\x00")
		if at < 0 {
			t.Fatal("top.txt not in the index")
		}
		copy(data[at:], "t/../xx")
		sum := sha1.Sum(data[:len(data)-20])
		copy(data[len(data)-20:], sum[:])
		if err := os.WriteFile(index, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = c.CleanWorktree(bg(), dir) // git may refuse the index: that is its call
		if count("clean") != 1 {
			t.Errorf("git clean ran %d times, want 1", count("clean"))
		}
		if got := readFile(t, filepath.Dir(victim), "victim.txt"); got != "v\n" {
			t.Errorf("outside: %q", got)
		}
	})
}

// TestCleanWorktreeDeepTree: a tree deeper than it has files (the walk's
// stack of children then outgrows the entries) is cleaned in-process too.
func TestCleanWorktreeDeepTree(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("d/", 90)
	dir, _ := newRepo(t, map[string]string{deep + "f.txt": "f\n"}, true)
	c, count := countingClient(t, dir, isolatedEnv())
	writeFiles(t, dir, map[string]string{deep[:80] + "new.txt": "n\n"})
	if err := c.CleanWorktree(bg(), dir); err != nil {
		t.Fatal(err)
	}
	if left := wouldRemove(t, dir); len(left) > 0 || count("clean") != 0 {
		t.Errorf("git clean would still remove %q; it ran %d times", left, count("clean"))
	}
	if got := readFile(t, dir, deep+"f.txt"); got != "f\n" {
		t.Errorf("the tracked file: %q", got)
	}
}

// TestCleanMemoIsBounded: the memory of cleaned worktrees holds at most
// maxCleanMemo of them, whatever number were cleaned.
func TestCleanMemoIsBounded(t *testing.T) {
	t.Parallel()
	m := newCleanMemo()
	for i := range 3 * maxCleanMemo {
		m.put(fmt.Sprintf("/wt/%d", i), map[string]cleanDir{"": {}})
	}
	if len(m.dirs) != maxCleanMemo {
		t.Errorf("%d worktrees remembered, want %d", len(m.dirs), maxCleanMemo)
	}
	if m.dirs[fmt.Sprintf("/wt/%d", 3*maxCleanMemo-1)] == nil {
		t.Errorf("the last worktree cleaned is not remembered")
	}
}
