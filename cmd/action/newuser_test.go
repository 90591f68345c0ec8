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

// TestBudgetStopSuggestsWhatIsReallyNeeded: with small item budgets the
// stop message prints cents and below as they are ($0.0369, not $0.04)
// and suggests the spend so far plus the pending items' reservations
// (here 0.0369 + 2 × 0.02), not a dollar per item; resuming with exactly
// the suggestion finishes the job.
func TestBudgetStopSuggestsWhatIsReallyNeeded(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":"a"},{"n":"b"},{"n":"c"},{"n":"d"},{"n":"e"}]`})
	home, dir := t.TempDir(), t.TempDir()
	claude := filepath.Join(dir, "claude")
	if err := os.WriteFile(claude, []byte(`#!/usr/bin/env bash
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.0123,"modelUsage":{"m":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := writeWorkflow(t, `name: small-budget
budget:
  max_cost_usd: 0.05
  item_max_cost_usd: 0.02
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "/do ${item.n}"
`)
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "small")
	want := "spent $0.0369 of the $0.05 job budget; 2 item(s) left pending, never started; continue with `resume small --max-cost-usd 0.0769`"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("run: exit %d, stderr lacks %q:\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = runCLIClaude(t, home, claude, "resume", "small", "--max-cost-usd", "0.0769", "--json")
	if r := decodeCost(t, out); code != 0 || r.Status != "completed" || r.Successful != 5 {
		t.Errorf("resume with the suggestion: exit %d\n%s\n%s", code, out, errOut)
	}
}
