package gitops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrRefNotFound reports that a ref or revision does not exist.
var ErrRefNotFound = errors.New("ref not found")

// refStore reads refs of one worktree in-process: per-worktree refs (HEAD,
// refs/worktree/…, refs/bisect/…, refs/rewritten/…) from gitDir, the others
// from commonDir, loose files first, then packed-refs. It never writes and
// answers "unknown" (ok=false) whenever git itself must decide.
type refStore struct {
	gitDir, commonDir string
	// disabled is set for ref backends other than files (reftable).
	disabled bool
}

func newRefStore(gitDir, commonDir string) refStore {
	_, err := os.Stat(filepath.Join(commonDir, "reftable"))
	return refStore{gitDir: gitDir, commonDir: commonDir, disabled: err == nil}
}

// refStoreFor returns the ref store of the worktree at dir, if dir is the top
// of a work tree (it has a .git directory or a "gitdir:" file).
func refStoreFor(dir string) (refStore, bool) {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Stat(dotGit)
	if err != nil {
		return refStore{}, false
	}
	gitDir := dotGit
	if !fi.IsDir() {
		b, err := os.ReadFile(dotGit)
		if err != nil {
			return refStore{}, false
		}
		p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !ok {
			return refStore{}, false
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		gitDir = filepath.Clean(p)
	}
	commonDir := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		p := strings.TrimSpace(string(b))
		if !filepath.IsAbs(p) {
			p = filepath.Join(gitDir, p)
		}
		commonDir = filepath.Clean(p)
	}
	return newRefStore(gitDir, commonDir), true
}

func perWorktreeRef(name string) bool {
	if !strings.HasPrefix(name, "refs/") {
		return true // HEAD and other pseudo-refs
	}
	for _, p := range []string{"refs/worktree/", "refs/bisect/", "refs/rewritten/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// resolve follows name (and symbolic refs) to an object id. ok is false when
// the ref does not exist in the files backend or cannot be read here.
func (s refStore) resolve(name string) (oid string, ok bool) {
	if s.disabled {
		return "", false
	}
	for range 5 {
		val, found := s.readRaw(name)
		if !found {
			return "", false
		}
		if target, sym := strings.CutPrefix(val, "ref: "); sym {
			name = target
			continue
		}
		if isHexOID(val) {
			return val, true
		}
		return "", false
	}
	return "", false
}

// symbolic returns the target of a symbolic ref (for HEAD: "refs/heads/x"),
// "" with ok=true if it is detached, ok=false if unknown.
func (s refStore) symbolic(name string) (target string, ok bool) {
	if s.disabled {
		return "", false
	}
	val, found := s.readRaw(name)
	if !found {
		return "", false
	}
	if t, sym := strings.CutPrefix(val, "ref: "); sym {
		return t, true
	}
	return "", isHexOID(val)
}

// readRaw returns the trimmed content of a loose ref, or the value of a
// packed ref.
func (s refStore) readRaw(name string) (string, bool) {
	dir := s.commonDir
	if perWorktreeRef(name) {
		dir = s.gitDir
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err == nil {
		return strings.TrimSpace(string(b)), true
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.EISDIR) {
		return "", false
	}
	if !strings.HasPrefix(name, "refs/") || perWorktreeRef(name) {
		return "", false
	}
	return s.packed(name)
}

func (s refStore) packed(name string) (string, bool) {
	f, err := os.Open(filepath.Join(s.commonDir, "packed-refs"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	want := []byte(name)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || line[0] == '^' {
			continue
		}
		oid, ref, ok := bytes.Cut(line, []byte{' '})
		if ok && bytes.Equal(ref, want) && isHexOID(string(oid)) {
			return string(oid), true
		}
	}
	return "", false
}

func isHexOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

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
// refs/tags/, refs/heads/, refs/remotes/), a commit id or any revision git
// understands ("HEAD~2"). Branches are read in-process from the loose and
// packed refs when that is unambiguous; everything else runs
// `git rev-parse --verify`. A missing ref is an error wrapping
// [ErrRefNotFound].
func (c *Client) ResolveRef(ctx context.Context, ref string) (string, error) {
	if oid, ok := c.resolveInProcess(ref); ok {
		return oid, nil
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

func (c *Client) resolveInProcess(ref string) (string, bool) {
	if !validRefName(ref) {
		return "", false
	}
	if strings.HasPrefix(ref, "refs/heads/") || strings.HasPrefix(ref, "refs/remotes/") {
		return c.refs.resolve(ref)
	}
	if strings.HasPrefix(ref, "refs/") || ref == "HEAD" || strings.ToUpper(ref) == ref {
		return "", false // tags may need peeling; pseudo-refs are git's business
	}
	// git's short-name order; only branches and remotes are answered here.
	for _, full := range []string{"refs/" + ref, "refs/tags/" + ref, "refs/heads/" + ref,
		"refs/remotes/" + ref, "refs/remotes/" + ref + "/HEAD"} {
		if _, found := c.refs.readRaw(full); !found {
			continue
		}
		if strings.HasPrefix(full, "refs/heads/") || strings.HasPrefix(full, "refs/remotes/") {
			return c.refs.resolve(full)
		}
		return "", false
	}
	return "", false
}

// BranchExists reports whether refs/heads/<name> exists. name may also be a
// full ref name. An invalid name is an error.
func (c *Client) BranchExists(ctx context.Context, name string) (bool, error) {
	ref := branchRef(name)
	if !validRefName(ref) {
		return false, fmt.Errorf("branch exists %q: invalid branch name", name)
	}
	if !c.refs.disabled {
		_, ok := c.refs.resolve(ref)
		return ok, nil
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

// Head returns the commit id of HEAD in the work tree dir. It reads the
// worktree's HEAD in-process when dir is the top of a work tree, otherwise it
// runs `git rev-parse HEAD`.
func (c *Client) Head(ctx context.Context, dir string) (string, error) {
	if s, ok := refStoreFor(dir); ok {
		if oid, ok := s.resolve("HEAD"); ok {
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
	if s, ok := refStoreFor(dir); ok {
		if target, ok := s.symbolic("HEAD"); ok {
			return strings.TrimPrefix(target, "refs/heads/"), nil
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
	out, err := c.run(ctx, c.top, nil, nil, "rev-parse", "--verify", "--end-of-options", rev+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("tree of %q: %w", rev, err)
	}
	return strings.TrimSpace(out), nil
}
