package jobcmd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

func TestRunFirstLineLabelsAndDirtyCheckoutWarnings(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name":"alpha"},{"name":"beta"}]`})
	// Uncommitted edits: the input differs from HEAD, plus an untracked file.
	if err := os.WriteFile(filepath.Join(repo, "items.json"), []byte(`[{"name":"edited"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := clitest.Workflow(t, `name: labels
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: `+clitest.CommitItem+`
`)
	home := t.TempDir()
	code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "dirty")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	lines := strings.Split(errOut, "\n")
	if lines[0] != "job dirty · results branch prodigy/dirty · 2 items" {
		t.Errorf("first line = %q", lines[0])
	}
	for _, want := range []string{
		"WARN map.input items.json differs from HEAD (modified): the items come from HEAD's version",
		"WARN your checkout " + repo + " has 2 uncommitted change(s); agents start from HEAD and do not see them: Modified: items.json; Untracked: notes.txt",
		`✓ item_0 {"name":"alpha"} succeeded`, // agents saw HEAD's items, labelled
		`✓ item_1 {"name":"beta"} succeeded`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	// With setup the count is not known up front: the line still comes first.
	wf2 := clitest.Workflow(t, `name: with-setup
setup:
  - shell: echo '["x"]' > gen.json
map:
  input: gen.json
  agent_template:
    - shell: `+clitest.CommitItem+`
`)
	code, _, errOut = runCLI(t, home, "run", wf2, "--repo", repo, "--job-id", "setup1")
	if code != 0 || !strings.HasPrefix(errOut, "job setup1 · results branch prodigy/setup1 · items listed after setup\n") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestZeroItemsWarnLoudlyAndRequireItemsFails(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `{"findings":[{"sev":1},{"sev":2}]}`})
	wf := clitest.Workflow(t, `name: none
map:
  input: items.json
  json_path: "$.findings[*]"
  filter: "sev > 5"
  agent_template:
    - shell: "true"
reduce:
  - shell: echo reduced
`)
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "zero", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, `WARN !!! map.input "items.json" selected 0 items (after json_path "$.findings[*]", filter "sev > 5"): nothing will run`) {
		t.Errorf("no loud warning:\n%s", errOut)
	}
	if !strings.Contains(out, `"total": 0`) {
		t.Errorf("result: %s", out)
	}

	code, _, errOut = runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "zero2", "--require-items")
	if code != 2 || !strings.Contains(errOut, "selected 0 items") || !strings.Contains(errOut, "--require-items") {
		t.Errorf("--require-items: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "state", "repo", "jobs", "zero2")); !os.IsNotExist(err) {
		t.Errorf("a failed --require-items run left state: %v", err)
	}
	if b := gitopstest.Out(t, repo, "branch", "--list", "prodigy/zero2"); b != "" {
		t.Errorf("results branch left: %s", b)
	}
}

func TestIDFieldInputErrorsNameBothItems(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"path":"a.go"},{"path":"b.go"},{"path":"a.go","n":2}]`})
	wf := clitest.Workflow(t, `name: dup
map:
  input: items.json
  id_field: path
  agent_template:
    - shell: "true"
`)
	home := t.TempDir()
	code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo)
	want := `map.id_field "path": items 0 ({"path":"a.go"}) and 2 ({"n":2,"path":"a.go"}) share the id "a.go"`
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, want 2 and %q:\n%s", code, want, errOut)
	}
	code, _, errOut = runCLI(t, home, "validate", clitest.Workflow(t, "name: x\nmap:\n  input: i.json\n  id_field: \"a..b\"\n  agent_template:\n    - shell: \"true\"\n"))
	if code != 2 || !strings.Contains(errOut, `invalid id_field "a..b"`) {
		t.Errorf("validate of a bad id_field: exit %d %s", code, errOut)
	}
}

func TestClaudeFailuresGroupWell(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"k":"is_error"},{"k":"exit"},{"k":"nocommit"}]`})
	claude := clitest.FakeClaude(t, `prompt="${@: -1}"
