// Package permtest helps tests whose processes run as other users (agents
// with runner.Agents.User) reach the directories a test made.
package permtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenUp makes every directory from each of dirs up to the system's
// temporary directory searchable and readable by other users (t.TempDir
// makes them 0700), as the state directory and checkout of agents running
// as users of their own must be.
func OpenUp(tb testing.TB, dirs ...string) {
	tb.Helper()
	tmp := filepath.Clean(os.TempDir())
	for _, d := range dirs {
		for p := filepath.Clean(d); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o755); err != nil && !os.IsNotExist(err) {
				tb.Fatal(err)
			}
		}
	}
}
