package gitops

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testIdentity is used by the tests' own setup commits, never by the code
// under test.
var testIdentity = []string{
	"GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=tester@example.com",
	"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=tester@example.com",
}

// isolatedEnv is the process environment without any git or identity
// variables, and with global and system git config switched off: a fresh CI
// runner with no identity.
func isolatedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "EMAIL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
}

// git runs git in dir for test setup (with a test identity) and returns its
// trimmed stdout, failing the test on error.
func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	return gitIn(tb, dir, "", args...)
}

func gitIn(tb testing.TB, dir, stdin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(isolatedEnv(), testIdentity...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		tb.Fatalf("git %v in %s: %v: %s", args, dir, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// writeFiles writes path→content under dir, creating directories.
func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// commitFiles writes files in dir and commits all changes; returns the commit.
func commitFiles(tb testing.TB, dir, msg string, files map[string]string) string {
	tb.Helper()
	writeFiles(tb, dir, files)
	git(tb, dir, "add", "-A")
	git(tb, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return git(tb, dir, "rev-parse", "HEAD")
}

// newRepo creates a repository on branch main with one commit of files and,
// if withIdentity, a repository-local user.name/user.email. It returns the
// repository dir and a Client with an isolated environment.
func newRepo(tb testing.TB, files map[string]string, withIdentity bool) (string, *Client) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	git(tb, dir, "init", "-q", "-b", "main")
	if withIdentity {
		git(tb, dir, "config", "user.name", "Repo User")
		git(tb, dir, "config", "user.email", "repo.user@example.com")
	}
	if files == nil {
		files = map[string]string{"README.md": "hello\n"}
	}
	commitFiles(tb, dir, "initial", files)
	c, err := New(dir, Options{Env: isolatedEnv()})
	if err != nil {
		tb.Fatal(err)
	}
	return dir, c
}

// readFile returns the content of dir/p, or "<missing>".
func readFile(tb testing.TB, dir, p string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// snapshot captures HEAD, the index (as a tree) and porcelain status of a
// worktree, to assert it did not change.
type snapshot struct{ head, index, status string }

func takeSnapshot(tb testing.TB, dir string) snapshot {
	tb.Helper()
	return snapshot{
		head:   git(tb, dir, "rev-parse", "HEAD"),
		index:  git(tb, dir, "write-tree"),
		status: git(tb, dir, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
	}
}

func bg() context.Context { return context.Background() }