case "$prompt" in
  is_error) echo '{"type":"result","subtype":"success","is_error":true,"result":"Credit balance too low"}' ;;
  exit)
    # The event and the stderr line race; the message must not depend on it.
    echo '{"type":"assistant","message":"thinking"}'
    echo 'claude: fatal: model overloaded' >&2
    echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: overloaded"}'
    exit 2 ;;
  nocommit) echo '{"type":"result","subtype":"success","is_error":false,"result":"done, nothing to change"}' ;;
esac
`)
	wf := clitest.Workflow(t, `name: claude-fail
map:
  input: items.json
  id_field: k
  agent_template:
    - claude: "${item.k}"
      commit_required: true
`)
	home := t.TempDir()
	runClaude := func(jobID string) {
		code, _, errOut := clitest.Run{Home: home, Env: map[string]string{"PRODIGY_CLAUDE_COMMAND": claude}}.Exec("run", wf, "--repo", repo, "--job-id", jobID)
		if code != 0 {
			t.Fatalf("run exit %d\n%s", code, errOut)
		}
	}
	runClaude("c1")
	runClaude("c2")
	for _, job := range []string{"c1", "c2"} {
		d := readRecord(t, home, "repo", job, "is_error")
		f := d.FailureHistory[len(d.FailureHistory)-1]
		if f.ErrorType.Kind == dlq.CommandFailed || f.JSONLogLocation == nil {
			t.Errorf("is_error with exit 0: type %v (an invented exit code?), log %v", f.ErrorType, f.JSONLogLocation)
		}
		if f.ErrorMessage != "claude step 1 reported an error: Credit balance too low" {
			t.Errorf("is_error message = %q", f.ErrorMessage)
		}
		d = readRecord(t, home, "repo", job, "exit")
		f = d.FailureHistory[len(d.FailureHistory)-1]
		if f.ErrorMessage != "API Error: overloaded [claude step 1 exited with code 2, subtype error_during_execution]" || f.JSONLogLocation == nil ||
			f.ErrorType != dlq.CommandFailedWith(2) {
			t.Errorf("exit 2: %q %v %v", f.ErrorMessage, f.ErrorType, f.JSONLogLocation)
		}
		d = readRecord(t, home, "repo", job, "nocommit")
		f = d.FailureHistory[len(d.FailureHistory)-1]
		if f.ErrorType.Kind != dlq.CommitValidationFailed || f.JSONLogLocation == nil {
			t.Errorf("commit_required after claude: %v, json_log_location %v", f.ErrorType, f.JSONLogLocation)
		} else if _, err := os.Stat(*f.JSONLogLocation); err != nil {
			t.Errorf("json_log_location does not exist: %v", err)
		}
	}
	// Same cause, same signature across runs.
	if a, b := readRecord(t, home, "repo", "c1", "exit").ErrorSignature, readRecord(t, home, "repo", "c2", "exit").ErrorSignature; a != b {
		t.Errorf("signatures differ: %q vs %q", a, b)
	}
	// dlq retry --dry-run works with claude gone.
	if err := os.Remove(claude); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := clitest.Run{Home: home, Env: map[string]string{"PRODIGY_CLAUDE_COMMAND": claude}}.Exec("dlq", "retry", "c1", "--dry-run", "--force")
	if code != 0 || !strings.Contains(out, "is_error\tis_error") || !strings.Contains(out, "exit\texit") {
		t.Errorf("dry run without claude: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestArtifactsSayWhetherTheyExistAndCleanOrphanedOffersThem(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `["good","bad"]`})
	for _, preserve := range []bool{false, true} {
		wf := clitest.Workflow(t, fmt.Sprintf(`name: artifacts
preserve_failed_worktrees: %t
map:
  input: items.json
  agent_template:
    - shell: |
        [ "${item}" != bad ] || exit 5
        `+clitest.CommitItem+`
