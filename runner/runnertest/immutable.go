package runnertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireImmutableFiles skips the test when the filesystem or user cannot
// make files immutable (`chattr +i`): cleanup failures need a file nobody
// can delete.
func RequireImmutableFiles(t *testing.T) {
	t.Helper()
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", probe).CombinedOutput(); err != nil {
		t.Skipf("cannot make files immutable here (need root and chattr on ext4): %v %s", err, out)
	}
	_ = exec.Command("chattr", "-i", probe).Run()
}

// UnlockJunkAfter makes the immutable junk/locked files agents left under
// home's worktrees deletable again when the test ends.
func UnlockJunkAfter(t *testing.T, home string) {
	t.Cleanup(func() {
		matches, _ := filepath.Glob(filepath.Join(home, "worktrees", "*", "*", "*", "junk", "locked"))
		for _, m := range matches {
			_ = exec.Command("chattr", "-i", m).Run()
		}
	})
}
