package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Worktree is one entry of `git worktree list`.
type Worktree struct {
	// Path is the absolute path of the work tree.
	Path string
	// Head is the commit checked out ("" for an unborn branch).
	Head string
	// Branch is the short branch name, "" if detached or bare.
	Branch string
	// Detached, Bare, Locked and Prunable mirror git's porcelain flags.
	Detached, Bare, Locked, Prunable bool
}

// WorktreeAdd creates a linked worktree at path on a new branch created at
// startPoint (`git worktree add --no-track -b branch path startPoint`). It
// fails if the branch or the path already exists. A relative path is taken
// relative to the process working directory. Serialised per repository.
func (c *Client) WorktreeAdd(ctx context.Context, path, branch, startPoint string) error {
	if !validRefName(branchRef(branch)) {
		return fmt.Errorf("add worktree %s: invalid branch name %q", path, branch)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	if err := closedDir(path); err != nil {
		return fmt.Errorf("add worktree %s: %w", path, err)
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "worktree", "add", "--quiet", "--no-track",
		"-b", branch, "--", path, startPoint); err != nil {
		return fmt.Errorf("add worktree %s on new branch %s: %w", path, branch, err)
	}
	return nil
}

// WorktreeAddDetached creates a linked worktree at path with commit checked
// out on a detached HEAD (`git worktree add --detach`), for example a pool
// slot that later switches branches ([Client.SwitchBranch]). Serialised per
// repository.
func (c *Client) WorktreeAddDetached(ctx context.Context, path, commit string) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	if err := closedDir(path); err != nil {
		return fmt.Errorf("add worktree %s: %w", path, err)
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "worktree", "add", "--quiet", "--detach", "--", path, commit); err != nil {
		return fmt.Errorf("add worktree %s at %s: %w", path, commit, err)
	}
	return nil
}

// WorktreeAddExisting creates a linked worktree at path that checks out the
// existing branch (used on resume). Serialised per repository.
func (c *Client) WorktreeAddExisting(ctx context.Context, path, branch string) error {
	if !validRefName(branchRef(branch)) {
		return fmt.Errorf("add worktree %s: invalid branch name %q", path, branch)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	if err := closedDir(path); err != nil {
		return fmt.Errorf("add worktree %s: %w", path, err)
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "worktree", "add", "--quiet", "--", path, branch); err != nil {
		return fmt.Errorf("add worktree %s on branch %s: %w", path, branch, err)
	}
	return nil
}

// WorktreeRemove removes the linked worktree at path, discarding any changes
// in it (`git worktree remove --force --force`, which also removes locked
// worktrees). If git does not know path as a worktree (already removed, or
// its directory was deleted), that is not an error. If the directory
// survives git, it is removed with os.RemoveAll and the stale administrative
// entry pruned; a directory that contains the repository, or that is a
// repository of its own (.git directory), is never deleted that way. The
// error, if any, says why the directory could not be deleted. Serialised per
// repository.
func (c *Client) WorktreeRemove(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", path, err)
	}
	c.forgetClean(abs)
	c.admin.Lock()
	defer c.admin.Unlock()
	_, gitErr := c.run(ctx, c.top, nil, nil, "worktree", "remove", "--force", "--force", "--", abs)
	if gitErr == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("remove worktree %s: %w", path, gitErr)
	}
	if _, statErr := os.Lstat(abs); errors.Is(statErr, os.ErrNotExist) {
		// Directory gone: drop the stale entry if git still lists it.
		if _, err := c.run(ctx, c.top, nil, nil, "worktree", "prune"); err != nil {
			return fmt.Errorf("remove worktree %s: prune: %w", path, err)
		}
		return nil
	}
	if err := c.checkDeletable(abs); err != nil {
		return fmt.Errorf("remove worktree %s: %w", path, errors.Join(gitErr, err))
	}
	if rmErr := removeAll(abs); rmErr != nil {
		return fmt.Errorf("remove worktree %s: %w", path, errors.Join(gitErr, rmErr))
	}
	if _, err := c.run(ctx, c.top, nil, nil, "worktree", "prune"); err != nil {
		return fmt.Errorf("remove worktree %s: prune: %w", path, err)
	}
	return nil
}

// checkDeletable refuses to delete, as a leftover worktree directory, a
// directory that holds this repository or any other repository's .git
// directory (linked worktrees have a .git file) — but a worktree of this
// repository handed to an agent ([Client.HandOut]) and never reclaimed.
func (c *Client) checkDeletable(abs string) error {
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs == c.commonDir || strings.HasPrefix(c.commonDir, abs+string(filepath.Separator)) {
		return fmt.Errorf("refusing to delete %s: it contains the repository", abs)
	}
	if fi, err := os.Lstat(filepath.Join(abs, ".git")); err == nil && fi.IsDir() && !c.handedOut(abs) {
		return fmt.Errorf("refusing to delete %s: it is a repository, not a linked worktree", abs)
	}
	return nil
}

