package gitops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// An agent's work tree is a linked worktree of the repository, made and
// reset by the engine as any other. While an agent runs in it, though, it is
// a repository of the agent's own ([Client.HandOut]): its .git file, which
// names the engine's administrative directory, is replaced by a .git
// directory with the agent's own configuration, HEAD, refs, index and
// hooks setting, and an object directory whose alternates name the
// repository's objects (read, never written, by the agent's git). Nothing
// the agent's git does — `git config`, `update-ref`, `branch -D`, hooks,
// gc — reaches the repository the engine works in. When every agent process
// has ended, [AgentRepo.Reclaim] takes the agent's commit by object id:
// HEAD is read in-process (bounded, no symbolic link followed), the objects
// it needs are copied from the agent's object directory by the engine's
// own git (pack-objects reading it as an alternate, unpack-objects --strict
// writing into the repository: objects are hash-checked and must be
// complete), and the .git file is put back. The engine never runs git with
// the agent's configuration, in the agent's git directory, or on anything
// the agent wrote but files of its work tree and objects.
//
// This is a barrier at the level of git. An agent running as the engine's
// user can still write the repository's files by absolute path; that is
// what running agents as another user (Options of the caller) closes, and
// what [Client.AuditConfig] and the results checks detect otherwise.

// AgentRepo is a worktree handed to an agent as a repository of its own.
type AgentRepo struct {
	c      *Client
	dir    string // the work tree (absolute)
	dotGit []byte // the engine's .git file, restored by Reclaim
	base   string // the commit handed out
	owned  bool   // handed to another user: Reclaim confines dir first
}

// Owner is the user an agent runs as when it is not the engine's: the
// agent's work tree and repository are made theirs.
type Owner struct {
	UID, GID int
}

// Dir returns the work tree.
func (a *AgentRepo) Dir() string { return a.dir }

// Base returns the commit the agent was handed.
func (a *AgentRepo) Base() string { return a.base }

// agentGitTmp is where HandOut builds the agent's .git before it replaces
// the .git file (an untracked directory of the work tree if a crash leaves
// it: the next clean removes it).
const agentGitTmp = ".prodigy-agent-git"

