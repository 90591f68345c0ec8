package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Options configures a [Client]. The zero value runs "git" from PATH with the
// process environment.
type Options struct {
	// GitPath is the git executable; "" means "git" looked up in PATH.
	GitPath string
	// Env is the base environment of every git process; nil means
	// os.Environ(). Variables that point git at another repository (GIT_DIR,
	// GIT_WORK_TREE, GIT_INDEX_FILE, GIT_COMMON_DIR, GIT_OBJECT_DIRECTORY,
	// GIT_ALTERNATE_OBJECT_DIRECTORIES, GIT_PREFIX) are always removed and
	// GIT_TERMINAL_PROMPT=0 is always added.
	Env []string
	// Stderr, if set, receives a copy of everything git writes to stderr
	// (for debug logs). Errors carry their stderr regardless.
	Stderr io.Writer
	// Identity, if set, is the author/committer used for merge commits when
	// the repository has no user.name/user.email configured, instead of
	// [DefaultIdentity]. See [Client.IdentityEnv].
	Identity *Identity

	// commandContext replaces exec.CommandContext in tests.
	commandContext func(ctx context.Context, name string, args ...string) *exec.Cmd
}

// Client runs git for one repository. It is safe for concurrent use.
// Operations that change the worktree list or delete branches are serialised
// per repository (across all Clients of the same repository in the process),
// because `git worktree add/remove/prune` race with each other.
type Client struct {
	gitPath   string
	env       []string
	stderr    io.Writer
	identity  Identity
	top       string // absolute top-level of the work tree New was given
	gitDir    string // absolute git dir of that work tree
	commonDir string // absolute common git dir (shared by all worktrees)
	refs      refStore
	cmdCtx    func(ctx context.Context, name string, args ...string) *exec.Cmd

	admin *sync.Mutex // per-repository lock for worktree/branch administration

	idMu  sync.Mutex
	idEnv []string // cached IdentityEnv result
	idOK  bool
}

// removedEnv are variables that would make `git -C dir` act on another
// repository than dir's.
var removedEnv = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true,
	"GIT_COMMON_DIR": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_PREFIX": true,
}

// New opens the repository containing repoDir (any directory inside its work
// tree, including a linked worktree). It runs one git process to find the
// top level and the common git directory. If repoDir is not in a git work
// tree the error wraps [ErrNotRepo] and names the directory; if repoDir does
// not exist it wraps fs.ErrNotExist.
func New(repoDir string, o Options) (*Client, error) {
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", repoDir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", repoDir, err)
	}
	c := &Client{
		gitPath:  o.GitPath,
		stderr:   o.Stderr,
		identity: DefaultIdentity,
		cmdCtx:   o.commandContext,
	}
	if c.gitPath == "" {
		c.gitPath = "git"
	}
	if c.cmdCtx == nil {
		c.cmdCtx = exec.CommandContext
	}
	if o.Identity != nil {
		c.identity = *o.Identity
	}
	c.env = cleanEnv(o.Env)
	out, err := c.run(context.Background(), abs, []string{"LC_ALL=C"}, nil,
		"rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return nil, fmt.Errorf("open repository %s: %w", repoDir, ErrNotRepo)
		}
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "must be run in a work tree") {
			return nil, fmt.Errorf("open repository %s: no work tree: %w", repoDir, ErrNotRepo)
		}
		return nil, fmt.Errorf("open repository %s: %w", repoDir, err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || lines[0] == "" {
		// A bare repository or a .git directory has no top level.
		return nil, fmt.Errorf("open repository %s: no work tree: %w", repoDir, ErrNotRepo)
	}
	c.top, c.gitDir, c.commonDir = filepath.Clean(lines[0]), filepath.Clean(lines[1]), filepath.Clean(lines[2])
	c.refs = newRefStore(c.gitDir, c.commonDir)
	c.admin = repoLock(c.commonDir)
	return c, nil
}

var (
	repoLocksMu sync.Mutex
	repoLocks   = map[string]*sync.Mutex{}
)

// repoLock returns the process-wide administration lock of a repository,
// keyed by its common git dir.
func repoLock(commonDir string) *sync.Mutex {
	repoLocksMu.Lock()
	defer repoLocksMu.Unlock()
	m, ok := repoLocks[commonDir]
	if !ok {
		m = &sync.Mutex{}
		repoLocks[commonDir] = m
	}
	return m
}

func cleanEnv(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if removedEnv[k] || k == "GIT_TERMINAL_PROMPT" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0")
}

// TopLevel returns the absolute top-level directory of the repository's work
// tree that [New] was given.
func (c *Client) TopLevel() string { return c.top }

// CommonDir returns the absolute git directory shared by all worktrees of the
// repository (".git" of the main worktree for a normal repository).
func (c *Client) CommonDir() string { return c.commonDir }

// Run runs `git -C dir args...` and returns its stdout. An empty dir means
// the top level. A failure is a *[GitError] carrying the arguments, exit code
// and stderr.
func (c *Client) Run(ctx context.Context, dir string, args ...string) (string, error) {
	return c.run(ctx, dir, nil, nil, args...)
}

// run runs git in dir with extra environment and optional stdin. On a
// non-zero exit it still returns what git wrote to stdout.
func (c *Client) run(ctx context.Context, dir string, extraEnv []string, stdin io.Reader, args ...string) (string, error) {
	if dir == "" {
		dir = c.top
	}
	full := append([]string{"-C", dir}, args...)
	cmd := c.cmdCtx(ctx, c.gitPath, full...)
	cmd.Env = c.env
	if len(extraEnv) > 0 {
		cmd.Env = append(append([]string(nil), c.env...), extraEnv...)
	}
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if c.stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, c.stderr)
	}
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	ge := &GitError{Args: args, Dir: dir, ExitCode: -1, Stderr: strings.TrimSpace(stderr.String())}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		ge.ExitCode = ee.ExitCode()
	}
	switch {
	case ctx.Err() != nil:
		ge.Err = context.Cause(ctx)
	case ge.ExitCode < 0:
		ge.Err = err
	}
	return stdout.String(), ge
}

// exitCode returns the exit code of a *GitError, or -1.
func exitCode(err error) int {
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}
