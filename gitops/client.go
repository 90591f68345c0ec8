package gitops

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures a [Client]: every git process the Client starts gets
// exactly this environment, configuration and hooks setting.
type Options struct {
	// GitPath is the git executable; "" means "git" looked up in PATH (once,
	// when the Client is made).
	GitPath string
	// Env is the base environment of every git process, supplied already
	// scrubbed by the caller; nil means [SafeEnv](os.Environ()), never the
	// full process environment. Variables that point git at another
	// repository (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_COMMON_DIR,
	// GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES, GIT_PREFIX)
	// are always removed and GIT_TERMINAL_PROMPT=0 is always added.
	Env []string
	// Config is extra git configuration for every git process (for example
	// safe.directory for a checkout owned by another user). It is passed
	// through GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n, after
	// any such entries already in Env, never on the command line (where
	// other users could read it) and never through os.Setenv.
	Config []ConfigEntry
	// HooksPath is the core.hooksPath of every git process. "" means
	// [os.DevNull]: git then finds no hook at all, and there is no
	// directory an agent could plant a hook into. Set it only to a
	// directory nobody else can write to.
	HooksPath string
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

// ConfigEntry is one git configuration key and value.
type ConfigEntry struct {
	Key, Value string
}

// removedEnv are variables that would make `git -C dir` act on another
// repository than dir's.
var removedEnv = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true,
	"GIT_COMMON_DIR": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_PREFIX": true,
}

// safeEnvNames are the variables [SafeEnv] keeps: what git needs to find
// itself, its configuration, an identity, a locale, temporary files, a
// proxy and TLS roots, and its own tracing. safeEnvPrefixes adds families.
var safeEnvNames = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "LANGUAGE": true,
	"TZ": true, "TMPDIR": true, "XDG_CONFIG_HOME": true, "EMAIL": true,
	"GIT_EXEC_PATH": true, "GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true,
	"GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_COUNT": true, "GIT_CONFIG_PARAMETERS": true,
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_AUTHOR_DATE": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_COMMITTER_DATE": true,
	"GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true,
	"GIT_SSL_NO_VERIFY": true, "GIT_SSL_CAINFO": true, "GIT_SSL_CAPATH": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "GIT_SSH": true, "GIT_SSH_COMMAND": true,
	"GIT_SSH_VARIANT": true,
	"http_proxy":      true, "https_proxy": true, "no_proxy": true, "all_proxy": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "ALL_PROXY": true,
}

var safeEnvPrefixes = []string{"LC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE"}

// SafeEnv returns the entries of environ git needs, and nothing else: PATH,
// HOME, USER, LOGNAME, the locale (LANG, LANGUAGE, LC_*), TZ, TMPDIR,
// XDG_CONFIG_HOME, identity (GIT_AUTHOR_*, GIT_COMMITTER_*, EMAIL),
// configuration (GIT_CONFIG_*, GIT_EXEC_PATH), discovery limits, TLS roots,
// proxies, the ssh command (GIT_SSH*) and GIT_TRACE*. Tokens and secrets
// held in other variables (GITHUB_TOKEN, API keys, ACTIONS_RUNTIME_TOKEN,
// …) are dropped, and so is SSH_AUTH_SOCK (access to the user's ssh keys):
// a caller that pushes over ssh adds it to [Options.Env] itself. It is the
// default of [Options.Env].
func SafeEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		keep := safeEnvNames[k]
		for _, p := range safeEnvPrefixes {
			keep = keep || strings.HasPrefix(k, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// HTTPAuthConfig returns the configuration that makes git send token to
// serverURL ("https://github.com") the way actions/checkout does, as an
// http.<url>.extraheader. The first entry clears headers configured
// elsewhere (by checkout), so exactly one Authorization header is sent.
// Pass it to a single command ([Client.Push], [Client.Fetch]), not to
// [Options.Config].
func HTTPAuthConfig(serverURL, token string) []ConfigEntry {
	key := "http." + strings.TrimSuffix(serverURL, "/") + "/.extraheader"
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	return []ConfigEntry{{key, ""}, {key, "AUTHORIZATION: basic " + basic}}
}

// withConfig returns env with entries appended as GIT_CONFIG_KEY_n/VALUE_n
// after those env already declares, and GIT_CONFIG_COUNT updated.
func withConfig(env []string, entries []ConfigEntry) []string {
	if len(entries) == 0 {
		return env
	}
	n := 0
	out := make([]string, 0, len(env)+2*len(entries)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_COUNT="); ok {
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				n = c
			}
			continue
		}
		out = append(out, kv)
	}
	for _, e := range entries {
		out = append(out, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, e.Key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, e.Value))
		n++
	}
	return append(out, "GIT_CONFIG_COUNT="+strconv.Itoa(n))
}

// ConfigEnv returns environ with entries appended as GIT_CONFIG_* variables
// (see [Options.Config]). Callers use it to give other processes that run
// git (agents) the same extra configuration, for example safe.directory.
func ConfigEnv(environ []string, entries []ConfigEntry) []string {
	return withConfig(append([]string(nil), environ...), entries)
}

// devNull is os.DevNull opened once for reading, the stdin of every git
// process given none; nil if it cannot be opened (exec then opens it).
var devNull = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// runner starts git processes with one fixed environment.
type runner struct {
	gitPath string
	env     []string // complete environment of every git child
	base    []string // env without the final hooks/fsmonitor entries
	last    []ConfigEntry
	stderr  io.Writer
	cmdCtx  func(ctx context.Context, name string, args ...string) *exec.Cmd
}

