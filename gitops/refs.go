package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrRefNotFound reports that a ref or revision does not exist.
var ErrRefNotFound = errors.New("ref not found")

// validRefName reports whether name is acceptable to git as a ref name
// component path (the rules of git-check-ref-format, without --allow-onelevel
// subtleties). Names that fail are never looked up in-process.
func validRefName(name string) bool {
	if name == "" || name == "@" || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") ||
		strings.Contains(name, "/.") || strings.HasPrefix(name, ".") {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// branchRef returns refs/heads/<name> for a branch name or full ref name.
func branchRef(name string) string {
	if strings.HasPrefix(name, "refs/") {
		return name
	}
	return "refs/heads/" + name
}

// ResolveRef returns the commit id that ref names. ref may be a full ref name
// ("refs/heads/x"), a short name (resolved in git's order: refs/<ref>,
// refs/tags/, refs/heads/, refs/remotes/, refs/remotes/<ref>/HEAD), HEAD, a
// full commit id or any revision git understands ("HEAD~2"). Annotated tags
// are peeled to their commit. Names and ids are resolved in-process (go-git);
// other revisions run `git rev-parse --verify`. A missing ref is an error
// wrapping [ErrRefNotFound].
func (c *Client) ResolveRef(ctx context.Context, ref string) (string, error) {
	oid, found, ok := c.resolveInProcess(ref)
	switch {
	case ok && found:
		return oid, nil
	case ok:
		return "", fmt.Errorf("resolve %q: %w", ref, ErrRefNotFound)
	}
	out, err := c.run(ctx, c.top, nil, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("resolve %q: %w", ref, ErrRefNotFound)
		}
		return "", fmt.Errorf("resolve %q: %w", ref, err)
	}
	return strings.TrimSpace(out), nil
}

// resolveInProcess answers ResolveRef for names and full ids; ok is false
// when git must decide (other revision syntax, reftable, read errors).
func (c *Client) resolveInProcess(ref string) (oid string, found, ok bool) {
	o := c.objects
	if o == nil {
		return "", false, false
	}
	if isHexOID(ref) {
		// git prefers an object id over a ref of the same name.
		oid, ok := o.peelCommit(ref)
		return oid, ok, ok
	}
	if !validRefName(ref) {
		return "", false, false
	}
	var candidates []string
	switch {
	case ref == "HEAD":
		oid, found, ok := o.resolve(c.gitDir, "HEAD")
		if !ok || !found {
			return "", false, false // unborn HEAD: let git say so
		}
		return c.peel(oid)
	case strings.HasPrefix(ref, "refs/"):
		candidates = []string{ref}
	case strings.ToUpper(ref) == ref:
		return "", false, false // pseudo-refs (FETCH_HEAD, …) are git's business
	default:
		candidates = []string{"refs/" + ref, "refs/tags/" + ref, "refs/heads/" + ref,
			"refs/remotes/" + ref, "refs/remotes/" + ref + "/HEAD"}
	}
	for _, full := range candidates {
		if perWorktreeRef(full) {
			return "", false, false
		}
		oid, found, ok := o.resolve(c.commonDir, full)
		if !ok {
			return "", false, false
		}
		if found {
			return c.peel(oid)
		}
	}
	return "", false, true
}

func (c *Client) peel(oid string) (string, bool, bool) {
	commit, ok := c.objects.peelCommit(oid)
	if !ok {
		return "", false, false // not a commit (git reports that precisely)
	}
	return commit, true, true
}

// perWorktreeRef reports refs that live in a worktree's own git dir.
func perWorktreeRef(name string) bool {
	for _, p := range []string{"refs/worktree/", "refs/bisect/", "refs/rewritten/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// CommitExists reports whether rev names a commit present in the repository
// (`git cat-file -e rev^{commit}`), for example a base commit that a shallow
// clone may not have.
func (c *Client) CommitExists(ctx context.Context, rev string) (bool, error) {
	_, err := c.ResolveRef(ctx, rev)
	var ge *GitError
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrRefNotFound), errors.As(err, &ge) && ge.ExitCode == 128:
		return false, nil
	default:
		return false, err
	}
}

// BranchExists reports whether refs/heads/<name> exists. name may also be a
// full ref name. An invalid name is an error.
func (c *Client) BranchExists(ctx context.Context, name string) (bool, error) {
	ref := branchRef(name)
	if !validRefName(ref) {
		return false, fmt.Errorf("branch exists %q: invalid branch name", name)
	}
	if c.objects != nil {
		if found, ok := c.objects.exists(ref); ok {
			return found, nil
		}
	}
	_, err := c.run(ctx, c.top, nil, nil, "show-ref", "--verify", "--quiet", ref)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, fmt.Errorf("branch exists %q: %w", name, err)
	}
}