// closedDir creates the directory a worktree is about to be added at, mode
// 0700 (its parents 0755), so no other user — another agent running as a
// user of its own — can list or read what git checks out there, from the
// first file on (git adds a worktree into an empty directory as it is; a
// slot is handed to its agent's user later, see [Client.HandOut]). An
// existing empty directory is closed too; anything else is left for git to
// refuse.
func closedDir(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(path, 0o700)
	if errors.Is(err, os.ErrExist) {
		if fi, serr := os.Lstat(path); serr == nil && fi.IsDir() {
			return os.Chmod(path, 0o700)
		}
		return nil
	}
	return err
}

// removeAll is os.RemoveAll, made writable first so read-only directories
// (chmod 0555) do not stop it.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// WorktreePrune removes administrative entries of worktrees whose
// directories no longer exist (`git worktree prune`). Serialised per
// repository.
func (c *Client) WorktreePrune(ctx context.Context) error {
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "worktree", "prune"); err != nil {
		return fmt.Errorf("prune worktrees: %w", err)
	}
	return nil
}

// Worktrees lists the repository's worktrees, the main one first
// (`git worktree list --porcelain -z`).
func (c *Client) Worktrees(ctx context.Context) ([]Worktree, error) {
	out, err := c.run(ctx, c.top, nil, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return parseWorktrees(out), nil
}

func parseWorktrees(out string) []Worktree {
	var list []Worktree
	var cur *Worktree
	for _, field := range strings.Split(out, "\x00") {
		key, val, _ := strings.Cut(field, " ")
		switch key {
		case "":
			cur = nil // an empty field ends a record
		case "worktree":
			list = append(list, Worktree{Path: val})
			cur = &list[len(list)-1]
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			if strings.Trim(val, "0") != "" {
				cur.Head = val
			}
		case "branch":
			cur.Branch = strings.TrimPrefix(val, "refs/heads/")
		case "detached":
			cur.Detached = true
		case "bare":
			cur.Bare = true
		case "locked":
			cur.Locked = true
		case "prunable":
			cur.Prunable = true
		}
	}
	return list
}

// ResetWorktree reuses an existing worktree dir for a new item: it checks out
// a new or reset branch at commit ([Client.SwitchBranch]), discarding local
// changes, then deletes every untracked and ignored file
// ([Client.CleanWorktree]). Only files that differ are rewritten, so this is
// much cheaper than removing and re-adding a worktree. Not serialised: it
// touches only dir and one branch ref.
func (c *Client) ResetWorktree(ctx context.Context, dir, branch, commit string) error {
	if err := c.SwitchBranch(ctx, dir, branch, commit); err != nil {
		return err
	}
	return c.CleanWorktree(ctx, dir)
}

// SwitchBranch checks out, in the worktree dir, branch created or reset at
// commit (`git checkout --force --no-track -B branch commit`), discarding
// changes to tracked files; untracked files stay (see
// [Client.CleanWorktree]). branch must not be checked out in another
// worktree: that is checked in-process before git runs, because git before
// 2.44 would silently reset it. Not serialised.
func (c *Client) SwitchBranch(ctx context.Context, dir, branch, commit string) error {
	if err := c.checkSwitchTo(dir, branch); err != nil {
		return err
	}
	if _, err := c.run(ctx, dir, nil, nil, "checkout", "--quiet", "--force", "--no-track", "-B", branch, commit, "--"); err != nil {
		return fmt.Errorf("switch worktree %s to %s on %s: %w", dir, commit, branch, err)
	}
	return nil
}

// AttachBranch puts the worktree dir on branch, created or reset at commit,
// without reading its files when it can: if dir's HEAD is detached at
// commit, `git switch --no-track -C branch` (no start point) writes only the
// branch and HEAD — no index refresh, no file is looked at, so it costs the
// same at 50,000 files as at 10. That is only right for a worktree known to
// be clean, such as a pool slot just checked out at commit and not yet used:
// unlike [Client.SwitchBranch] it discards nothing. When HEAD is elsewhere or
// attached to a branch it is [Client.SwitchBranch]. Not serialised.
func (c *Client) AttachBranch(ctx context.Context, dir, branch, commit string) error {
	if !c.detachedAt(dir, commit) {
		return c.SwitchBranch(ctx, dir, branch, commit)
	}
	if err := c.checkSwitchTo(dir, branch); err != nil {
		return err
	}
	if _, err := c.run(ctx, dir, nil, nil, "switch", "--quiet", "--no-track", "-C", branch); err != nil {
		return fmt.Errorf("switch worktree %s to %s on %s: %w", dir, commit, branch, err)
	}
	return nil
}

// checkSwitchTo refuses a branch name git would not accept, or a branch
// checked out in another worktree: git < 2.44 lets `checkout -B` and
// `switch -C` reset a branch checked out elsewhere (the user's main branch,
// say), so that is checked here, in-process, before git runs.
func (c *Client) checkSwitchTo(dir, branch string) error {
	if !validRefName(branchRef(branch)) {
		return fmt.Errorf("switch worktree %s: invalid branch name %q", dir, branch)
	}
	if other, err := c.checkedOutElsewhere(dir, branchRef(branch)); err != nil {
		return fmt.Errorf("switch worktree %s: %w", dir, err)
	} else if other != "" {
		return fmt.Errorf("switch worktree %s: branch %s is checked out in %s", dir, branch, other)
	}
	return nil
}

// detachedAt reports whether the worktree dir's HEAD is detached at commit,
// read in-process; false when it cannot tell.
func (c *Client) detachedAt(dir, commit string) bool {
	if c.objects == nil {
		return false
	}
	gitDir, ok := c.objects.ownGitDir(dir)
	if !ok {
		return false
	}
	if target, ok := c.objects.symbolicHEAD(gitDir); !ok || target != "" {
		return false
	}
	oid, found, ok := c.objects.resolve(gitDir, "HEAD")
	return ok && found && oid == commit
}

// CleanWorktree deletes every untracked and ignored file in the worktree
// dir, nested repositories included, as `git clean -ffdx` does. It does so
// in-process, listing only the directories that changed since its last
// clean of dir; git runs only when that cannot vouch for the result (see
// cleanskip.go).
func (c *Client) CleanWorktree(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("clean worktree %s: %w", dir, err)
	}
	if c.cleanInProcess(dir) {
		return nil
	}
	if _, err := c.run(ctx, dir, nil, nil, "clean", "-ffdxq"); err != nil {
		return fmt.Errorf("clean worktree %s: %w", dir, err)
	}
	return nil
}

