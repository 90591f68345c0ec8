package jobcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/dlq"

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

// runCLIClaude is runCLI with claude as the command claude steps run.
func runCLIClaude(t *testing.T, home, claude string, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run{Home: home, Claude: claude}.Exec(args...)
}

// readRecord reads one DLQ record of a job.
func readRecord(t *testing.T, home, repo, jobID, itemID string) dlq.DeadLetteredItem {
	t.Helper()
	p := filepath.Join(home, "dlq", repo, jobID, "mapreduce", "dlq", jobID, "items", dlq.ItemFileName(itemID))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d dlq.DeadLetteredItem
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}
