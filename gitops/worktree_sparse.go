package gitops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// CheckoutOptions says what a worktree made by [Client.WorktreeCreate]
// checks out.
type CheckoutOptions struct {
	// Sparse, when not empty, makes the worktree a cone-mode sparse
	// checkout with a sparse index (`git sparse-checkout set --cone
	// --sparse-index`): only these directories, and the files at the top
	// level, are written. Entries are directories relative to the top
	// level, "/"-separated (see [CleanSparse]). Commits, merges and the
	// branches they move still hold whole trees: files outside the cone
	// are simply not in the working tree.
	//
	// When Sparse is empty the worktree checks out everything — unless the
	// worktree the Client was opened on is itself a sparse checkout: `git
	// worktree add` copies its sparse-checkout settings and patterns to
	// the new worktree (git ≥ 2.36), see [Client.IsSparse].
	Sparse []string
	// UntrackedCache turns on the untracked cache of the new worktree's
	// index (`git update-index --untracked-cache`), so `git status` in it
	// only rereads directories whose mtime changed.
	UntrackedCache bool
}

// CleanSparse validates and normalises sparse directories: each must be a
// relative, "/"-separated path without "." or ".." elements, glob
// characters, backslashes or control characters; a trailing "/" is
// dropped, duplicates are removed, order is kept. An empty list stays
// empty.
func CleanSparse(dirs []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		orig := d
		d = strings.TrimSuffix(d, "/")
		switch {
		case d == "" || d == ".":
			return nil, fmt.Errorf("sparse directory %q: name a directory of the repository (the whole tree is the default)", orig)
		case strings.HasPrefix(d, "/") || filepath.IsAbs(d):
			return nil, fmt.Errorf("sparse directory %q: must be relative to the repository's top level", orig)
		case strings.ContainsAny(d, "*?[]\\!"):
			return nil, fmt.Errorf("sparse directory %q: cone mode takes directory names, not patterns", orig)
		case strings.IndexFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return nil, fmt.Errorf("sparse directory %q: control characters are not allowed", orig)
		case path.Clean(d) != d:
			return nil, fmt.Errorf("sparse directory %q: not a clean path (use %q)", orig, path.Clean(d))
		}
		for el := range strings.SplitSeq(d, "/") {
			if el == ".." || el == "." || el == ".git" {
				return nil, fmt.Errorf("sparse directory %q: %q is not allowed", orig, el)
			}
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out, nil
}

// WorktreeCreate creates a linked worktree at path with commit checked
// out, on a new branch created at commit (or on a detached HEAD if branch
// is ""), shaped by o: [Client.WorktreeAddNoCheckout] then
// [Client.WorktreePopulate].
//
// Only the administrative step, `git worktree add --no-checkout`, is
// serialised per repository (git 2.39's worktree commands race with each
// other); the sparse-checkout setup and the checkout itself (`git reset
// --hard`, which writes only the paths the sparse patterns keep) run
// outside that lock, so several worktrees can be populated concurrently.
// If a step after the first fails, the half-made worktree is removed (the
// branch, if one was created, stays for the caller to delete).
func (c *Client) WorktreeCreate(ctx context.Context, path, branch, commit string, o CheckoutOptions) error {
	if _, err := CleanSparse(o.Sparse); err != nil {
		return fmt.Errorf("add worktree %s: %w", path, err)
	}
	if err := c.WorktreeAddNoCheckout(ctx, path, branch, commit); err != nil {
		return err
	}
	return c.WorktreePopulate(ctx, path, o)
}

// WorktreeAddNoCheckout is the administrative half of
// [Client.WorktreeCreate]: `git worktree add --no-checkout` at path, on a
// new branch at commit or detached at commit when branch is "". The
// directory holds only its .git file (the index is empty) until
// [Client.WorktreePopulate] runs. Serialised per repository, and quick.
func (c *Client) WorktreeAddNoCheckout(ctx context.Context, path, branch, commit string) error {
	if branch != "" && !validRefName(branchRef(branch)) {
		return fmt.Errorf("add worktree %s: invalid branch name %q", path, branch)
	}
	if commit == "" || strings.HasPrefix(commit, "-") {
		return fmt.Errorf("add worktree %s: invalid commit %q", path, commit)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	args := []string{"worktree", "add", "--quiet", "--no-checkout"}
	if branch != "" {
		args = append(args, "--no-track", "-b", branch)
	} else {
		args = append(args, "--detach")
	}
	args = append(args, "--", abs, commit)
	if err := closedDir(abs); err != nil {
		return fmt.Errorf("add worktree %s: %w", path, err)
	}
	c.admin.Lock()
	_, err = c.run(ctx, c.top, nil, nil, args...)
	c.admin.Unlock()
	if err != nil {
		return fmt.Errorf("add worktree %s at %s: %w", path, commit, err)
	}
	return nil
}

// WorktreePopulate is the checkout half of [Client.WorktreeCreate], for a
// worktree made by [Client.WorktreeAddNoCheckout]: sparse-checkout setup
// (o.Sparse), `git reset --hard HEAD`, the untracked cache
// (o.UntrackedCache). Not serialised: worktrees can be populated
// concurrently. On failure the worktree is removed.
func (c *Client) WorktreePopulate(ctx context.Context, path string, o CheckoutOptions) error {
	sparse, err := CleanSparse(o.Sparse)
	if err == nil {
		var abs string
		if abs, err = filepath.Abs(path); err == nil {
			err = c.populate(ctx, abs, sparse, o.UntrackedCache)
		}
	}
	if err != nil {
		if rmErr := c.WorktreeRemove(context.WithoutCancel(ctx), path); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		return fmt.Errorf("check out worktree %s: %w", path, err)
	}
	return nil
}

// populate sets up sparse checkout and the untracked cache in the fresh
// --no-checkout worktree dir and checks out its HEAD.
func (c *Client) populate(ctx context.Context, dir string, sparse []string, untrackedCache bool) error {
	if len(sparse) > 0 {
		in := strings.NewReader(strings.Join(sparse, "\n") + "\n")
		if _, err := c.run(ctx, dir, nil, in, "sparse-checkout", "set", "--cone", "--sparse-index", "--stdin"); err != nil {
			return fmt.Errorf("sparse-checkout set: %w", err)
		}
	}
	if _, err := c.run(ctx, dir, nil, nil, "reset", "--quiet", "--hard", "HEAD", "--"); err != nil {
		return fmt.Errorf("check out: %w", err)
	}
	if untrackedCache {
		if _, err := c.run(ctx, dir, nil, nil, "update-index", "--untracked-cache"); err != nil {
			return fmt.Errorf("enable the untracked cache: %w", err)
		}
	}
	return nil
}

// IsSparse reports whether the worktree the Client was opened on is a
// sparse checkout (core.sparseCheckout, from its config or config.worktree).
// New worktrees made from it inherit its sparse patterns unless
// [CheckoutOptions.Sparse] replaces them.
func (c *Client) IsSparse(ctx context.Context) (bool, error) {
	out, err := c.run(ctx, c.top, nil, nil, "config", "--type=bool", "--get", "core.sparseCheckout")
	if err != nil {
		if exitCode(err) == 1 { // not set
			return false, nil
		}
		return false, fmt.Errorf("read core.sparseCheckout: %w", err)
	}
	return strings.TrimSpace(out) == "true", nil
}
