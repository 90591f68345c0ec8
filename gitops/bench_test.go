package gitops

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchFiles is the size of the benchmark repository (brief: ~2000 files).
const benchFiles = 2000

// benchRepo builds a repository of benchFiles files of ~1 KiB in 40
// directories and returns it with a Client.
func benchRepo(b testing.TB) (string, *Client) {
	b.Helper()
	files := make(map[string]string, benchFiles)
	line := strings.Repeat("x", 60) + "\n"
	for i := range benchFiles {
		files[fmt.Sprintf("pkg%02d/file%04d.txt", i%40, i)] = fmt.Sprintf("file %d\n%s", i, strings.Repeat(line, 16))
	}
	return newRepo(b, files, true)
}

// makeBranches creates n branches <prefix>-<i> from base, each with one
// commit adding agents/<prefix>-<i>.txt, in one git fast-import process.
func makeBranches(b *testing.B, repo, base, prefix string, n int) []string {
	b.Helper()
	var in strings.Builder
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		content := fmt.Sprintf("agent %d output\n", i)
		fmt.Fprintf(&in, "commit refs/heads/%s\ncommitter A <a@example.com> 1700000000 +0000\ndata 5\nagent\nfrom %s\n"+
			"M 100644 inline agents/%s.txt\ndata %d\n%s\n", names[i], base, names[i], len(content), content)
	}
	gitIn(b, repo, in.String(), "fast-import", "--quiet")
	return names
}

// BenchmarkMerge compares merging one agent branch (one new file) into a
// results branch: `git merge --no-ff` in a worktree vs merge-tree +
// commit-tree + update-ref, and the latter followed by SyncWorktree every
// time (its worst case; the engine syncs once before reduce).
func BenchmarkMerge(b *testing.B) {
	repo, c := benchRepo(b)
	base := git(b, repo, "rev-parse", "HEAD")
	parent := filepath.Join(b.TempDir(), "parent")
	if err := c.WorktreeAdd(bg(), parent, "results-noff", base); err != nil {
		b.Fatal(err)
	}
	syncWT := filepath.Join(b.TempDir(), "synced")
	if err := c.WorktreeAdd(bg(), syncWT, "results-sync", base); err != nil {
		b.Fatal(err)
	}
	git(b, repo, "branch", "results-tree", base)
	round := 0
	run := func(name string, merge func(branch string) error) {
		b.Run(name, func(b *testing.B) {
			round++
			names := makeBranches(b, repo, base, fmt.Sprintf("m%d", round), b.N)
			b.ResetTimer()
			for i := range b.N {
				if err := merge(names[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("noff_worktree", func(br string) error {
		_, err := c.MergeNoFF(bg(), parent, br, "")
		return err
	})
	run("tree", func(br string) error {
		_, err := c.MergeTree(bg(), "results-tree", br, "")
		return err
	})
	run("tree_sync_each", func(br string) error {
		if _, err := c.MergeTree(bg(), "results-sync", br, ""); err != nil {
			return err
		}
		return c.SyncWorktree(bg(), syncWT)
	})
}

// BenchmarkWorktree compares preparing an agent worktree for an item: a
// fresh `git worktree add -b` (and, for the full fresh-per-item cycle, its
// removal and branch deletion) vs resetting a pooled worktree to a new
// branch at the parent's latest commit.
func BenchmarkWorktree(b *testing.B) {
	repo, c := benchRepo(b)
	base := git(b, repo, "rev-parse", "HEAD")
	root := b.TempDir()
	round := 0
	b.Run("add_only", func(b *testing.B) {
		round++
		for i := range b.N {
			wt := filepath.Join(root, fmt.Sprintf("a%d-%d", round, i))
			br := fmt.Sprintf("a%d-%d", round, i)
			if err := c.WorktreeAdd(bg(), wt, br, base); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := c.WorktreeRemove(bg(), wt); err != nil {
				b.Fatal(err)
			}
			if err := c.DeleteBranch(bg(), br); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("add_remove_delete", func(b *testing.B) {
		round++
		for i := range b.N {
			wt := filepath.Join(root, fmt.Sprintf("f%d-%d", round, i))
			br := fmt.Sprintf("f%d-%d", round, i)
			if err := c.WorktreeAdd(bg(), wt, br, base); err != nil {
				b.Fatal(err)
			}
			if err := c.WorktreeRemove(bg(), wt); err != nil {
				b.Fatal(err)
			}
			if err := c.DeleteBranch(bg(), br); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reset_pool", func(b *testing.B) {
		round++
		// Successive parent commits, each adding one file, as merges would.
		commits := []string{base}
		for _, br := range makeBranches(b, repo, base, fmt.Sprintf("r%d", round), 2) {
			commits = append(commits, git(b, repo, "rev-parse", br))
		}
		pool := filepath.Join(root, fmt.Sprintf("pool%d", round))
		if err := c.WorktreeAdd(bg(), pool, fmt.Sprintf("pool%d", round), base); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			// The previous item left an untracked file behind.
			if err := os.WriteFile(filepath.Join(pool, "leftover.txt"), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			br := fmt.Sprintf("p%d-%d", round, i)
			if err := c.ResetWorktree(bg(), pool, br, commits[i%len(commits)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAgentHandOut measures what giving an agent its own repository
// costs per attempt on the benchmark repository: hand-out and reclaim of a
// worktree whose agent made no commit, and of one whose agent committed a
// file (the commit itself, the agent's work, is outside the timer), next
// to the pool's reset of the slot (ResetWorktree), which every attempt
// pays anyway.
func BenchmarkAgentHandOut(b *testing.B) {
	repo, c := benchRepo(b)
	base := git(b, repo, "rev-parse", "HEAD")
	slot := filepath.Join(b.TempDir(), "slot")
	if err := c.WorktreeAdd(bg(), slot, "bench-item", base); err != nil {
		b.Fatal(err)
	}
	b.Run("reset", func(b *testing.B) {
		for i := range b.N {
			if err := c.ResetWorktree(bg(), slot, fmt.Sprintf("bench-reset-%d", i%2), base); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, commit := range []bool{false, true} {
		b.Run(fmt.Sprintf("commit=%v", commit), func(b *testing.B) {
			for i := range b.N {
				b.StopTimer()
				if err := c.ResetWorktree(bg(), slot, "bench-item", base); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				a, err := c.HandOut(bg(), slot, nil)
				if err != nil {
					b.Fatal(err)
				}
				if commit {
					b.StopTimer()
					commitFiles(b, slot, "agent", map[string]string{fmt.Sprintf("agents/a%d.txt", i): "x\n"})
					b.StartTimer()
				}
				if _, err := a.Reclaim(bg()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
