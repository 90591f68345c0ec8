package main

import (
	"context"
	"encoding/json"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/actionapp"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

func TestUnknownSubcommandExitsTwoWithSuggestion(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"rn", "wf.yml"}, `unknown command "rn" for "prodigy-action"; did you mean run?`},
		{[]string{"dlq", "lst"}, `unknown command "lst" for "prodigy-action dlq"; did you mean list?`},
		{[]string{"dlq", "stat"}, `did you mean stats?`},
		{[]string{"worktree", "list"}, `unknown command "list" for "prodigy-action worktree"`},
		{[]string{"nonsense"}, `unknown command "nonsense" for "prodigy-action"`},
	}
	for _, tt := range tests {
		code, out, errOut := runDLQ(t, home, "", tt.args...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestBareGroupsPrintHelpAndExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"dlq"}, {"worktree"}, {}} {
		code, out, errOut := runDLQ(t, t.TempDir(), "", args...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, "Available Commands:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want help on stderr and exit 2", args, code, out, errOut)
		}
	}
	// --help itself is a request, not an error.
	if code, out, _ := runDLQ(t, t.TempDir(), "", "dlq", "--help"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("dlq --help: exit %d, %q", code, out)
	}
}

func TestDLQShowIsStats(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	_, stats, _ := runDLQ(t, home, "", "dlq", "stats", "--json")
	code, show, errOut := runDLQ(t, home, "", "dlq", "show", "--json")
	if code != 0 || show != stats || !strings.Contains(show, `"total_items":3`) {
		t.Errorf("dlq show: exit %d, %q (%s); stats printed %q", code, show, errOut, stats)
	}
}

// TestWorkflowIDAlias: Prodigy's --workflow-id selects the job wherever
// --job-id does.
func TestWorkflowIDAlias(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	seedDLQ(t, home, "other", "job-2", seedItem{id: "x", msg: "boom", daysAgo: 1})
	for _, args := range [][]string{
		{"dlq", "list", "--json"}, {"dlq", "stats", "--json"}, {"dlq", "analyze", "--json"}, {"dlq", "inspect", "x"},
		{"dlq", "export", "-"}, {"dlq", "purge", "--older-than-days", "30", "--yes"},
	} {
		code, out, errOut := runDLQ(t, home, "", append(args, "--workflow-id", "job-2")...)
		if code != 0 || (args[1] != "purge" && !strings.Contains(out, `"x"`) && !strings.Contains(out, `"job-2"`)) {
			t.Errorf("%v --workflow-id job-2: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if code, _, _ := runDLQ(t, home, "", append(args, "--workflow-id=job-2")...); code != 0 {
			t.Errorf("%v --workflow-id=job-2: exit %d", args, code)
		}
	}
}

func TestRunWorkflowIDAlias(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1}]`, "wf.yml": "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: \"true\"\n"})
	home := filepath.Join(t.TempDir(), "home")
	code, out, errOut := runCLI(t, home, "run", filepath.Join(repo, "wf.yml"), "--repo", repo, "--workflow-id", "wf-alias", "--json")
	var res struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.JobID != "wf-alias" {
		t.Fatalf("run --workflow-id: exit %d, %s\n%s", code, out, errOut)
	}
}

func TestDLQRetryMaxParallelAlias(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	// The alias reaches --parallel's variable: its check names --parallel.
	code, _, errOut := runDLQ(t, home, "", "dlq", "retry", "job-1", "--max-parallel", "-1")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, "--parallel must be positive") {
		t.Errorf("--max-parallel -1: exit %d, %q", code, errOut)
	}
	// A valid value parses and the command goes on to look for the job.
	code, _, errOut = runDLQ(t, home, "", "dlq", "retry", "job-1", "--max-parallel", "4", "--dry-run")
	if code != cmdutil.ExitUsage || strings.Contains(errOut, "unknown flag") || !strings.Contains(errOut, "job-1") {
		t.Errorf("--max-parallel 4: exit %d, %q", code, errOut)
	}
}

// TestCorruptRecordIsRuntimeFailure: a record that cannot be read is a
// failure of the command (1), not a usage error (2).
func TestCorruptRecordIsRuntimeFailure(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	file := filepath.Join(dlq.Dir(runner.Paths{Home: home, Repo: "proj", JobID: "job-1"}.DLQRoot(), "job-1"), "items", "item-1.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runDLQ(t, home, "", "dlq", "inspect", "item-1")
	if code != cmdutil.ExitFailed || out != "" || !strings.Contains(errOut, "error:") {
		t.Errorf("corrupt record: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
}

func TestExitCodeMapping(t *testing.T) {
	t.Parallel()
	tests := map[int]error{
		cmdutil.ExitOK:          nil,
		cmdutil.ExitUsage:       cmdutil.UsageErrorf("bad %s", "flag"),
		cmdutil.ExitFailed:      io.ErrUnexpectedEOF,
		cmdutil.ExitInterrupted: context.Canceled,
	}
	for want, err := range tests {
		if got := cmdutil.ExitCode(err); got != want {
			t.Errorf("cmdutil.ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestExecuteDispatchesToActionMode(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, io.Discard, func(k string) string { return env[k] })
	called := false
	f.ActionMain = func(_ context.Context, d actionapp.Deps) int {
		called = d.Getenv("GITHUB_ACTIONS") == "true"
		return 42
	}
	if code := execute(context.Background(), f, nil); !called || code != 42 {
		t.Errorf("called %v, code %d", called, code)
	}
}
