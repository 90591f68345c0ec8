package gitops

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DeleteBranch deletes refs/heads/<name> whatever it points to (like
// `git branch -D`); a branch that does not exist is not an error. Like git,
// it refuses to delete a branch checked out in any worktree: remove or reset
// that worktree first. Serialised per repository.
func (c *Client) DeleteBranch(ctx context.Context, name string) error {
	return c.DeleteBranches(ctx, []string{name})
}

// ErrBranchCheckedOut reports a branch that was not deleted because a
// worktree has it checked out.
var ErrBranchCheckedOut = errors.New("branch is checked out in a worktree")

// DeleteBranches deletes many branches in one git process and one ref
// transaction (`git update-ref --stdin`). Names that do not exist are
// ignored; an invalid name fails the whole call before git runs. Branches
// checked out in a worktree are kept (like `git branch -D`), the others are
// deleted, and the error wraps [ErrBranchCheckedOut] and names the kept ones.
// Serialised per repository.
func (c *Client) DeleteBranches(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if ref := branchRef(n); !strings.HasPrefix(ref, "refs/heads/") || !validRefName(ref) {
			return fmt.Errorf("delete branches: invalid branch name %q", n)
		}
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	var in strings.Builder
	var kept []string
	for _, n := range names {
		ref := branchRef(n)
		wt, err := c.checkedOut("", ref)
		if err != nil {
			return fmt.Errorf("delete branches: %w", err)
		}
		if wt != "" {
			kept = append(kept, fmt.Sprintf("%s (in %s)", n, wt))
			continue
		}
		in.WriteString("delete " + ref + "\n")
	}
	if in.Len() > 0 {
		if _, err := c.run(ctx, c.top, nil, strings.NewReader(in.String()), "update-ref", "--stdin"); err != nil {
			return fmt.Errorf("delete %d branch(es): %w", len(names)-len(kept), err)
		}
	}
	if len(kept) > 0 {
		return fmt.Errorf("delete branches: kept %s: %w", strings.Join(kept, ", "), ErrBranchCheckedOut)
	}
	return nil
}

// CreateBranch creates refs/heads/<name> at the commit startPoint names (any
// revision [Client.ResolveRef] accepts). It fails if the branch exists.
func (c *Client) CreateBranch(ctx context.Context, name, startPoint string) error {
	ref := branchRef(name)
	if !strings.HasPrefix(ref, "refs/heads/") || !validRefName(ref) || strings.HasPrefix(name, "-") {
		return fmt.Errorf("create branch: invalid branch name %q", name)
	}
	oid, err := c.ResolveRef(ctx, startPoint)
	if err != nil {
		return fmt.Errorf("create branch %s: %w", name, err)
	}
	// The all-zero old value makes update-ref fail if the ref exists.
	if _, err := c.run(ctx, c.top, nil, nil, "update-ref", "-m", "branch: Created from "+startPoint,
		ref, oid, strings.Repeat("0", len(oid))); err != nil {
		return fmt.Errorf("create branch %s at %s: %w", name, startPoint, err)
	}
	return nil
}

// ResetBranch points refs/heads/<name> at the commit startPoint names,
// creating the branch or moving it wherever it was (`git branch --force`).
// A branch checked out in a worktree is moved too; its worktree is not
// touched (reset it with [Client.ResetHard]).
func (c *Client) ResetBranch(ctx context.Context, name, startPoint string) error {
	ref := branchRef(name)
	if !strings.HasPrefix(ref, "refs/heads/") || !validRefName(ref) || strings.HasPrefix(name, "-") {
		return fmt.Errorf("reset branch: invalid branch name %q", name)
	}
	oid, err := c.ResolveRef(ctx, startPoint)
	if err != nil {
		return fmt.Errorf("reset branch %s: %w", name, err)
	}
	if _, err := c.run(ctx, c.top, nil, nil, "update-ref", "-m", "branch: Reset to "+startPoint, ref, oid); err != nil {
		return fmt.Errorf("reset branch %s to %s: %w", name, startPoint, err)
	}
	return nil
}
