package actionapp

import (
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/redact/redacttest"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string { return gitopstest.Repo(t, files) }

func gitOut(t *testing.T, dir string, args ...string) string { return gitopstest.Out(t, dir, args...) }

// Secrets of the redaction tests (made up). The ghp token reaches the step
// under a name that does not look secret: only its shape gives it away.
const (
	testGHP       = "ghp_" + "R3dact0nTest0123456789abcdefghijKLMN"
	testAPISecret = "api-secret-value-42"
)

// assertNoSecrets fails the test if text holds one of the test secrets.
func assertNoSecrets(t *testing.T, where, text string) {
	t.Helper()
	redacttest.AssertNoSecrets(t, where, text, testGHP, testAPISecret)
}

// assertNoSecretFiles checks every file under dir (worktrees aside) and
// returns how many it read.
func assertNoSecretFiles(t *testing.T, dir string) int {
	t.Helper()
	return redacttest.AssertNoSecretFiles(t, dir, testGHP, testAPISecret)
}
