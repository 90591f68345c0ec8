package gitops

import (
	"context"
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

// DeleteBranches deletes many branches in one git process and one ref
// transaction (`git update-ref --stdin`): either all are deleted or none.
// Names that do not exist are ignored; an invalid name, or a branch checked
// out in a worktree, fails the whole call before git runs. Serialised per
// repository.
func (c *Client) DeleteBranches(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var in strings.Builder
	for _, n := range names {
		ref := branchRef(n)
		if !strings.HasPrefix(ref, "refs/heads/") || !validRefName(ref) {
			return fmt.Errorf("delete branches: invalid branch name %q", n)
		}
		in.WriteString("delete " + ref + "\n")
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	for _, n := range names {
		if wt, err := c.checkedOut("", branchRef(n)); err != nil {
			return fmt.Errorf("delete branches: %w", err)
		} else if wt != "" {
			return fmt.Errorf("delete branches: branch %s is checked out (git dir %s)", n, wt)
		}
	}
	if _, err := c.run(ctx, c.top, nil, strings.NewReader(in.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("delete %d branch(es): %w", len(names), err)
	}
	return nil
}