// Branches returns the short names of the branches whose names start with
// prefix ("prodigy-agent/job-1/"), sorted.
func (c *Client) Branches(ctx context.Context, prefix string) ([]string, error) {
	full := "refs/heads/" + prefix
	var names []string
	if refs, ok := c.objectsRefs(full); ok {
		for n := range refs {
			names = append(names, strings.TrimPrefix(n, "refs/heads/"))
		}
	} else {
		out, err := c.run(ctx, c.top, nil, nil, "for-each-ref", "--format=%(refname)", "--", full)
		if err != nil {
			return nil, fmt.Errorf("list branches %s*: %w", prefix, err)
		}
		for _, n := range strings.Fields(out) {
			if strings.HasPrefix(n, full) {
				names = append(names, strings.TrimPrefix(n, "refs/heads/"))
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

func (c *Client) objectsRefs(prefix string) (map[string]string, bool) {
	if c.objects == nil {
		return nil, false
	}
	return c.objects.refs(prefix)
}

// ValidateBranchName checks name with `git check-ref-format --branch`, git's
// own rule for branch names; the error says why a name is refused.
func (c *Client) ValidateBranchName(ctx context.Context, name string) error {
	if _, err := c.run(ctx, c.top, nil, nil, "check-ref-format", "--branch", name); err != nil {
		return fmt.Errorf("invalid branch name %q: %w", name, err)
	}
	return nil
}

// Head returns the commit id of HEAD in the work tree dir. It reads the
// worktree's HEAD in-process when dir is the top of a work tree of this
// repository, or of a repository of its own (a .git directory: an agent's,
// see [Client.HandOut], whose configuration the engine's git never reads);
// otherwise it runs `git rev-parse HEAD`.
func (c *Client) Head(ctx context.Context, dir string) (string, error) {
	if c.objects != nil {
		if gitDir, ok := c.objects.ownGitDir(dir); ok {
			if oid, found, ok := c.objects.resolve(gitDir, "HEAD"); ok && found {
				return oid, nil
			}
		}
	}
	if dotGit := filepath.Join(dir, ".git"); dotGit != c.commonDir {
		if fi, err := os.Lstat(dotGit); err == nil && fi.IsDir() {
			oid, err := readAgentHead(dotGit)
			if err != nil {
				return "", fmt.Errorf("head of %s: %w", dir, err)
			}
			return oid, nil
		}
	}
	out, err := c.run(ctx, dir, nil, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("head of %s: %w", dir, err)
	}
	return strings.TrimSpace(out), nil
}

// CurrentBranch returns the short name of the branch checked out in dir
// ("prodigy/job-1"), or "" if HEAD is detached.
func (c *Client) CurrentBranch(ctx context.Context, dir string) (string, error) {
	if c.objects != nil {
		if gitDir, ok := c.objects.ownGitDir(dir); ok {
			if target, ok := c.objects.symbolicHEAD(gitDir); ok {
				return strings.TrimPrefix(target, "refs/heads/"), nil
			}
		}
	}
	out, err := c.run(ctx, dir, nil, nil, "symbolic-ref", "--quiet", "HEAD")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", fmt.Errorf("current branch of %s: %w", dir, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(out), "refs/heads/"), nil
}

// TreeOf returns the tree id of a revision (rev^{tree}).
func (c *Client) TreeOf(ctx context.Context, rev string) (string, error) {
	if c.objects != nil {
		if oid, found, ok := c.resolveInProcess(rev); ok && found {
			if tree, ok := c.objects.tree(oid); ok {
				return tree, nil
			}
		}
	}
	out, err := c.run(ctx, c.top, nil, nil, "rev-parse", "--verify", "--end-of-options", rev+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("tree of %q: %w", rev, err)
	}
	return strings.TrimSpace(out), nil
}
