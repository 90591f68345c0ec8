package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnUntrackedWorkflowIsNoUncommittedChange: the workflow file a user
// just wrote into their repository (untracked) is read from the checkout
// as it is, so it alone is no reason to warn; another untracked file still
// is, and the warning does not list the workflow.
func TestOwnUntrackedWorkflowIsNoUncommittedChange(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"name":"alpha"}]`})
	wf := filepath.Join(repo, "workflow.yml")
	if err := os.WriteFile(wf, []byte(`name: own
map:
  input: items.json
  agent_template:
    - shell: "true"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "own1")
	if code != 0 || strings.Contains(errOut, "uncommitted") || strings.Contains(errOut, "WARN") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	// Relative to the repository, run from inside it, the same.
	t.Chdir(repo)
	code, _, errOut = runCLI(t, home, "run", "workflow.yml", "--job-id", "own2")
	if code != 0 || strings.Contains(errOut, "uncommitted") {
		t.Errorf("relative path: exit %d, stderr:\n%s", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, home, "run", wf, "--job-id", "own3")
	if code != 0 || !strings.Contains(errOut, "has 1 uncommitted change(s); agents start from HEAD and do not see them: Untracked: notes.txt\n") {
		t.Errorf("another untracked file: exit %d, stderr:\n%s", code, errOut)
	}
}
