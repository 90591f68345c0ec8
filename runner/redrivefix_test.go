package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// commitOnMain commits a file on the user's main branch.
func (r *testRepo) commitOnMain(name, content, msg string) {
	r.T.Helper()
	if err := os.WriteFile(filepath.Join(r.Dir, name), []byte(content), 0o644); err != nil {
		r.T.Fatal(err)
	}
	r.Git("add", name)
	r.Git("-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", msg)
}

func TestRedriveOntoBringsFixFromMain(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}, {"name": "b"}]`})
	wf := r.Workflow(`
name: onto
map:
  input: items.json
  agent_template:
    - shell: 'test -f fix.txt || { echo "fix.txt missing"; exit 1; }; echo ${item.name} > out-${item.name}.txt && git add . && git commit -qm ${item.name}'
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Failed != 2 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	r.commitOnMain("fix.txt", "fixed\n", "the fix")

	// Without --onto the redrive runs on the old results branch and fails again.
	o2, _, stderr2, _ := r.options(nil)
	res, err = retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Run: o2})
	if err != nil || res.Successful != 0 {
		t.Fatalf("redrive without --onto: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	o3, _, stderr3, _ := r.options(nil)
	o3.Onto = "main"
	res, err = retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Run: o3})
	if err != nil || res.Successful != 2 || res.DLQCount != 0 {
		t.Fatalf("redrive --onto main: %v %s\n%s", err, mustJSON(t, res), stderr3)
	}
	files := strings.Join(r.Files("prodigy/job-1"), " ")
	for _, want := range []string{"fix.txt", "out-a.txt", "out-b.txt"} {
		if !strings.Contains(files, want) {
			t.Errorf("results branch lacks %s: %s", want, files)
		}
	}
	if !strings.Contains(stderr3.String(), "merged main into prodigy/job-1") {
		t.Errorf("no merge message in:\n%s", stderr3)
	}
}

func TestRedriveOntoConflictChangesNothing(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`, "shared.txt": "base\n"})
	wf := r.Workflow(`
name: onto-conflict
setup:
  - shell: 'echo setup > shared.txt && git commit -qam "setup edits shared.txt"'
map:
  input: items.json
  agent_template:
    - shell: 'exit 1'
`)
	o, _, stderr, _ := r.options(wf)
	if res, err := r.run(o); err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	r.commitOnMain("shared.txt", "main\n", "main edits shared.txt")
	before := r.Git("rev-parse", "prodigy/job-1")
	o2, _, stderr2, _ := r.options(nil)
	o2.Onto = "main"
	res, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if !errors.Is(err, runner.ErrJobFailed) || runner.ExitCode(err) != 1 || res != nil {
		t.Fatalf("redrive --onto with a conflict: %v %v\n%s", err, res, stderr2)
	}
	if !strings.Contains(err.Error(), "shared.txt") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("error %q does not name the conflicting path", err)
	}
	if after := r.Git("rev-parse", "prodigy/job-1"); after != before {
		t.Errorf("results branch moved %s -> %s", before, after)
	}
	if n := len(r.DLQRecords("job-1")); n != 1 {
		t.Errorf("DLQ has %d records, want the 1 untouched", n)
	}
	o3, _, _, _ := r.options(nil)
	o3.Onto = "no-such-branch"
	_, err = retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", Run: o3})
	if runner.ExitCode(err) != 2 {
		t.Errorf("unknown --onto: %v (exit %d), want a usage error", err, runner.ExitCode(err))
	}
}

func TestRedriveUsesEditedWorkflow(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`})
	wf := r.Workflow(`
name: edited
map:
  input: items.json
  agent_template:
    - shell: 'echo broken; exit 1'
`)
	o, _, stderr, _ := r.options(wf)
	if res, err := r.run(o); err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	fixed := filepath.Join(t.TempDir(), "fixed.yml")
	if err := os.WriteFile(fixed, []byte(`
name: edited
map:
  input: items.json
  agent_template:
    - shell: 'echo ${item.name} > fixed-${item.name}.txt && git add . && git commit -qm fixed'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr2, hooks := r.options(nil)
	o2.WorkflowFile = fixed
	res, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil || res.Successful != 1 || res.DLQCount != 0 {
		t.Fatalf("redrive --workflow: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	if files := strings.Join(r.Files("prodigy/job-1"), " "); !strings.Contains(files, "fixed-a.txt") {
		t.Errorf("results branch lacks the edited workflow's output: %s", files)
	}
	if len(hooks.Warnings()) != 0 {
		t.Errorf("warnings: %q", hooks.Warnings())
	}
}

func TestRedriveFallsBackToStoredWorkflowWithWarning(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`})
	wf := r.Workflow(`
name: gone
map:
  input: items.json
  agent_template:
    - shell: 'exit 1'
`)
	o, _, stderr, _ := r.options(wf)
	if res, err := r.run(o); err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if err := os.Remove(wf.Path); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr2, hooks := r.options(nil)
	res, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Run: o2})
	if err != nil || res.Failed != 1 {
		t.Fatalf("redrive: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	if len(hooks.Warnings()) == 0 || !strings.Contains(hooks.Warnings()[0], "running the copy stored when job job-1 started") {
		t.Errorf("warnings = %q", hooks.Warnings())
	}
}
