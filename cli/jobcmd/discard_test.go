package jobcmd_test

import (
	"os"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// TestDiscardRefusesARunningJobThenRemovesIt: a job whose lock is held is
// a usage error (exit 2) and keeps everything; once free, discard removes
// its worktrees and its state, and keeps the results branch (no
// --delete-branch).
func TestDiscardRefusesARunningJobThenRemovesIt(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `["a", "b"]`})
	wf := clitest.Workflow(t, `name: stop
map:
  input: items.json
  agent_template:
    - shell: exit 1
  error_policy:
    on_item_failure: stop
`)
	home := t.TempDir()
	if code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "held"); code != 1 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	p, err := jobstore.FindJob(home, "", "held")
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := jobstore.LockJob(p)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, home, "jobs", "discard", "held", "--yes")
	if want := "job held is running (its lock is held); stop it first"; code != 2 || !strings.Contains(errOut, want) {
		t.Fatalf("discard of a running job: exit %d\n%s\nwant exit 2 and %q", code, errOut, want)
	}
	if !jobstore.HasCheckpoint(p) {
		t.Fatal("the refused discard removed the job's state")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, home, "jobs", "discard", "held", "--yes")
	if code != 0 || !strings.Contains(errOut, "removed worktree "+p.ParentWorktree()) || !strings.Contains(errOut, "discarded job held") {
		t.Fatalf("discard: exit %d\n%s", code, errOut)
	}
	for _, path := range []string{p.JobStateDir(), p.WorktreeRoot()} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", path, err)
		}
	}
	if branches := gitopstest.Out(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/"); branches != "main\nprodigy/held" {
		t.Errorf("branches left: %q, want main and the results branch", branches)
	}
}
