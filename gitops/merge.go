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
	"sync"
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
	if gitDir, ok := worktreeGitDir(dir); ok {
		_, err := os.Stat(filepath.Join(gitDir, "MERGE_HEAD"))
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
// full ref name. On conflict it returns a *[MergeConflictError] and changes
// nothing. Otherwise it writes the merge commit (parents target and branch,
// identity as for [Client.MergeNoFF]; in-process, or `git commit-tree`) and
// moves targetRef with a compare-and-swap `git update-ref`. If branch is already contained in
// targetRef nothing happens and its commit is returned. The resulting tree
// is the one `git merge --no-ff` makes (both use the ort strategy). A
// worktree that has targetRef checked out is left stale: call
// [Client.SyncWorktree].
//
// The merge is optimistic and safe to call concurrently: the tree and
// commit are computed without a lock, and only the compare-and-swap of the
// ref is serialised (per ref, in this process). If the ref moved meanwhile
// (another merge won) the merge is redone on the new tip, up to
// [MaxMergeRetries] times; then the error wraps [ErrRefChanged].
//
// The merged tree needs no `git merge-tree` when branch's history, walked
// in-process up to commits known to be merged already (see mergedSet),
// meets targetRef's history in one commit: the tip itself (the merged tree
// is branch's own), or an earlier one when no path changed on both sides
// (the trees are merged in-process, see mergeTrees). The walk costs the
// branch's own commits, not the length of the job. Anything else — a path
// changed on both sides, several or unknown merge bases — goes to git.
func (c *Client) MergeTree(ctx context.Context, targetRef, branch, message string) (string, error) {
	if message == "" {
		message = defaultMergeMessage(branch)
	}
	ref := branchRef(targetRef)
	theirs, err := c.ResolveRef(ctx, branch)
	if err != nil {
		return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
	}
	m := c.mergedFor(ref)
	for attempt := 0; ; attempt++ {
		// Read under the swap lock: a read racing this Client's own
		// update-ref would see a tip the Client has not recorded yet and
		// throw its knowledge away (observe).
		m.cas.Lock()
		old, err := c.ResolveRef(ctx, ref)
		m.cas.Unlock()
		if err != nil {
			return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
		}
		commit, walk, err := c.mergeCommit(ctx, m, old, theirs, branch, message)
		var mc *MergeConflictError
		switch {
		case errors.As(err, &mc):
			return "", err
		case err != nil:
			return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
		case commit == old:
			return old, nil
		}
		err = c.swap(ctx, m, ref, old, theirs, commit, walk)
		if err == nil {
			return commit, nil
		}
		if !errors.Is(err, ErrRefChanged) || attempt+1 >= MaxMergeRetries || ctx.Err() != nil {
			return "", fmt.Errorf("merge %s into %s: %w", branch, targetRef, err)
		}
	}
}

// MaxMergeRetries bounds how often [Client.MergeTree] redoes a merge whose
// target ref moved while it was computed.
const MaxMergeRetries = 16

// mergeCommit computes the merge of theirs into old and writes its commit;
// it returns old itself when theirs is already merged. walk is theirs's
// history not known to be merged (see unmerged).
//
// The tree is theirs's own when theirs is built on old; else, when the
// walk names one merge base and no path changed on both sides, it is
// merged in-process (mergeInProcess); else `git merge-tree` decides. The
// commit is written in-process when the identity allows (writeMergeCommit),
// else by `git commit-tree`.
func (c *Client) mergeCommit(ctx context.Context, m *mergedSet, old, theirs, branch, message string) (string, mergeWalk, error) {
	if theirs == old || c.knownMerged(m, old, theirs) {
		return old, mergeWalk{}, nil
	}
	walk := c.unmerged(m, old, theirs)
	var tree string
	if walk.complete && len(walk.frontier) == 1 {
		if walk.frontier[0] == old {
			// theirs is built on old: the merge's tree is theirs's tree.
			tree, _ = c.objects.tree(theirs)
		} else {
			tree, _ = c.objects.mergeInProcess(walk.frontier[0], old, theirs)
		}
	}
	if tree == "" {
		out, err := c.run(ctx, c.top, nil, nil, "merge-tree", "--write-tree", "-z", "--name-only", old, theirs)
		if err != nil {
			if exitCode(err) == 1 {
				return "", walk, parseMergeTreeConflict(branch, out)
			}
			return "", walk, err
		}
		tree, _, _ = strings.Cut(out, "\x00")
		tree = strings.TrimSpace(tree)
		if merged, err := c.alreadyMerged(ctx, tree, old, theirs); err != nil {
			return "", walk, err
		} else if merged {
			return old, walk, nil
		}
	}
	if c.objects != nil {
		commit, ok, err := c.writeMergeCommit(ctx, tree, old, theirs, message)
		if err != nil {
			return "", walk, fmt.Errorf("commit: %w", err)
		}
		if ok {
			return commit, walk, nil
		}
	}
	idEnv, err := c.IdentityEnv(ctx)
	if err != nil {
		return "", walk, err
	}
	out, err := c.run(ctx, c.top, idEnv, nil, "commit-tree", tree, "-p", old, "-p", theirs, "-m", message)
	if err != nil {
		return "", walk, fmt.Errorf("commit: %w", err)
	}
	return strings.TrimSpace(out), walk, nil
}

// unmerged walks theirs's history in-process up to the commits known to be
// merged into old (see mergedSet). The walk is incomplete (and names no
// merge base) when old is not the tip the Client knows or there is no
// in-process object store.
func (c *Client) unmerged(m *mergedSet, old, theirs string) mergeWalk {
	if c.objects == nil {
		return mergeWalk{}
	}
	if !c.tipIs(m, old) {
		return mergeWalk{}
	}
	return c.objects.walkUnmerged(theirs, c.knownTo(m))
}

// tipIs reports whether old is the tip m knows.
func (c *Client) tipIs(m *mergedSet, old string) bool {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	return m.tip == old
}

// knownTo looks commits up in m's known set, under the lock, one at a
// time: a walk reads a handful of commits, so this costs nothing like a
// copy of the set, which grows with every merge (a copy per merge made a
// job's merges quadratic in its items). The set may grow (or be reset)
// while a walk runs, only because the ref moved on: the merge computed
// from that walk then fails its compare-and-swap on the ref and is redone,
// so a walk never publishes what it read from a newer set.
func (c *Client) knownTo(m *mergedSet) func(string) bool {
	return func(oid string) bool {
		c.mergeMu.Lock()
		defer c.mergeMu.Unlock()
		return m.known[oid]
	}
}

// mergedSet is what a Client knows about one target ref: the tip it last
// saw or made, and commits known to be ancestors of (or equal to) it. It
// only ever speeds up answers: a commit wrongly absent costs a merge-tree,
// and "already merged" is only concluded from a commit actually present.
//
// known also holds every ancestor of tip made after the commit last
// observed (the tip seen when the set was reset): swap adds a merged
// branch's commits only when the walk of its history was complete, and
// resets the set to the new tip otherwise. So a walk of a branch that
// stops at known commits has walked no ancestor of tip, and when it ends at
// one known commit, that commit is the branch's only merge base with tip.
type mergedSet struct {
	tip   string
	known map[string]bool
	cas   sync.Mutex // held only around the ref update
}

func (c *Client) mergedFor(ref string) *mergedSet {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	m, ok := c.merged[ref]
	if !ok {
		m = &mergedSet{known: map[string]bool{}}
		c.merged[ref] = m
	}
	return m
}

// observe records old as read from the ref: if it is not a commit known
// to be merged (the ref moved in a way this Client did not make), what the
// Client knew no longer applies. A known but older commit is a stale read
// or a ref moved back; the tip is kept, so knownMerged does not answer.
func (c *Client) observe(m *mergedSet, old string) {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	if !m.known[old] {
		m.tip = old
		m.known = map[string]bool{old: true}
	}
}

// knownMerged reports whether theirs is known to be contained in old.
func (c *Client) knownMerged(m *mergedSet, old, theirs string) bool {
	c.observe(m, old)
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	return m.tip == old && m.known[theirs]
}

// swap moves ref from old to commit (a merge of theirs) if it still points
// at old, and records that old, theirs and commit — and the branch's
// commits walked, when that walk was complete — are now merged. It is the
// only serialised part of a merge.
func (c *Client) swap(ctx context.Context, m *mergedSet, ref, old, theirs, commit string, walk mergeWalk) error {
	m.cas.Lock()
	defer m.cas.Unlock()
	if c.beforeSwap != nil {
		c.beforeSwap()
	}
	if err := c.casRef(ctx, ref, commit, old); err != nil {
		now, rerr := c.ResolveRef(context.WithoutCancel(ctx), ref)
		switch {
		case rerr == nil && now == commit:
			// git died after the update was committed: it happened.
		case rerr == nil && now != old:
			return fmt.Errorf("%w (expected %s, found %s): %w", ErrRefChanged, old, now, err)
		default:
			return fmt.Errorf("update ref: %w", err)
		}
	}
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	if m.tip != old || !walk.complete {
		// Not every new ancestor is known: start over from the new tip.
		m.known = map[string]bool{}
	} else {
		for _, oid := range walk.walked {
			m.known[oid] = true
		}
		m.known[old], m.known[theirs] = true, true
	}
	m.known[commit] = true
	m.tip = commit
	return nil
}

// descendantTree returns theirs's tree when theirs descends from old
// (checked in-process); ok is false otherwise, and the caller runs a real
// merge. The walk does not enter commits known to be merged into old other
// than old itself: none of them can lead to old.
func (c *Client) descendantTree(m *mergedSet, old, theirs string) (string, bool) {
	if c.objects == nil {
		return "", false
	}
	known := c.knownTo(m)
	yes, ok := c.objects.isAncestor(old, theirs, func(oid string) bool { return oid != old && known(oid) })
	if !ok || !yes {
		return "", false
	}
	return c.objects.tree(theirs)
}

// alreadyMerged reports whether theirs is an ancestor of old, given the
// merged tree. A merge with an ancestor yields old's own tree, so the
// ancestry check (one git process) only runs when the trees are equal.
func (c *Client) alreadyMerged(ctx context.Context, tree, old, theirs string) (bool, error) {
	oldTree, err := c.TreeOf(ctx, old)
	if err != nil {
		return false, err
	}
	if oldTree != tree {
		return false, nil
	}
	_, err = c.run(ctx, c.top, nil, nil, "merge-base", "--is-ancestor", theirs, old)
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
