package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// defaultMergeMessage is used when a merge is given an empty message.
func defaultMergeMessage(branch string) string {
	return fmt.Sprintf("Merge branch '%s'", branch)
}

// MergeNoFF merges branch into the branch checked out in the worktree dir
// with a merge commit (`git merge --no-ff`), and returns the new HEAD. If
// branch is already contained in HEAD nothing happens and HEAD is returned.
// Hooks, rerere, autostash, merge.log and the diffstat are turned off so the
// result depends only on the two commits. The merge commit gets
// [Client.IdentityEnv] when the repository has no identity.
//
// On conflict the merge is aborted (`git merge --abort`), leaving HEAD, index
// and files as they were, and a *[MergeConflictError] is returned. Any other
// failure (for example local changes in the way) is a *[GitError] from a
// merge git refused to start.
func (c *Client) MergeNoFF(ctx context.Context, dir, branch, message string) (string, error) {
	if message == "" {
		message = defaultMergeMessage(branch)
	}
	idEnv, err := c.IdentityEnv(ctx)
	if err != nil {
		return "", fmt.Errorf("merge %s in %s: %w", branch, dir, err)
	}
	out, mergeErr := c.run(ctx, dir, idEnv, nil, "-c", "rerere.enabled=false", "merge",
		"--no-ff", "--no-edit", "--no-verify", "--no-stat", "--no-log", "--no-autostash",
		"-m", message, "--end-of-options", branch)
	if mergeErr == nil {
		return c.Head(ctx, dir)
	}
	// Cleanup must run even if ctx is done, or dir stays mid-merge.
	bg := context.WithoutCancel(ctx)
	merging, err := c.mergeInProgress(bg, dir)
	if err != nil {
		return "", fmt.Errorf("merge %s in %s: %w", branch, dir, errors.Join(mergeErr, err))
	}
	if !merging {
		return "", fmt.Errorf("merge %s in %s: %w", branch, dir, mergeErr)
	}
	files, filesErr := c.run(bg, dir, nil, nil, "diff", "--name-only", "--diff-filter=U", "-z")
	if _, err := c.run(bg, dir, nil, nil, "merge", "--abort"); err != nil {
		return "", fmt.Errorf("merge %s in %s: abort after conflict: %w", branch, dir, errors.Join(mergeErr, err))
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("merge %s in %s: %w", branch, dir, mergeErr)
	}
	if filesErr != nil {
		return "", fmt.Errorf("merge %s in %s: list conflicts: %w", branch, dir, filesErr)
	}
	return "", &MergeConflictError{
		Branch: branch,
		Files:  sortedUnique(strings.Split(files, "\x00")),
		Detail: conflictLines(strings.Split(out, "\n")),
	}
}

// mergeInProgress reports whether dir has a MERGE_HEAD.
func (c *Client) mergeInProgress(ctx context.Context, dir string) (bool, error) {
	if s, ok := refStoreFor(dir); ok {
		_, err := os.Stat(filepath.Join(s.gitDir, "MERGE_HEAD"))
		return err == nil, nil
	}
	_, err := c.run(ctx, dir, nil, nil, "rev-parse", "--quiet", "--verify", "MERGE_HEAD")
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, err
	}
}