`, preserve))
		home := t.TempDir()
		job := fmt.Sprintf("art-%t", preserve)
		if code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", job); code != 0 {
			t.Fatalf("run exit %d\n%s", code, errOut)
		}
		d := readRecord(t, home, "repo", job, "item_1")
		logs, wt := "", d.WorktreeArtifacts
		if wt == nil || wt.ErrorLogs == nil {
			t.Fatalf("no worktree_artifacts/error_logs: %+v", wt)
		}
		logs = *wt.ErrorLogs
		_, statErr := os.Stat(wt.WorktreePath)
		branch := gitopstest.Out(t, repo, "branch", "--list", wt.BranchName)
		if !preserve {
			if !strings.HasPrefix(logs, "[worktree_artifacts] removed: ") || branch != "" {
				t.Errorf("not preserved: error_logs %q, branch %q", logs, branch)
			}
			continue
		}
		if !strings.HasPrefix(logs, "[worktree_artifacts] preserved: worktree "+wt.WorktreePath) || statErr != nil || branch == "" {
			t.Fatalf("preserved: error_logs %q, stat %v, branch %q", logs, statErr, branch)
		}
		// The job completed, so clean-orphaned offers the preserved worktree.
		code, out, errOut := runCLI(t, home, "worktree", "clean-orphaned", "--dry-run")
		if code != 0 || !strings.Contains(out, wt.WorktreePath) || !strings.Contains(out, "its job completed") {
			t.Fatalf("clean-orphaned --dry-run: exit %d\n%s%s", code, out, errOut)
		}
		if code, _, errOut := runCLI(t, home, "worktree", "clean-orphaned", "--force"); code != 0 {
			t.Fatalf("clean-orphaned: exit %d %s", code, errOut)
		}
		if _, err := os.Stat(wt.WorktreePath); !os.IsNotExist(err) {
			t.Errorf("preserved worktree still there: %v", err)
		}
		if b := gitopstest.Out(t, repo, "branch", "--list", wt.BranchName); b != "" {
			t.Errorf("its branch is still there: %s", b)
		}
	}
}

// TestJobsDiscardRemovesPreservedWorktrees: discard takes the preserved
// failed worktree and agent branches with the state, keeps the results
// branch without --delete-branch, and asks first.
func TestJobsDiscardRemovesPreservedWorktrees(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `["good","bad"]`})
	wf := clitest.Workflow(t, `name: discard
preserve_failed_worktrees: true
map:
  input: items.json
  agent_template:
    - shell: |
        [ "${item}" != bad ] || exit 5
        `+clitest.CommitItem+`
`)
	home := t.TempDir()
	if code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "dj"); code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	wt := readRecord(t, home, "repo", "dj", "item_1").WorktreeArtifacts
	if _, err := os.Stat(wt.WorktreePath); err != nil {
		t.Fatalf("preserved worktree missing: %v", err)
	}
	// No answer on stdin: refused, nothing removed.
	if code, _, errOut := runCLI(t, home, "jobs", "discard", "dj"); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("discard without --yes: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, home, "jobs", "discard", "nope", "--yes"); code != 2 || !strings.Contains(errOut, "job nope not found") {
		t.Errorf("discard of an unknown job: exit %d %s", code, errOut)
	}
	code, _, errOut := runCLI(t, home, "jobs", "discard", "dj", "--yes")
	if code != 0 || !strings.Contains(errOut, "removed worktree "+wt.WorktreePath) || !strings.Contains(errOut, "deleted branch "+wt.BranchName) {
		t.Fatalf("discard: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(wt.WorktreePath); !os.IsNotExist(err) {
		t.Errorf("preserved worktree still there: %v", err)
	}
	if b := gitopstest.Out(t, repo, "branch", "--list", "prodigy-agent/*"); b != "" {
		t.Errorf("agent branches left: %s", b)
	}
	if b := gitopstest.Out(t, repo, "branch", "--list", "prodigy/dj"); b == "" {
		t.Errorf("results branch deleted without --delete-branch")
	}
	if code, out, _ := runCLI(t, home, "jobs", "--all", "--json"); code != 0 || !strings.Contains(out, `"jobs": []`) {
		t.Errorf("jobs after discard: %s", out)
	}
}
