package gitops

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNewNotRepo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := New(dir, Options{Env: isolatedEnv()})
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("New(plain dir) error = %v, want ErrNotRepo", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory %s", err, dir)
	}
}

func TestNewMissingDir(t *testing.T) {
	t.Parallel()
	_, err := New(filepath.Join(t.TempDir(), "nope"), Options{Env: isolatedEnv()})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("New(missing dir) error = %v, want fs.ErrNotExist", err)
	}
}

func TestNewInsideGitDirIsNotRepo(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	_, err := New(filepath.Join(dir, ".git"), Options{Env: isolatedEnv()})
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("New(.git) error = %v, want ErrNotRepo", err)
	}
}

func TestNewResolvesTopLevel(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, map[string]string{"sub/deep/f.txt": "x"}, true)
	top, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := New(filepath.Join(dir, "sub", "deep"), Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.TopLevel(); got != top {
		t.Errorf("TopLevel() from subdir = %q, want %q", got, top)
	}
	if got, want := c.CommonDir(), filepath.Join(top, ".git"); got != want {
		t.Errorf("CommonDir() = %q, want %q", got, want)
	}

	// A linked worktree is its own top level but shares the common dir.
	wt := filepath.Join(t.TempDir(), "wt")
	if err := c.WorktreeAdd(bg(), wt, "side", "HEAD"); err != nil {
		t.Fatal(err)
	}
	lc, err := New(wt, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	wtTop, _ := filepath.EvalSymlinks(wt)
	if lc.TopLevel() != wtTop || lc.CommonDir() != c.CommonDir() {
		t.Errorf("linked worktree: TopLevel=%q CommonDir=%q, want %q and %q", lc.TopLevel(), lc.CommonDir(), wtTop, c.CommonDir())
	}
}

func TestRunReturnsGitError(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	_, err := c.run(bg(), dir, nil, nil, "rev-parse", "--verify", "no-such-ref")
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("Run error = %v (%T), want *GitError", err, err)
	}
	if ge.ExitCode != 128 || ge.Dir != dir || !strings.Contains(ge.Stderr, "Needed a single revision") ||
		!slices.Equal(ge.Args, []string{"rev-parse", "--verify", "no-such-ref"}) {
		t.Errorf("GitError = %+v", ge)
	}
	out, err := c.run(bg(), "", nil, nil, "rev-parse", "--show-toplevel")
	if err != nil || strings.TrimSpace(out) != c.TopLevel() {
		t.Errorf("Run(\"\") = %q, %v; want the top level", out, err)
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	_, c := newRepo(t, nil, true)
	ctx, cancel := context.WithCancel(bg())
	cancel()
	_, err := c.run(ctx, "", nil, nil, "status")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run(cancelled) = %v, want context.Canceled", err)
	}
}

// TestRunEnvAndArgv checks, with a fake command constructor, that git runs
// with -C dir, without repository-redirecting variables and with prompts
// off. The fake runs `env` instead of `git var` so the test sees the real
// environment of the child process.
func TestRunEnvAndArgv(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	var mu sync.Mutex
	var argv []string
	fake := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		if slices.Contains(args, "var") {
			mu.Lock()
			argv = append([]string{name}, args...)
			mu.Unlock()
			return exec.CommandContext(ctx, "env")
		}
		return exec.CommandContext(ctx, name, args...)
	}
	env := append(isolatedEnv(), "GIT_DIR=/nonexistent", "GIT_WORK_TREE=/nonexistent", "GIT_TERMINAL_PROMPT=1")
	c, err := New(dir, Options{Env: env, commandContext: fake})
	if err != nil {
		t.Fatalf("New with GIT_DIR in env: %v (GIT_DIR must be stripped)", err)
	}
	out, err := c.run(bg(), dir, nil, nil, "var", "-l")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	for _, kv := range got {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GIT_DIR" || k == "GIT_WORK_TREE" || kv == "GIT_TERMINAL_PROMPT=1" {
			t.Errorf("child env has %s", kv)
		}
	}
	if !slices.Contains(got, "GIT_TERMINAL_PROMPT=0") {
		t.Error("child env lacks GIT_TERMINAL_PROMPT=0")
	}
	mu.Lock()
	defer mu.Unlock()
	gitBin, err := exec.LookPath("git") // looked up once, when the Client is made
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{gitBin, "-C", dir, "var", "-l"}; !slices.Equal(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
}

func TestStderrCopy(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	var buf strings.Builder
	var mu sync.Mutex
	c, err := New(dir, Options{Env: isolatedEnv(), Stderr: lockedWriter{&mu, &buf}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.run(bg(), "", nil, nil, "rev-parse", "--verify", "nope")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "Needed a single revision") {
		t.Errorf("Options.Stderr got %q, want git's stderr", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestOptionsGitPath(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	_, err := New(dir, Options{Env: isolatedEnv(), GitPath: filepath.Join(t.TempDir(), "no-git")})
	var ge *GitError
	if !errors.As(err, &ge) || ge.ExitCode != -1 || ge.Err == nil {
		t.Fatalf("New with missing git = %v, want a GitError that did not start", err)
	}
	if _, statErr := os.Stat(dir); statErr != nil {
		t.Fatal(statErr)
	}
}
