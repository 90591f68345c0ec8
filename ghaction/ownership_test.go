package ghaction

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreOwnership runs as root (CI does): it makes a real git
// repository owned by 1001, lets "the container" (this root process) add
// objects, refs, logs and a linked worktree, then gives everything back and
// proves that uid 1001 can commit, delete the branch, gc and remove it.
func TestRestoreOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create files owned by another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // t.TempDir's dirs are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(base, 1001, 1001); err != nil { // like the runner's _work directory
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "safe.directory=*"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	git(ws, "init", "-q", "-b", "main")
	git(ws, "commit", "-q", "--allow-empty", "-m", "base")
	if err := RestoreOwnership(ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	// What the container does as root.
	git(ws, "worktree", "add", "-q", "-b", "results", filepath.Join(ws, ".wt"))
	if err := os.WriteFile(filepath.Join(ws, ".wt", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(filepath.Join(ws, ".wt"), "add", "f")
	git(filepath.Join(ws, ".wt"), "commit", "-q", "-m", "agent")
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := RestoreOwnership(ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	// The symlink itself changed, not its target.
	if uid, _, _ := Owner("/etc/passwd"); uid != 0 {
		t.Fatalf("/etc/passwd now belongs to %d", uid)
	}
	if uid, gid, _ := Owner(filepath.Join(ws, "link")); uid != 1001 || gid != 1001 {
		t.Errorf("symlink owned by %d:%d", uid, gid)
	}
	var rootOwned []string
	_ = filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if uid, _, _ := Owner(p); uid != 1001 {
				rootOwned = append(rootOwned, p)
			}
		}
		return nil
	})
	if len(rootOwned) > 0 {
		t.Fatalf("still not 1001's: %v", rootOwned)
	}
	// A later step as the runner user.
	asRunner := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(setpriv, append([]string{"--reuid", "1001", "--regid", "1001", "--clear-groups"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=r", "GIT_AUTHOR_EMAIL=r@r", "GIT_COMMITTER_NAME=r", "GIT_COMMITTER_EMAIL=r@r"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("as uid 1001: %v: %v\n%s", args, err, out)
		}
	}
	asRunner(ws, "git", "worktree", "remove", "--force", ".wt")
	asRunner(ws, "git", "commit", "-q", "--allow-empty", "-m", "runner")
	asRunner(ws, "git", "branch", "-D", "results")
	asRunner(ws, "git", "gc", "-q", "--prune=now")
	asRunner(base, "rm", "-rf", ws)
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
}

func TestRestoreOwnershipMissingRootAndIdempotent(t *testing.T) {
	if err := RestoreOwnership(filepath.Join(t.TempDir(), "nope"), os.Getuid(), os.Getgid()); err != nil {
		t.Fatalf("missing root: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Already owned by us: nothing to change, so it works unprivileged too.
	if err := RestoreOwnership(dir, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	var warned []string
	RestoreRunnerOwnership(func(f string, a ...any) { warned = append(warned, f) }, "", filepath.Join(dir, "missing"), dir)
	if len(warned) != 0 {
		t.Errorf("warnings %v", warned)
	}
}
