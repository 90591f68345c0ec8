package gitops

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// countingClient returns a Client on dir whose git subcommands are counted.
func countingClient(t *testing.T, dir string, env []string) (*Client, func(sub string) int) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	cc := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		mu.Lock()
		for _, sub := range []string{"merge-tree", "commit-tree", "update-ref", "var", "clean"} {
			if slices.Contains(args, sub) {
				counts[sub]++
			}
		}
		mu.Unlock()
		return exec.CommandContext(ctx, name, args...)
	}
	c, err := New(dir, Options{Env: env, commandContext: cc})
	if err != nil {
		t.Fatal(err)
	}
	return c, func(sub string) int { mu.Lock(); defer mu.Unlock(); return counts[sub] }
}

// TestMergeTreeInProcessMatchesGit: an agent built on a tip that has moved
// since (another item merged meanwhile) is merged in-process when no path
// changed on both sides, and the tree is exactly `git merge-tree`'s; when a
// file changed on both sides git decides (a clean line merge, or a
// conflict), with the same answer as without the in-process path.
func TestMergeTreeInProcessMatchesGit(t *testing.T) {
	t.Parallel()
	base := map[string]string{"a.txt": "a\n", "b.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", "d/x.txt": "x\n", "c.sh": "echo\n", "keep/k.txt": "k\n"}
	for _, tc := range []struct {
		name          string
		other, agent  map[string]string // files written (content "" deletes)
		chmodAgent    string
		inProcess     bool
		wantConflict  bool
		otherRemovesD bool
	}{
		{name: "disjoint", other: map[string]string{"out/1.txt": "1\n", "a.txt": "A\n"}, otherRemovesD: true,
			agent: map[string]string{"out/2.txt": "2\n", "new/deep/f.txt": "f\n"}, chmodAgent: "c.sh", inProcess: true},
		{name: "same addition", other: map[string]string{"same.txt": "s\n", "out/1.txt": "1\n"},
			agent: map[string]string{"same.txt": "s\n", "out/2.txt": "2\n"}, inProcess: true},
		{name: "line merge", other: map[string]string{"b.txt": "one\n2\n3\n4\n5\n6\n7\n8\n"},
			agent: map[string]string{"b.txt": "1\n2\n3\n4\n5\n6\n7\neight\n"}},
		{name: "conflict", other: map[string]string{"a.txt": "other\n"}, agent: map[string]string{"a.txt": "agent\n"}, wantConflict: true},
		{name: "modify/delete", other: map[string]string{"keep/k.txt": "changed\n"}, agent: map[string]string{"keep/k.txt": ""}, wantConflict: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := newRepo(t, base, true)
			c, count := countingClient(t, dir, isolatedEnv())
			git(t, dir, "branch", "results")
			start := git(t, dir, "rev-parse", "results")
			scratch := filepath.Join(t.TempDir(), "scratch")
			git(t, dir, "worktree", "add", "-q", "-b", "other", scratch, start)
			apply := func(files map[string]string) {
				write := map[string]string{}
				for p, content := range files {
					if content == "" {
						git(t, scratch, "rm", "-q", p)
					} else {
						write[p] = content
					}
				}
				writeFiles(t, scratch, write)
			}
			apply(tc.other)
			if tc.otherRemovesD {
				git(t, scratch, "rm", "-q", "-r", "d")
			}
			commitFiles(t, scratch, "other", nil)
			if _, err := c.MergeTree(bg(), "results", "other", "merge other"); err != nil {
				t.Fatal(err)
			}
			old := git(t, dir, "rev-parse", "results")
			git(t, scratch, "checkout", "-q", "-b", "agent", start)
			apply(tc.agent)
			if tc.chmodAgent != "" {
				git(t, scratch, "update-index", "--chmod=+x", tc.chmodAgent)
			}
			agent := commitFiles(t, scratch, "agent", nil)
			mergeTrees := count("merge-tree")
			got, err := c.MergeTree(bg(), "results", "agent", "merge agent")
			var mc *MergeConflictError
			if tc.wantConflict {
				if !errors.As(err, &mc) {
					t.Fatalf("MergeTree = %v, want a conflict", err)
				}
				if now := git(t, dir, "rev-parse", "results"); now != old {
					t.Errorf("results moved on a conflict")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if used := count("merge-tree") - mergeTrees; (used == 0) != tc.inProcess {
				t.Errorf("git merge-tree ran %d times; in-process merge expected: %v", used, tc.inProcess)
			}
			want := git(t, dir, "merge-tree", "--write-tree", old, agent)
			if tree := git(t, dir, "rev-parse", got+"^{tree}"); tree != want {
				t.Errorf("merged tree %s, git merge-tree says %s\n%s", tree, want, git(t, dir, "diff", "--stat", want, tree))
			}
			if parents := git(t, dir, "rev-list", "--parents", "-n", "1", got); parents != fmt.Sprintf("%s %s %s", got, old, agent) {
				t.Errorf("parents = %q", parents)
			}
			git(t, dir, "fsck", "--no-dangling", "--strict")
		})
	}
}

// TestMergeCommitInProcessMatchesCommitTree: the merge commit written
// in-process is byte for byte what `git commit-tree` writes at the same
// second with the same identity, and the identity is asked for once.
func TestMergeCommitInProcessMatchesCommitTree(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	c, count := countingClient(t, dir, isolatedEnv())
	git(t, dir, "branch", "results")
	git(t, dir, "checkout", "-q", "-b", "agent")
	agent := commitFiles(t, dir, "agent", map[string]string{"n.txt": "n\n"})
	old := git(t, dir, "rev-parse", "results")
	tree := git(t, dir, "rev-parse", agent+"^{tree}")
	for _, msg := range []string{"Merge x (item \"é\")\n\nProdigy-Job: j\n", "no newline"} {
		commit, ok, err := c.writeMergeCommit(bg(), tree, old, agent, msg)
		if err != nil || !ok {
			t.Fatalf("writeMergeCommit = %v, %v", ok, err)
		}
		raw := git(t, dir, "cat-file", "commit", commit)
		date := regexp.MustCompile(`committer .*> (\d+ [-+]\d{4})`).FindStringSubmatch(raw)
		if date == nil {
			t.Fatalf("no committer date in\n%s", raw)
		}
		cmd := exec.Command("git", "-C", dir, "commit-tree", tree, "-p", old, "-p", agent, "-m", msg)
		cmd.Env = append(isolatedEnv(), "GIT_AUTHOR_DATE="+date[1], "GIT_COMMITTER_DATE="+date[1])
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if ref := string(out[:40]); ref != commit {
			t.Errorf("in-process commit %s differs from commit-tree's %s:\n%s\n---\n%s", commit, ref, raw, git(t, dir, "cat-file", "commit", ref))
		}
	}
	if n := count("var"); n != 1 {
		t.Errorf("git var ran %d times, want once", n)
	}
}

// TestMergeCommitFixedDateUsesGit: a fixed GIT_COMMITTER_DATE in the
// environment (or commit signing) leaves the commit to git.
func TestMergeCommitFixedDateUsesGit(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	c, count := countingClient(t, dir, append(isolatedEnv(), "GIT_COMMITTER_DATE=1600000000 +0000"))
	git(t, dir, "branch", "results")
	git(t, dir, "checkout", "-q", "-b", "agent")
	commitFiles(t, dir, "agent", map[string]string{"n.txt": "n\n"})
	got, err := c.MergeTree(bg(), "results", "agent", "m")
	if err != nil {
		t.Fatal(err)
	}
	if count("commit-tree") != 1 {
		t.Errorf("commit-tree ran %d times, want 1", count("commit-tree"))
	}
	if d := git(t, dir, "log", "-1", "--format=%cd", "--date=raw", got); d != "1600000000 +0000" {
		t.Errorf("committer date = %q", d)
	}
	dir2, _ := newRepo(t, nil, true)
	git(t, dir2, "config", "commit.gpgSign", "true")
	c2, _ := countingClient(t, dir2, isolatedEnv())
	if id, err := c2.commitIdentity(bg()); err != nil || id.usable {
		t.Errorf("with commit.gpgSign: identity usable = %v (%v), want git to sign", id.usable, err)
	}
}

// TestMergeTreeKeepsOneUpdateRefProcess: consecutive merges move the ref
// through one long-lived `git update-ref --stdin`; when a transaction fails
// (the ref moved underneath, git exits) the next merge starts a new one,
// and the reflog has an entry per merge.
func TestMergeTreeKeepsOneUpdateRefProcess(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	c, count := countingClient(t, dir, isolatedEnv())
	git(t, dir, "branch", "results")
	git(t, dir, "config", "core.logAllRefUpdates", "true")
	scratch := filepath.Join(t.TempDir(), "scratch")
	git(t, dir, "worktree", "add", "-q", "--detach", scratch, "results")
	branch := func(name string) {
		git(t, scratch, "checkout", "-q", "-B", name, "results")
		commitFiles(t, scratch, name, map[string]string{name + ".txt": name})
	}
	for i := range 3 {
		branch(fmt.Sprintf("b%d", i))
		if _, err := c.MergeTree(bg(), "results", fmt.Sprintf("b%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("update-ref"); n != 1 {
		t.Errorf("%d update-ref processes for 3 merges, want 1", n)
	}
	// A writer moves the ref before the next compare-and-swap: that
	// transaction fails, git exits, the merge is redone with a new process.
	branch("intruder")
	branch("b3")
	var once sync.Once
	c.beforeSwap = func() { once.Do(func() { git(t, dir, "update-ref", "refs/heads/results", "intruder") }) }
	got, err := c.MergeTree(bg(), "results", "b3", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := count("update-ref"); n != 2 {
		t.Errorf("%d update-ref processes, want 2 (one restart)", n)
	}
	if parents := git(t, dir, "rev-list", "--parents", "-n", "1", got); !strings.Contains(parents, git(t, dir, "rev-parse", "intruder")) {
		t.Errorf("merge not redone on the intruder's tip: %s", parents)
	}
	if log := git(t, dir, "reflog", "show", "--format=%gs", "results"); strings.Count(log, refMessage) != 4 {
		t.Errorf("reflog:\n%s\nwant 4 entries %q", log, refMessage)
	}
}
