package worktreecmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// opener opens the git checkout or worktree containing dir
// (cmdutil.Factory.OpenRepo: the engine's git options).
type opener func(dir string) (*gitops.Client, error)

// findLeftovers finds worktrees under home/worktrees that no running or
// resumable job needs: those of jobs whose state is gone (discarded,
// purged) and those left after a job completed (a preserved failed
// worktree, a parent whose removal failed). Worktrees of failed or
// interrupted jobs are kept for `resume`. Each set names the job and the
// repository the worktrees belong to (asked of git through open when the
// job's orphan registry does not say), so cleanOrphans removes them (and
// their agent branches). jobID != "" limits the search to that job.
func findLeftovers(ctx context.Context, open opener, home, jobID string) ([]jobstore.OrphanSet, error) {
	roots, err := filepath.Glob(filepath.Join(home, "worktrees", "*", "*"))
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var out []jobstore.OrphanSet
	for _, root := range roots {
		p := jobstore.Paths{Home: home, Repo: filepath.Base(filepath.Dir(root)), JobID: filepath.Base(root)}
		if jobID != "" && p.JobID != jobID {
			continue
		}
		why := "its job no longer exists"
		if cp, err := jobstore.LoadSummary(p); err == nil {
			if cp.Status != jobstore.StatusCompleted || jobstore.Locked(p) {
				continue
			}
			why = "its job completed"
		} else if jobstore.Locked(p) || dirExists(p.JobStateDir()) {
			continue // a job starting, or state we cannot read: leave it alone
		}
		set := jobstore.OrphanSet{File: p.Orphans(), OrphanFile: jobstore.OrphanFile{JobID: p.JobID, Repo: p.Repo}}
		if f, err := jobstore.LoadOrphans(p.Orphans()); err == nil {
			set.Worktrees = f.Worktrees
			set.RepoDir = f.RepoDir
		}
		known := map[string]bool{}
		for _, w := range set.Worktrees {
			known[w.Path] = true
		}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			path := filepath.Join(root, e.Name())
			if !e.IsDir() || known[path] {
				continue
			}
			w := jobstore.OrphanedWorktree{Path: path, AgentID: e.Name(), Error: "left over: " + why}
			if git, err := open(path); err == nil {
				if set.RepoDir == "" {
					set.RepoDir = filepath.Dir(git.CommonDir())
				}
				if b, err := git.CurrentBranch(ctx, path); err == nil && strings.HasPrefix(b, "prodigy-agent/") {
					w.Branch = b
				}
			}
			set.Worktrees = append(set.Worktrees, w)
		}
		if len(set.Worktrees) > 0 {
			out = append(out, set)
		}
	}
	return out, nil
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// cleanOrphans removes the worktrees (and their branches) of an orphan
// registry, runs `git worktree prune` in its repository (opened with open;
// without a repository the worktrees' files are removed), and rewrites the
// registry with what could still not be removed (deleting it when empty).
// It returns the paths removed and the failures by path.
func cleanOrphans(ctx context.Context, open opener, set jobstore.OrphanSet) (removed []string, failed map[string]error, err error) {
	failed = map[string]error{}
	var git *gitops.Client
	if set.RepoDir != "" {
		git, _ = open(set.RepoDir)
	}
	var left []jobstore.OrphanedWorktree
	for _, o := range set.Worktrees {
		if err := removeOrphan(ctx, git, o); err != nil {
			failed[o.Path] = err
			left = append(left, o)
			continue
		}
		removed = append(removed, o.Path)
	}
	if git != nil {
		_ = git.WorktreePrune(ctx)
	}
	set.Worktrees = left
	if err := jobstore.SaveOrphans(set.File, set.OrphanFile); err != nil {
		return removed, failed, fmt.Errorf("update %s: %w", set.File, err)
	}
	return removed, failed, nil
}

func removeOrphan(ctx context.Context, git *gitops.Client, o jobstore.OrphanedWorktree) error {
	if _, err := os.Stat(o.Path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var err error
	if git != nil {
		err = git.WorktreeRemove(ctx, o.Path)
	} else {
		err = os.RemoveAll(o.Path)
	}
	if err != nil {
		return err
	}
	if git != nil && o.Branch != "" {
		if err := git.DeleteBranch(ctx, o.Branch); err != nil {
			return fmt.Errorf("worktree removed but branch %s remains: %w", o.Branch, err)
		}
	}
	return nil
}
