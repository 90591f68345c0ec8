package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// CleanOrphans removes the worktrees (and their branches) of an orphan
// registry, runs `git worktree prune`, and rewrites the registry with what
// could still not be removed (deleting it when empty). It returns the
// paths removed and the failures by path.
func CleanOrphans(ctx context.Context, set OrphanSet) (removed []string, failed map[string]error, err error) {
	failed = map[string]error{}
	var git *gitops.Client
	if set.RepoDir != "" {
		git, _ = gitops.New(set.RepoDir, gitops.Options{})
	}
	var left []OrphanedWorktree
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

func removeOrphan(ctx context.Context, git *gitops.Client, o OrphanedWorktree) error {
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
