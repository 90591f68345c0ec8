package actionapp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["README.md"] = "x\n"
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Secrets of the redaction tests (made up). The ghp token reaches the step
// under a name that does not look secret: only its shape gives it away.
const (
	testGHP       = "ghp_" + "R3dact0nTest0123456789abcdefghijKLMN"
	testAPISecret = "api-secret-value-42"
)

// assertNoSecrets fails the test if text holds one of the test secrets.
func assertNoSecrets(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range []string{testGHP, testAPISecret} {
		if strings.Contains(text, s) {
			t.Errorf("%s holds secret %q:\n%s", where, s, text)
		}
	}
}

// assertNoSecretFiles checks every file under dir (worktrees aside) and
// returns how many it read.
func assertNoSecretFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"worktrees"+string(filepath.Separator)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		assertNoSecrets(t, p, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
