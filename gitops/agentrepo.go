package gitops

import (
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
//
// Here: the hand-out and the reclaim. Beside it: the agent repository's
// configuration (agentconfig.go), reading the agent's HEAD in-process
// (agenthead.go), importing the agent's objects (agentimport.go), and
// making the work tree another user's (agentowner.go).

// AgentRepo is a worktree handed to an agent as a repository of its own.
type AgentRepo struct {
	c      *Client
	dir    string // the work tree (absolute)
	dotGit []byte // the engine's .git file, restored by Reclaim
	base   string // the commit handed out
	owned  bool   // handed to another user: Reclaim confines dir first
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
	if err := c.buildAgentGit(tmp, admin, head, branch, config, owner == nil); err != nil {
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

// buildAgentGit writes the agent's git directory at gitDir: only the
// directories git needs before it makes its own (refs/tags, objects/pack
// and the rest are made by the agent's git when it writes there: each
// directory costs a tenth of a millisecond or more on a journalled disk).
// linkIndex hard-links the engine's index instead of copying it, for an
// agent that runs as the engine's user: git replaces an index by renaming
// a new file over it, never in place, so the engine's stays as it was
// (and such an agent can write the engine's files by absolute path
// anyway); an agent of another user gets a copy, as the hand-out makes
// everything in gitDir its own.
func (c *Client) buildAgentGit(gitDir, admin, head, branch string, config []byte, linkIndex bool) error {
	for _, d := range []string{"refs/heads", "objects/info", "info"} {
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
	}
	if !linkIndex {
		copies[filepath.Join(admin, "index")] = "index"
	} else if err := os.Link(filepath.Join(admin, "index"), filepath.Join(gitDir, "index")); err != nil && !errors.Is(err, os.ErrNotExist) {
		copies[filepath.Join(admin, "index")] = "index" // a file system without hard links
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
