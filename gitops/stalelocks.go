package gitops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RemoveStaleLocks removes the lock files a git process killed mid-write
// left behind (git never removes them itself: "Another git process seems to
// be running in this repository"): index.lock and HEAD.lock in the
// administrative directory of each of worktrees, and <ref>.lock in the
// common git directory for each ref and for every ref under each of
// prefixes (e.g. "refs/heads/prodigy-agent/<job>/"). Only locks last
// written before before are removed: the caller passes the moment it knew
// no git process of its own could still hold them (e.g. when it took the
// job's lock after ending an earlier run's processes), so a lock a live
// process takes later is left alone. It returns the paths removed. The
// user's own worktree is never named by callers, so its locks are never
// touched.
func (c *Client) RemoveStaleLocks(worktrees, refs, prefixes []string, before time.Time) ([]string, error) {
	var candidates []string
	for _, wt := range worktrees {
		gitDir, ok := worktreeGitDir(wt)
		if !ok || gitDir == c.commonDir {
			continue // not a linked worktree (the main one is the user's)
		}
		candidates = append(candidates, filepath.Join(gitDir, "index.lock"), filepath.Join(gitDir, "HEAD.lock"))
	}
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
			return nil, fmt.Errorf("remove stale locks: invalid ref %q", ref)
		}
		candidates = append(candidates, filepath.Join(c.commonDir, filepath.FromSlash(ref)+".lock"))
	}
	for _, prefix := range prefixes {
		if !strings.HasPrefix(prefix, "refs/") || strings.Contains(prefix, "..") {
			return nil, fmt.Errorf("remove stale locks: invalid ref prefix %q", prefix)
		}
		root := filepath.Join(c.commonDir, filepath.FromSlash(prefix))
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
				candidates = append(candidates, p)
			}
			return nil
		})
	}
	var removed []string
	var errs []error
	for _, p := range candidates {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(before) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale lock: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
