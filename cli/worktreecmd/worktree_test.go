package worktreecmd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// TestCleanOrphanedOffersWorktreesOfDiscardedJobs: a job whose state was
// removed by hand leaves its parent worktree; clean-orphaned finds it.
func TestCleanOrphanedOffersWorktreesOfDiscardedJobs(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `["a"]`})
	wf := clitest.Workflow(t, `name: stop
map:
  input: items.json
  agent_template:
    - shell: exit 1
  error_policy:
    on_item_failure: stop
`)
	home := t.TempDir()
	if code, _, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "gone"); code != 1 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	parent := filepath.Join(home, "worktrees", "repo", "gone", "parent")
	// A failed job keeps its parent for resume: not offered.
	if _, out, _ := clitest.Home(home, "worktree", "clean-orphaned", "--dry-run"); strings.Contains(out, parent) {
		t.Errorf("parent of a resumable job offered:\n%s", out)
	}
	if err := os.RemoveAll(filepath.Join(home, "state")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := clitest.Home(home, "worktree", "clean-orphaned", "--dry-run")
	if code != 0 || !regexp.MustCompile(regexp.QuoteMeta(parent)+`\s+job gone .*its job no longer exists`).MatchString(out) {
		t.Fatalf("clean-orphaned --dry-run: %d\n%s", code, out)
	}
	if code, _, errOut := clitest.Home(home, "worktree", "clean-orphaned", "--force"); code != 0 {
		t.Fatalf("clean-orphaned: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("parent still there: %v", err)
	}
	if wts := gitopstest.Out(t, repo, "worktree", "list"); strings.Contains(wts, parent) {
		t.Errorf("git still lists it: %s", wts)
	}
}
