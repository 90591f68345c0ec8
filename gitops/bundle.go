package gitops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
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

// FetchBundle imports the bundle at path and points the local ref dst
// (forced; a full ref name) at its ref src. It checks what `git fetch
// BUNDLE` checks, without its costs that grow with the repository (git
// verifies a bundle's prerequisites by walking from every ref, once for
// `bundle verify` and again inside fetch): the header is read here (v2 or
// v3, SHA-1, no object filter); every prerequisite must be a commit the
// repository has; the pack is indexed by `git index-pack --stdin
// --fix-thin`, as fetch does; everything src's tip reaches beyond the
// prerequisites must then be present (`git rev-list --objects`), and
// only then is dst written. Imports run side by side; only the ref update
// takes the repository's administration lock. A file that is not such a
// bundle, a missing prerequisite, a pack that does not index or leaves
// objects out is an error and dst is not written.
func (c *Client) FetchBundle(ctx context.Context, path, src, dst string) error {
	if !validRefName(dst) || !strings.HasPrefix(dst, "refs/") {
		return fmt.Errorf("fetch bundle %s: invalid destination ref %q", path, dst)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("fetch bundle %s: %w", path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	h, err := readBundleHeader(r)
	if err != nil {
		return fmt.Errorf("fetch bundle %s: %w", path, err)
	}
	tip, ok := h.refs[src]
	if !ok {
		return fmt.Errorf("fetch bundle %s: it has no ref %s", path, src)
	}
	for _, p := range h.prereqs {
		if !c.HasCommit(ctx, p) {
			return fmt.Errorf("fetch bundle %s: the repository lacks commit %s, which the bundle requires", path, p)
		}
	}
	if _, err := c.run(ctx, c.top, nil, r, "index-pack", "--stdin", "--fix-thin"); err != nil {
		return fmt.Errorf("fetch bundle %s: index its pack: %w", path, err)
	}
	args := []string{"rev-list", "--objects", "--quiet", "--end-of-options", tip + "^{commit}"}
	for _, p := range h.prereqs {
		args = append(args, "^"+p)
	}
	if _, err := c.run(ctx, c.top, nil, nil, append(args, "--")...); err != nil {
		return fmt.Errorf("fetch bundle %s: %s is not complete: %w", path, src, err)
	}
	c.admin.Lock()
	defer c.admin.Unlock()
	if _, err := c.run(ctx, c.top, nil, nil, "update-ref", "-m", "prodigy-action: fetch bundle", dst, tip); err != nil {
		return fmt.Errorf("fetch %s from bundle %s: %w", src, path, err)
	}
	return nil
}

// bundleHeader is what a bundle file declares before its pack.
type bundleHeader struct {
	prereqs []string          // commits the pack's objects may rely on
	refs    map[string]string // full ref name → commit
}

// maxBundleHeader bounds the header a bundle may have (its refs and
// prerequisites), so a hostile file cannot make it grow without end.
const maxBundleHeader = 1 << 20

// readBundleHeader reads a bundle's header from r, leaving r at its pack:
// "# v2 git bundle" or "# v3 git bundle" (with capabilities: only
// object-format=sha1), then prerequisite lines "-OID [comment]" and ref
// lines "OID REFNAME", then an empty line.
func readBundleHeader(r *bufio.Reader) (bundleHeader, error) {
	h := bundleHeader{refs: map[string]string{}}
	read := 0
	line := func() (string, error) {
		l, err := r.ReadString('\n')
		read += len(l)
		if read > maxBundleHeader {
			return "", errors.New("not a bundle: its header is too large")
		}
		if err != nil {
			return "", errors.New("not a bundle: its header is cut short")
		}
		return strings.TrimSuffix(l, "\n"), nil
	}
	sig, err := line()
	if err != nil {
		return h, err
	}
	v3 := sig == "# v3 git bundle"
	if sig != "# v2 git bundle" && !v3 {
		return h, errors.New("not a git bundle (v2 or v3)")
	}
	for {
		l, err := line()
		if err != nil {
			return h, err
		}
		switch {
		case l == "":
			if len(h.refs) == 0 {
				return h, errors.New("not a bundle: it names no ref")
			}
			return h, nil
		case v3 && strings.HasPrefix(l, "@"):
			if l != "@object-format=sha1" {
				return h, fmt.Errorf("bundle capability %q is not supported", clip(l))
			}
		case strings.HasPrefix(l, "-"):
			oid, _, _ := strings.Cut(l[1:], " ")
			if !isHexOID(oid) {
				return h, fmt.Errorf("not a bundle: bad prerequisite line %q", clip(l))
			}
			h.prereqs = append(h.prereqs, oid)
		default:
			oid, ref, ok := strings.Cut(l, " ")
			if !ok || !isHexOID(oid) || !validRefName(ref) {
				return h, fmt.Errorf("not a bundle: bad ref line %q", clip(l))
			}
			h.refs[ref] = oid
		}
	}
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

// clip shortens a line of a file for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