// HandOut turns dir, a linked worktree of this repository checked out by
// the engine (on a branch or detached), into a repository of the agent's
// own (see the comment at the top of agentrepo.go): its HEAD and branch at
// the same commit, the engine's index copied (so the agent's first `git
// status` reads only what changed), the repository's info/exclude and
// sparse-checkout patterns, the branch's reflog, identity, line-ending and sparse settings of
// the repository's own configuration, and the repository's hooks (its
// core.hooksPath, or its hooks directory) for the agent's own commits.
// owner, if not nil, becomes the owner of the work tree and the agent's
// repository (the engine's git then needs safe.directory for dir: see
// [Options].Config). Not serialised: it touches only dir.
func (c *Client) HandOut(ctx context.Context, dir string, owner *Owner) (*AgentRepo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("hand out %s: %w", dir, err)
	}
	dotGit := filepath.Join(abs, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("hand out %s: not a linked worktree of the repository", abs)
	}
	file, err := os.ReadFile(dotGit)
	if err != nil {
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	admin, ok := worktreeGitDir(abs)
	if !ok || filepath.Dir(admin) != filepath.Join(c.commonDir, "worktrees") {
		return nil, fmt.Errorf("hand out %s: not a linked worktree of the repository", abs)
	}
	head, err := c.Head(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	branch, err := c.CurrentBranch(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	config, err := c.cachedAgentConfig(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	tmp := filepath.Join(abs, agentGitTmp)
	if err := removeAll(tmp); err != nil {
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	if err := c.buildAgentGit(tmp, admin, head, branch, config); err != nil {
		_ = removeAll(tmp)
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	if owner != nil {
		if err := chownTree(abs, *owner); err != nil {
			_ = removeAll(tmp)
			return nil, fmt.Errorf("hand out %s to uid %d: %w", abs, owner.UID, err)
		}
	}
	if err := os.Remove(dotGit); err != nil {
		_ = removeAll(tmp)
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	if err := os.Rename(tmp, dotGit); err != nil {
		_ = os.WriteFile(dotGit, file, 0o644)
		_ = removeAll(tmp)
		return nil, fmt.Errorf("hand out %s: %w", abs, err)
	}
	return &AgentRepo{c: c, dir: abs, dotGit: file, base: head, owned: owner != nil}, nil
}

// buildAgentGit writes the agent's git directory at gitDir.
func (c *Client) buildAgentGit(gitDir, admin, head, branch string, config []byte) error {
	for _, d := range []string{"refs/heads", "refs/tags", "objects/info", "objects/pack", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	headFile := head + "\n"
	if branch != "" {
		ref := "refs/heads/" + branch
		if !validRefName(ref) {
			return fmt.Errorf("invalid branch name %q", branch)
		}
		p := filepath.Join(gitDir, filepath.FromSlash(ref))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(head+"\n"), 0o644); err != nil {
			return err
		}
		headFile = "ref: " + ref + "\n"
	}
	files := map[string][]byte{
		"HEAD":                    []byte(headFile),
		"config":                  config,
		"objects/info/alternates": []byte(quoteAlternate(filepath.Join(c.commonDir, "objects")) + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(gitDir, filepath.FromSlash(name)), b, 0o644); err != nil {
			return err
		}
	}
	copies := map[string]string{
		filepath.Join(c.commonDir, "info", "exclude"):   "info/exclude",
		filepath.Join(admin, "info", "sparse-checkout"): "info/sparse-checkout",
		filepath.Join(admin, "index"):                   "index",
	}
	if branch != "" {
		// The branch's reflog says how the engine made it.
		copies[filepath.Join(c.commonDir, "logs", "refs", "heads", filepath.FromSlash(branch))] = "logs/refs/heads/" + branch
	}
	for from, to := range copies {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(gitDir, filepath.FromSlash(to))), 0o755); err != nil {
			return err
		}
		if err := copyFile(from, filepath.Join(gitDir, filepath.FromSlash(to))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// agentKeys are the configuration entries of the repository's own files
// (local and worktree scope) an agent's repository gets: its identity,
// how files are checked out and compared, and the sparse checkout. Global
// and system configuration the agent's git reads itself.
func agentKey(key string) bool {
	section, variable, _ := strings.Cut(strings.ToLower(key), ".")
	switch section {
	case "user", "author", "committer":
		return variable == "name" || variable == "email"
	case "core":
		switch variable {
		case "filemode", "ignorecase", "precomposeunicode", "symlinks", "autocrlf", "eol", "safecrlf",
			"untrackedcache", "sparsecheckout", "sparsecheckoutcone", "quotepath", "checkstat", "trustctime":
			return true
		}
	case "index":
		return variable == "version" || variable == "sparse"
	case "init":
		return variable == "defaultbranch"
	}
	return false
}

// cachedAgentConfig is agentConfig, read once per Client and worktree
// configuration: every worktree a job hands out has the same settings
// (those of the repository, and the sparse checkout the engine gave all of
// them), so one `git config` serves every hand-out. A worktree with a
// config.worktree of its own is read for itself.
func (c *Client) cachedAgentConfig(ctx context.Context, dir string) ([]byte, error) {
	if gd, ok := worktreeGitDir(dir); ok {
		if _, err := os.Stat(filepath.Join(gd, "config.worktree")); err == nil {
			return c.agentConfig(ctx, dir)
		}
	}
	c.agentCfgMu.Lock()
	defer c.agentCfgMu.Unlock()
	if c.agentCfg == nil {
		b, err := c.agentConfig(ctx, dir)
		if err != nil {
			return nil, err
		}
		c.agentCfg = b
	}
	return c.agentCfg, nil
}

// agentConfig returns the agent repository's config file: the repository's
// own agentKey entries and its hooks directory.
func (c *Client) agentConfig(ctx context.Context, dir string) ([]byte, error) {
	out, err := c.run(ctx, dir, nil, nil, "config", "--list", "--show-scope", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the repository's configuration: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tlogallrefupdates = true\n")
	var hooks string
	globalHooks := false
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope := fields[i]
		key, value, _ := strings.Cut(fields[i+1], "\n")
		if strings.EqualFold(key, "core.hookspath") {
			switch scope {
			case "local", "worktree":
				hooks = value
			case "global", "system":
				globalHooks = true
			}
			continue
		}
		// Identity from every scope: an agent of another user, with a HOME
		// of its own, reads neither the engine's global nor its system
		// configuration.
		identity := strings.HasPrefix(strings.ToLower(key), "user.") || strings.HasPrefix(strings.ToLower(key), "author.") || strings.HasPrefix(strings.ToLower(key), "committer.")
		if agentKey(key) && (scope == "local" || scope == "worktree" || identity && scope != "command") {
			section, variable, _ := strings.Cut(key, ".")
			fmt.Fprintf(&b, "[%s]\n\t%s = %s\n", section, variable, quoteConfigValue(value))
		}
	}
	switch {
	case hooks != "":
		hooks = expandHome(hooks)
		if !filepath.IsAbs(hooks) {
			hooks = filepath.Join(c.top, hooks)
		}
	case !globalHooks:
		hooks = filepath.Join(c.commonDir, "hooks")
	}
	if hooks != "" {
		fmt.Fprintf(&b, "[core]\n\thooksPath = %s\n", quoteConfigValue(hooks))
	}
	return b.Bytes(), nil
}

// expandHome expands a leading "~/" as git does for core.hooksPath.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// quoteConfigValue quotes a value for a git config file.
func quoteConfigValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
	return `"` + r.Replace(v) + `"`
}

// quoteAlternate quotes an alternates path when git would otherwise split
// or misread it (C-style quoting, as git reads it).
func quoteAlternate(p string) string {
	if strings.ContainsAny(p, "\"\\\n:") || strings.HasPrefix(p, "#") {
		return strconv.Quote(p)
	}
	return p
}

// copyFile copies a regular file, keeping its modification time (the
// index's racy-entry check compares it with the files').
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	// File to file: the kernel copies (copy_file_range), no buffer here.
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// Reclaim takes the work tree back from the agent, after every process of
// the agent has ended: it reads the agent's HEAD in-process, copies the
// objects of the agent's commits into the repository (hash-checked and
// complete, from the agent's object directory only: see the comment at
// the top of agentrepo.go), deletes the agent's git directory — whatever
// the agent made of it — and restores the engine's .git file. When the
// agent committed, the worktree's branch (or detached HEAD) is then moved
// to the agent's commit (the index still describes the base: see
// SyncIndex). theirs is
// the agent's commit (the base when it made none). The work tree is the
// engine's again even when err is not nil (err then says why the agent's
// commit could not be taken: its repository was replaced, its HEAD is not
// a commit, an object is missing or corrupt). ctx bounds the git it runs.
func (a *AgentRepo) Reclaim(ctx context.Context) (theirs string, err error) {
	if a.owned {
		// The agent's user still owns everything inside, and may run
		// again elsewhere (a shared uid runs now): close the directory
		// before anything in it is read, written or deleted.
		if err := confine(a.dir); err != nil {
			return "", fmt.Errorf("take the worktree %s back: %w", a.dir, err)
		}
	}
	gitDir := filepath.Join(a.dir, ".git")
	theirs, err = readAgentHead(gitDir)
	if err == nil && theirs != a.base {
		err = a.c.importCommit(ctx, filepath.Join(gitDir, "objects"), theirs, a.base)
	}
	if rerr := a.restore(); rerr != nil {
		return "", errors.Join(err, rerr)
	}
	if err != nil {
		return "", fmt.Errorf("take the agent's commit: %w", err)
	}
	if theirs == a.base {
		return theirs, nil
	}
	// The worktree's branch moves by compare-and-swap through the
	// long-lived update-ref (no process per item); a detached HEAD by git.
	var uerr error
	if branch, err := a.c.CurrentBranch(ctx, a.dir); err == nil && branch != "" {
		uerr = a.c.casRef(ctx, branchRef(branch), theirs, a.base)
	} else {
		_, uerr = a.c.run(ctx, a.dir, nil, nil, "update-ref", "-m", "prodigy: the agent's commit", "HEAD", theirs, a.base)
	}
	if uerr != nil {
		return "", fmt.Errorf("take the agent's commit %s: %w", theirs, uerr)
	}
	return theirs, nil
}

// SyncIndex makes the engine's index of the reclaimed worktree describe
// the agent's commit theirs instead of the base it was handed (a two-tree
// read-tree: the file stats of unchanged entries are kept), so `git
// status` there shows what the agent left uncommitted. Reclaim does not do
// it (a git process per item): the pool's next reset does not need it,
// only a look at a failed attempt's worktree does.
func (a *AgentRepo) SyncIndex(ctx context.Context, theirs string) error {
	if theirs == "" || theirs == a.base {
		return nil
	}
	if _, err := a.c.run(ctx, a.dir, nil, nil, "read-tree", "-m", a.base, theirs); err != nil {
		if _, err := a.c.run(ctx, a.dir, nil, nil, "read-tree", theirs); err != nil {
			return fmt.Errorf("index of %s at %s: %w", a.dir, theirs, err)
		}
	}
	return nil
}

// restore deletes the agent's git directory (or whatever is at .git) and
// writes the engine's .git file back.
func (a *AgentRepo) restore() error {
	dotGit := filepath.Join(a.dir, ".git")
	if err := removeAll(dotGit); err != nil {
		return fmt.Errorf("remove the agent's repository at %s: %w", dotGit, err)
	}
	_ = removeAll(filepath.Join(a.dir, agentGitTmp))
	f, err := os.OpenFile(dotGit, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("restore %s: %w", dotGit, err)
	}
	_, werr := f.Write(a.dotGit)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("restore %s: %w", dotGit, werr)
	}
	return nil
}

// maxRefFile bounds what readAgentHead reads of one ref file, and
// maxPackedRefs the packed-refs file.
const (
	maxRefFile    = 4 << 10
	maxPackedRefs = 64 << 20
)

// readAgentHead resolves HEAD in an agent's git directory in-process: the
// directory itself must be a directory (not a symbolic link), ref files
// regular files of at most maxRefFile bytes, symbolic refs under refs/ and
// at most 5 deep, packed refs read line by line. It returns the commit id
// HEAD names (not checked to exist).
func readAgentHead(gitDir string) (string, error) {
	fi, err := os.Lstat(gitDir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the agent's repository at %s is gone or was replaced", gitDir)
	}
	name := "HEAD"
	for range 5 {
		b, err := readSmallFile(filepath.Join(gitDir, filepath.FromSlash(name)), maxRefFile)
		if errors.Is(err, os.ErrNotExist) && name != "HEAD" {
			return packedRef(gitDir, name)
		}
		if err != nil {
			return "", fmt.Errorf("read %s of the agent's repository: %w", name, err)
		}
		s := strings.TrimSpace(string(b))
		if target, ok := strings.CutPrefix(s, "ref: "); ok {
			if !strings.HasPrefix(target, "refs/") || !validRefName(target) {
				return "", fmt.Errorf("the agent's %s names an invalid ref", name)
			}
			name = target
			continue
		}
		if !isHexOID(s) {
			return "", fmt.Errorf("the agent's %s is not a commit id", name)
		}
		return s, nil
	}
	return "", errors.New("the agent's HEAD is a chain of symbolic refs more than 5 deep")
}

// readSmallFile reads a regular file (not a symbolic link) of at most max
// bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s is not a small regular file", filepath.Base(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// packedRef finds ref in the agent's packed-refs file.
func packedRef(gitDir, ref string) (string, error) {
	path := filepath.Join(gitDir, "packed-refs")
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("the agent's %s does not exist", ref)
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxPackedRefs {
		return "", errors.New("the agent's packed-refs is not a regular file of a sane size")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxPackedRefs))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isHexOID(oid) {
			return oid, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read the agent's packed-refs: %w", err)
	}
	return "", fmt.Errorf("the agent's %s does not exist", ref)
}

// importCommit copies the agent's commit and what it needs into the
// repository: in-process when its new objects are loose (importLoose),
// else with git (importObjects).
func (c *Client) importCommit(ctx context.Context, objects, theirs, base string) error {
	if c.objects != nil {
		err := c.objects.importLoose(objects, theirs)
		if !errors.Is(err, errNotLoose) {
			return err
		}
	}
	return c.importObjects(ctx, objects, theirs, base)
}

// importObjects copies into the repository the objects reachable from
// theirs and not from base, read from the repository plus objects (an
// agent's object directory, as an alternate of this process only):
// `git pack-objects --revs` piped into `git unpack-objects --strict`, which
// recomputes every object's id and refuses objects that name missing ones.
func (c *Client) importObjects(ctx context.Context, objects, theirs, base string) error {
	if !isHexOID(theirs) || !isHexOID(base) {
		return fmt.Errorf("import %q: not a commit id", theirs)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pack := c.cmdCtx(ctx, c.gitPath, "-C", c.top, "pack-objects", "--revs", "--stdout", "-q", "--window=0")
	pack.Env = append(append([]string(nil), c.env...), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+quoteAlternate(objects))
	pack.Stdin = strings.NewReader(theirs + "\n^" + base + "\n")
	unpack := c.cmdCtx(ctx, c.gitPath, "-C", c.top, "unpack-objects", "-q", "--strict")
	unpack.Env = c.env
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	var packErr, unpackErr bytes.Buffer
	pack.Stdout, pack.Stderr = pw, &packErr
	unpack.Stdin, unpack.Stderr = pr, &unpackErr
	if err := unpack.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("import the agent's objects: %w", err)
	}
	pr.Close()
	perr := pack.Run()
	pw.Close()
	uerr := unpack.Wait()
	// unpack-objects stops at the first bad object, and pack-objects then
	// dies writing to the closed pipe: the cause is unpack's.
	brokenPipe := perr != nil && strings.Contains(perr.Error(), "broken pipe")
	switch {
	case perr != nil && !(brokenPipe && uerr != nil):
		return fmt.Errorf("read the agent's commit %s: %w: %s", theirs, perr, strings.TrimSpace(packErr.String()))
	case uerr != nil:
		return fmt.Errorf("store the agent's objects: %w: %s", uerr, strings.TrimSpace(unpackErr.String()))
	}
	if ok, err := c.CommitExists(ctx, theirs); err != nil || !ok {
		return fmt.Errorf("the agent's commit %s is not in the repository after the import", theirs)
	}
	return nil
}

// handedOut reports whether abs is a worktree of this repository whose
// .git file was replaced by an agent's repository (HandOut without its
// Reclaim, e.g. after a crash): an administrative entry names abs/.git.
func (c *Client) handedOut(abs string) bool {
	entries, err := os.ReadDir(filepath.Join(c.commonDir, "worktrees"))
	if err != nil {
		return false
	}
	want := filepath.Join(abs, ".git")
	for _, e := range entries {
		b, err := readSmallFile(filepath.Join(c.commonDir, "worktrees", e.Name(), "gitdir"), maxRefFile)
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == want {
			return true
		}
	}
	return false
}

// chownTree makes owner the owner of dir and everything under it (symbolic
// links themselves, never their targets), dir itself last and mode 0700.
// While the walk runs dir is the engine's and closed (confine), so no
// other user — an earlier agent that owns files inside, or an agent sharing
// the uid — can swap a directory for a symbolic link under the walk and
// make root change the owner of a file elsewhere; and afterwards no other
// agent can enter the worktree.
func chownTree(dir string, owner Owner) error {
	if err := confine(dir); err != nil {
		return err
	}
	if err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return os.Lchown(p, owner.UID, owner.GID)
	}); err != nil {
		return err
	}
	return os.Lchown(dir, owner.UID, owner.GID)
}

// confine makes dir (not what is in it) the engine's, mode 0700: no other
// user can reach anything inside, whatever they own there. dir's parent
// is the engine's, so dir itself cannot be swapped.
func confine(dir string) error {
	if err := os.Lchown(dir, os.Geteuid(), os.Getegid()); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