// ResetHard moves the branch checked out in dir to commit and makes index
// and files match it (`git reset --hard`); untracked files stay.
func (c *Client) ResetHard(ctx context.Context, dir, commit string) error {
	if commit == "" || strings.HasPrefix(commit, "-") {
		return fmt.Errorf("reset %s: invalid commit %q", dir, commit)
	}
	if _, err := c.run(ctx, dir, nil, nil, "reset", "--quiet", "--hard", commit, "--"); err != nil {
		return fmt.Errorf("reset %s to %s: %w", dir, commit, err)
	}
	return nil
}

// checkedOutElsewhere returns the git dir of a worktree other than dir's
// whose HEAD is ref, or "". It reads the HEAD files in-process.
func (c *Client) checkedOutElsewhere(dir, ref string) (string, error) {
	own, ok := worktreeGitDir(dir)
	if !ok {
		return "", fmt.Errorf("%s is not the top of a worktree", dir)
	}
	return c.checkedOut(own, ref)
}

// checkedOut returns the git dir of a worktree, other than the one with git
// dir except, whose HEAD is the symbolic ref ref, or "".
func (c *Client) checkedOut(except, ref string) (string, error) {
	gitDirs := []string{c.commonDir}
	entries, err := os.ReadDir(filepath.Join(c.commonDir, "worktrees"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for _, e := range entries {
		gitDirs = append(gitDirs, filepath.Join(c.commonDir, "worktrees", e.Name()))
	}
	for _, gd := range gitDirs {
		if gd == except {
			continue
		}
		b, err := os.ReadFile(filepath.Join(gd, "HEAD"))
		if err != nil {
			continue // a half-created or pruned entry
		}
		if strings.TrimSpace(string(b)) == "ref: "+ref {
			return gd, nil
		}
	}
	return "", nil
}

// SyncWorktree brings dir's index and files up to the commit its HEAD now
// names, after [Client.MergeTree] moved the checked-out branch underneath
// it. It is a two-tree `git read-tree -m -u <index tree> HEAD`: only paths
// that changed are rewritten, and local modifications of other paths are
// kept. It fails, changing nothing, if a path it must update has unstaged
// changes or an untracked file is in the way; staged-but-uncommitted changes
// are treated as part of the old state and may be replaced, so keep the
// index clean between merges. A dir already in sync is left as is, and so
// is a linked worktree that was never checked out
// ([Client.WorktreeAddNoCheckout]: it has no index yet).
func (c *Client) SyncWorktree(ctx context.Context, dir string) error {
	if gd, ok := worktreeGitDir(dir); ok && filepath.Dir(gd) == filepath.Join(c.commonDir, "worktrees") {
		if _, err := os.Stat(filepath.Join(gd, "index")); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	out, err := c.run(ctx, dir, nil, nil, "write-tree")
	if err != nil {
		return fmt.Errorf("sync worktree %s: read index: %w", dir, err)
	}
	indexTree := strings.TrimSpace(out)
	if _, err := c.run(ctx, dir, nil, nil, "read-tree", "-m", "-u", indexTree, "HEAD"); err != nil {
		return fmt.Errorf("sync worktree %s to HEAD: %w", dir, err)
	}
	return nil
}