// MergeTree merges branch into targetRef without touching any working tree,
// and returns the new commit of targetRef. targetRef is a branch name or a
// full ref name. It runs `git merge-tree --write-tree` on the two commits;
// on conflict it returns a *[MergeConflictError] and changes nothing.
// Otherwise it writes the merge commit (`git commit-tree -p target -p
// branch`, identity as for [Client.MergeNoFF]) and moves targetRef with a
// compare-and-swap `git update-ref`; if targetRef moved meanwhile the error
// wraps [ErrRefChanged]. If branch is already contained in targetRef nothing
// happens and its commit is returned. The resulting tree is the one
// `git merge --no-ff` makes (both use the ort strategy). A worktree that has
// targetRef checked out is left stale: call [Client.SyncWorktree].
func (c *Client) MergeTree(ctx context.Context, targetRef, branch, message string) (string, error) {
	if message == "" {
		message = defaultMergeMessage(branch)
	}
	ref := branchRef(targetRef)
	old, err := c.ResolveRef(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
	}
	theirs, err := c.ResolveRef(ctx, branch)
	if err != nil {
		return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
	}
	if theirs == old {
		return old, nil
	}
	var tree string
	if t, ok := c.descendantTree(old, theirs); ok {
		// theirs is built on old (the tip has not moved since the agent
		// started): the merge's tree is theirs's tree, no merge needed.
		tree = t
	} else {
		out, err := c.run(ctx, c.top, nil, nil, "merge-tree", "--write-tree", "-z", "--name-only", old, theirs)
		if err != nil {
			if exitCode(err) == 1 {
				return "", parseMergeTreeConflict(branch, out)
			}
			return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
		}
		tree, _, _ = strings.Cut(out, "\x00")
		tree = strings.TrimSpace(tree)
		if merged, err := c.alreadyMerged(ctx, tree, old, theirs); err != nil {
			return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
		} else if merged {
			return old, nil
		}
	}
	idEnv, err := c.IdentityEnv(ctx)
	if err != nil {
		return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
	}
	out, err := c.run(ctx, c.top, idEnv, nil, "commit-tree", tree, "-p", old, "-p", theirs, "-m", message)
	if err != nil {
		return "", fmt.Errorf("merge %s into %s: commit: %w", branch, targetRef, err)
	}
	commit := strings.TrimSpace(out)
	if _, err := c.run(ctx, c.top, nil, nil, "update-ref", "-m", message, ref, commit, old); err != nil {
		if now, rerr := c.ResolveRef(ctx, ref); rerr == nil && now != old {
			return "", fmt.Errorf("merge %s into %s: %w (expected %s, found %s): %w", branch, targetRef, ErrRefChanged, old, now, err)
		}
		return "", fmt.Errorf("merge %s into %s: update ref: %w", branch, targetRef, err)
	}
	return commit, nil
}

// descendantTree returns theirs's tree when theirs descends from old
// through loose commits only (checked in-process); ok is false otherwise,
// and the caller runs a real merge.
func (c *Client) descendantTree(old, theirs string) (string, bool) {
	commits, ok := looseCommitsSince(c.commonDir, theirs, old)
	if !ok || len(commits) == 0 {
		return "", false
	}
	return looseCommitTree(c.commonDir, theirs)
}

// alreadyMerged reports whether theirs is an ancestor of old, given the
// merged tree. A merge with an ancestor yields old's own tree, so the
// ancestry check (one git process) only runs when the trees are equal; old's
// tree is read in-process when old is a loose object, which it is after a
// previous MergeTree.
func (c *Client) alreadyMerged(ctx context.Context, tree, old, theirs string) (bool, error) {
	oldTree, ok := looseCommitTree(c.commonDir, old)
	if !ok {
		t, err := c.TreeOf(ctx, old)
		if err != nil {
			return false, err
		}
		oldTree = t
	}
	if oldTree != tree {
		return false, nil
	}
	_, err := c.run(ctx, c.top, nil, nil, "merge-base", "--is-ancestor", theirs, old)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, err
	}
}

// parseMergeTreeConflict reads `git merge-tree --write-tree -z --name-only`
// output of a conflicted merge: tree NUL, paths NUL…, NUL, then messages as
// <count> NUL <paths…> NUL <type> NUL <text> NUL.
func parseMergeTreeConflict(branch, out string) *MergeConflictError {
	fields := strings.Split(out, "\x00")
	e := &MergeConflictError{Branch: branch}
	i := 1
	var files []string
	for ; i < len(fields) && fields[i] != ""; i++ {
		files = append(files, fields[i])
	}
	e.Files = sortedUnique(files)
	var msgs []string
	for i++; i < len(fields); {
		n, err := strconv.Atoi(fields[i])
		if err != nil || i+n+2 >= len(fields) {
			break
		}
		msgs = append(msgs, fields[i+n+2])
		i += n + 3
	}
	e.Detail = conflictLines(msgs)
	return e
}

// conflictLines keeps the lines that start with "CONFLICT", trimmed and
// joined with newlines.
func conflictLines(msgs []string) string {
	var out []string
	for _, m := range msgs {
		for _, l := range strings.Split(m, "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "CONFLICT") {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

func sortedUnique(s []string) []string {
	out := slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