func newRunner(o Options) runner {
	r := runner{gitPath: o.GitPath, stderr: o.Stderr, cmdCtx: o.commandContext}
	if r.gitPath == "" {
		// Looked up once: exec.Command would search PATH on every run.
		r.gitPath = "git"
		if p, err := exec.LookPath("git"); err == nil && filepath.IsAbs(p) {
			r.gitPath = p
		}
	}
	if r.cmdCtx == nil {
		r.cmdCtx = exec.CommandContext
	}
	base := o.Env
	if base == nil {
		base = SafeEnv(os.Environ())
	}
	hooks := o.HooksPath
	if hooks == "" {
		hooks = os.DevNull
	}
	env := make([]string, 0, len(base)+8)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if removedEnv[k] || k == "GIT_TERMINAL_PROMPT" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0")
	// core.hooksPath, core.fsmonitor and neutralConfig last: they
	// override the repository's own config, which an agent may have
	// rewritten.
	r.base = withConfig(env, o.Config)
	r.last = append([]ConfigEntry{{"core.hooksPath", hooks}, {"core.fsmonitor", "false"}}, neutralConfig...)
	r.env = withConfig(r.base, r.last)
	return r
}

// withCommandConfig returns a copy of r whose processes also get config,
// still ending with the hooks and fsmonitor entries so config cannot turn
// hooks back on.
func (r runner) withCommandConfig(config []ConfigEntry) runner {
	r.env = withConfig(withConfig(append([]string(nil), r.base...), config), r.last)
	return r
}

// run runs `git -C dir args...` with extra environment and optional stdin
// and returns its stdout; on a non-zero exit it still returns what git wrote
// to stdout, with a *[GitError].
func (r *runner) run(ctx context.Context, dir string, extraEnv []string, stdin io.Reader, args ...string) (string, error) {
	full := append([]string{"-C", dir}, args...)
	cmd := r.cmdCtx(ctx, r.gitPath, full...)
	cmd.Env = r.env
	if len(extraEnv) > 0 {
		cmd.Env = append(append([]string(nil), r.env...), extraEnv...)
	}
	cmd.Stdin = stdin
	if stdin == nil {
		if dn := devNull(); dn != nil {
			cmd.Stdin = dn // as exec would, without opening it for every run
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if r.stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, r.stderr)
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

// Client runs git for one repository. It is safe for concurrent use.
// Operations that change the worktree list or delete branches are serialised
// per repository (across all Clients of the same repository in the process),
// because `git worktree add/remove/prune` race with each other.
type Client struct {
	runner
	identity  Identity
	top       string // absolute top-level of the work tree New was given
	gitDir    string // absolute git dir of that work tree
	commonDir string // absolute common git dir (shared by all worktrees)
	objects   *objectReader

	admin *sync.Mutex // per-repository lock for worktree/branch administration

	idMu  sync.Mutex
	idEnv []string // cached IdentityEnv result
	idOK  bool

	identMu sync.Mutex
	ident   commitIdent // cached commitIdentity result
	identOK bool

	// agentCfg is the config file of agents' repositories (HandOut),
	// read once; under agentCfgMu.
	agentCfgMu sync.Mutex
	agentCfg   []byte

	mergeMu sync.Mutex
	merged  map[string]*mergedSet // per target ref, see MergeTree
	refs    refUpdater            // long-lived update-ref of MergeTree
	// beforeSwap, when set (tests), runs right before each ref update of
	// MergeTree.
	beforeSwap func()

	// cleaned is what CleanWorktree remembers of the worktrees it cleaned
	// (cleanskip.go).
	cleaned *cleanMemo
	// clock is the time of day (tests set it; nil is time.Now).
	clock func() time.Time
}

// now is the Client's time of day.
func (c *Client) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// New opens the repository containing repoDir (any directory inside its work
// tree, including a linked worktree). It runs one git process to find the
// top level and the git directories — so git's own rules apply
// (safe.directory ownership, ceiling directories) — and opens the object and
// ref store in-process with go-git. If repoDir is not in a git work tree the
// error wraps [ErrNotRepo] and names the directory; if repoDir does not
// exist it wraps fs.ErrNotExist.
func New(repoDir string, o Options) (*Client, error) {
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", repoDir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", repoDir, err)
	}
	c := &Client{runner: newRunner(o), identity: DefaultIdentity, merged: map[string]*mergedSet{}, cleaned: newCleanMemo()}
	if o.Identity != nil {
		c.identity = *o.Identity
	}
	out, err := c.runner.run(context.Background(), abs, []string{"LC_ALL=C"}, nil,
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
	c.objects = openObjects(c.commonDir)
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

// TopLevel returns the absolute top-level directory of the repository's work
// tree that [New] was given.
func (c *Client) TopLevel() string { return c.top }

// CommonDir returns the absolute git directory shared by all worktrees of the
// repository (".git" of the main worktree for a normal repository).
func (c *Client) CommonDir() string { return c.commonDir }

// Env returns the complete environment every git process of c gets
// (including the hooks and extra configuration of [Options]).
func (c *Client) Env() []string { return append([]string(nil), c.env...) }

// run runs `git -C dir args...`; an empty dir means the top level.
func (c *Client) run(ctx context.Context, dir string, extraEnv []string, stdin io.Reader, args ...string) (string, error) {
	if dir == "" {
		dir = c.top
	}
	return c.runner.run(ctx, dir, extraEnv, stdin, args...)
}

// exitCode returns the exit code of a *GitError, or -1.
func exitCode(err error) int {
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}
