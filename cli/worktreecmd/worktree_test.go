package worktreecmd_test

import (
	"fmt"
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

func TestCleanOrphanedCLI(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	wt := filepath.Join(t.TempDir(), "orphan")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(home, "orphaned_worktrees", "repo", "job-x.json")
	if err := os.MkdirAll(filepath.Dir(reg), 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"job_id":"job-x","repo":"repo","repo_dir":"","orphaned_worktrees":[{"path":%q,"agent_id":"agent-1","item_id":"item_0","failed_at":"2026-01-01T00:00:00Z","error":"busy"}]}`, wt)
	if err := os.WriteFile(reg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := clitest.Home(home, "worktree", "clean-orphaned", "--dry-run")
	if code != 0 || !strings.Contains(out, wt) {
		t.Fatalf("dry run: %d %s", code, out)
	}
	// No confirmation (empty stdin) → nothing removed, exit 2 (as dlq clear).
	if code, _, _ := clitest.Home(home, "worktree", "clean-orphaned", "job-x"); code != 2 {
		t.Fatalf("unconfirmed clean exit %d", code)
	}
	if _, err := os.Stat(wt); err != nil {
		t.Fatalf("removed without confirmation")
	}
	if code, _, errOut := clitest.Home(home, "worktree", "clean-orphaned", "job-x", "--force"); code != 0 {
		t.Fatalf("forced clean: %d %s", code, errOut)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("orphan not removed")
	}
	if _, err := os.Stat(reg); !os.IsNotExist(err) {
		t.Fatalf("registry not removed")
	}
}
