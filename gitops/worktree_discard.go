package gitops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WorktreeDiscard removes the linked worktree at path like
// [Client.WorktreeRemove], discarding every change in it, but deletes its
// files outside the per-repository lock: only the final `git worktree
// prune` of its administrative entry is serialised, so several worktrees
// can be discarded concurrently (at the end of a job, say). It does so only
// when path's .git file names an administrative directory of this
// repository (commonDir/worktrees/…); anything else, including a locked
// worktree, goes through [Client.WorktreeRemove]. A path that no longer
// exists is not an error.
func (c *Client) WorktreeDiscard(ctx context.Context, path string) error {
	_, err := c.dropWorktree(ctx, path, "")
	return err
}

// dropWorktree is WorktreeDiscard when to is "", and WorktreeDetach
// otherwise: the files are renamed to to instead of deleted (deleted in
// place if the rename fails); moved says whether they were.
func (c *Client) dropWorktree(ctx context.Context, path, to string) (moved bool, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, fmt.Errorf("remove worktree %s: %w", path, err)
	}
	admin, ok := c.linkedAdminDir(abs)
	if !ok {
		return false, c.WorktreeRemove(ctx, abs)
	}
	if _, err := os.Stat(filepath.Join(admin, "locked")); err == nil {
		return false, c.WorktreeRemove(ctx, abs)
	}
	if err := c.checkDeletable(abs); err != nil {
		return false, fmt.Errorf("remove worktree %s: %w", path, err)
	}
	if to != "" {
		// Something already at to (planted, or left over) is never
		// replaced or followed: the files are then deleted in place.
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			moved = os.Rename(abs, to) == nil
		}
	}
	if !moved {
		if err := removeAll(abs); err != nil {
			return false, fmt.Errorf("remove worktree %s: %w", path, err)
		}
	}
	if err := c.WorktreePrune(ctx); err != nil {
		return moved, fmt.Errorf("remove worktree %s: %w", path, err)
	}
	return moved, nil
}

// linkedAdminDir returns the administrative directory named by the .git
// file of the worktree at abs, if it is one of this repository's
// (commonDir/worktrees/<name>) and points back at abs.
func (c *Client) linkedAdminDir(abs string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(abs, ".git"))
	if err != nil {
		return "", false
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(abs, gd)
	}
	gd = filepath.Clean(gd)
	if filepath.Dir(gd) != filepath.Join(c.commonDir, "worktrees") {
		return "", false
	}
	back, err := os.ReadFile(filepath.Join(gd, "gitdir"))
	if err != nil {
		return "", false
	}
	want := filepath.Join(abs, ".git")
	got := filepath.Clean(strings.TrimSpace(string(back)))
	if got != want {
		if r1, e1 := filepath.EvalSymlinks(got); e1 == nil {
			if r2, e2 := filepath.EvalSymlinks(want); e2 != nil || r1 != r2 {
				return "", false
			}
		} else {
			return "", false
		}
	}
	return gd, true
}

// WorktreeDetach unlinks the linked worktree at path from the repository
// without deleting its files yet: the directory is moved (one rename) to
// to, on the same file system, and its administrative entry is pruned, so
// `git worktree list` no longer shows it and the branch it had checked out
// is free. The caller deletes to later, with [RemoveDetached]. When
// [Client.WorktreeDiscard] would go through git (a locked worktree, or one
// that is not this repository's), anything already exists at to (it is
// never replaced or followed), or the rename fails, the files are deleted
// in place as WorktreeDiscard does and
// moved is false (nothing is left to delete). A path that no longer exists
// is not an error.
func (c *Client) WorktreeDetach(ctx context.Context, path, to string) (moved bool, err error) {
	return c.dropWorktree(ctx, path, to)
}

// RemoveDetached deletes a directory [Client.WorktreeDetach] moved aside,
// read-only files and directories included.
func RemoveDetached(dir string) error {
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("remove detached worktree %s: %w", dir, err)
	}
	return nil
}
