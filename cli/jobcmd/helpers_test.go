package jobcmd_test

import (
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string { return gitopstest.Repo(t, files) }

// runCLI runs the command tree in-process with PRODIGY_HOME and HOME at
// home and a fake clock (no real backoff sleeps).
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Home(home, args...)
}
