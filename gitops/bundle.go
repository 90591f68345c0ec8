package gitops

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrEmptyBundle is returned by [Client.BundleCreate] when the ref has no
// commit outside the excluded ones (git refuses to write an empty bundle).
var ErrEmptyBundle = errors.New("nothing to bundle")

// HasCommit reports whether rev names a commit present in the repository.
func (c *Client) HasCommit(ctx context.Context, rev string) bool {
	if rev == "" {
		return false
	}
	_, err := c.run(ctx, c.top, nil, nil, "cat-file", "-e", rev+"^{commit}")
	return err == nil
}

// BundleCreate writes the commits reachable from ref but not from any of
// exclude into a bundle file at path (`git bundle create path ref ^x…`).
// ref should be a full ref name (refs/heads/…) so the bundle names it. When
// there is nothing to bundle the error wraps [ErrEmptyBundle] and no file is
// written.
func (c *Client) BundleCreate(ctx context.Context, path, ref string, exclude ...string) error {
	tip, err := c.ResolveRef(ctx, ref)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", ref, err)
	}
	args := []string{"rev-list", "--count", tip}
	for _, x := range exclude {
		args = append(args, "^"+x)
	}
	out, err := c.run(ctx, c.top, nil, nil, args...)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", ref, err)
	}
	if strings.TrimSpace(out) == "0" {
		return fmt.Errorf("bundle %s: %w", ref, ErrEmptyBundle)
	}
	args = []string{"bundle", "create", "--quiet", path, ref}
	for _, x := range exclude {
		args = append(args, "^"+x)
	}
	if _, err := c.run(ctx, c.top, nil, nil, args...); err != nil {
		return fmt.Errorf("bundle %s into %s: %w", ref, path, err)
	}
	return nil
}

// BundleVerify checks that the bundle at path is valid and that the
// repository has every commit it requires (`git bundle verify`).
func (c *Client) BundleVerify(ctx context.Context, path string) error {
	if _, err := c.run(ctx, c.top, nil, nil, "bundle", "verify", "--quiet", path); err != nil {
		return fmt.Errorf("verify bundle %s: %w", path, err)
	}
	return nil
}

// BundleHeads lists the refs a bundle carries: full ref name → commit.
func (c *Client) BundleHeads(ctx context.Context, path string) (map[string]string, error) {
	out, err := c.run(ctx, c.top, nil, nil, "bundle", "list-heads", path)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", path, err)
	}
	heads := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		oid, ref, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && isHexOID(oid) {
			heads[ref] = oid
		}
	}
	return heads, nil
}

// FetchBundle verifies the bundle at path and fetches its ref src into the
// local ref dst (forced; no tags). dst must be a full ref name.
func (c *Client) FetchBundle(ctx context.Context, path, src, dst string) error {
	if err := c.BundleVerify(ctx, path); err != nil {
		return err
	}
	if !validRefName(dst) || !strings.HasPrefix(dst, "refs/") {
		return fmt.Errorf("fetch bundle %s: invalid destination ref %q", path, dst)
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", path, "+"+src+":"+dst); err != nil {
		return fmt.Errorf("fetch %s from bundle %s: %w", src, path, err)
	}
	return nil
}

// MergeCommit is one merge on a branch's first-parent chain.
type MergeCommit struct {
	OID     string
	Message string
}

// FirstParentMerges lists the merge commits of head's first-parent chain
// that are not reachable from base, oldest first, with their messages.
func (c *Client) FirstParentMerges(ctx context.Context, base, head string) ([]MergeCommit, error) {
	out, err := c.run(ctx, c.top, nil, nil, "log", "--first-parent", "--merges", "--reverse", "--format=%H%x1f%B%x1e", base+".."+head)
	if err != nil {
		return nil, fmt.Errorf("list the merges of %s: %w", head, err)
	}
	var ms []MergeCommit
	for _, rec := range strings.Split(out, "\x1e") {
		oid, msg, ok := strings.Cut(strings.TrimLeft(rec, "\n"), "\x1f")
		if ok && isHexOID(oid) {
			ms = append(ms, MergeCommit{OID: oid, Message: msg})
		}
	}
	return ms, nil
}

// ReplayMerge applies what the merge commit merge brought into its first
// parent (the change from merge^1 to merge, as `git cherry-pick -m 1`
// would) onto targetRef, without a working tree, and commits it with
// message as a single-parent commit on targetRef (compare-and-swap). On a
// conflict it returns a *[MergeConflictError] named after label and
// changes nothing.
//
// It works with git versions without `merge-tree --merge-base`: the
// three-way merge runs between two throw-away commits whose only common
// ancestor carries merge^1's tree.
func (c *Client) ReplayMerge(ctx context.Context, targetRef, merge, label, message string) (string, error) {
	ref := branchRef(targetRef)
	old, err := c.ResolveRef(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("replay %s onto %s: %w", label, targetRef, err)
	}
	idEnv, err := c.IdentityEnv(ctx)
	if err != nil {
		return "", fmt.Errorf("replay %s onto %s: %w", label, targetRef, err)
	}
	commitTree := func(tree string, parents ...string) (string, error) {
		args := []string{"commit-tree", tree}
		for _, p := range parents {
			args = append(args, "-p", p)
		}
		args = append(args, "-m", message)
		out, err := c.run(ctx, c.top, idEnv, nil, args...)
		return strings.TrimSpace(out), err
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("replay %s onto %s: %w", label, targetRef, err)
	}
	baseTree, err := c.TreeOf(ctx, merge+"^1")
	if err != nil {
		return fail(err)
	}
	theirTree, err := c.TreeOf(ctx, merge)
	if err != nil {
		return fail(err)
	}
	ourTree, err := c.TreeOf(ctx, old)
	if err != nil {
		return fail(err)
	}
	b, err := commitTree(baseTree)
	if err != nil {
		return fail(err)
	}
	ours, err := commitTree(ourTree, b)
	if err != nil {
		return fail(err)
	}
	theirs, err := commitTree(theirTree, b)
	if err != nil {
		return fail(err)
	}
	out, err := c.run(ctx, c.top, nil, nil, "merge-tree", "--write-tree", "-z", "--name-only", ours, theirs)
	if err != nil {
		if exitCode(err) == 1 {
			return "", parseMergeTreeConflict(label, out)
		}
		return fail(err)
	}
	tree, _, _ := strings.Cut(out, "\x00")
	tree = strings.TrimSpace(tree)
	if tree == ourTree {
		return old, nil
	}
	commit, err := commitTree(tree, old)
	if err != nil {
		return fail(err)
	}
	if _, err := c.run(ctx, c.top, nil, nil, "update-ref", "-m", "replay "+label, ref, commit, old); err != nil {
		if now, rerr := c.ResolveRef(ctx, ref); rerr == nil && now != old {
			return "", fmt.Errorf("replay %s onto %s: %w (expected %s, found %s): %w", label, targetRef, ErrRefChanged, old, now, err)
		}
		return fail(err)
	}
	return commit, nil
}
