package jobcmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

func TestBudgetExhaustedCLI(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}, {"n": "c"}]`})
	home := t.TempDir()
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude")
	script := `#!/usr/bin/env bash
args=("$@")
for ((i=0; i<${#args[@]}; i++)); do
  [[ "${args[$i]}" == --max-budget-usd ]] && echo "${args[$((i+1))]}" >> "` + dir + `/budgets"
done
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.8,"modelUsage":{"m":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}'
`
	if err := os.WriteFile(claude, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "wf.yml")
	if err := os.WriteFile(wf, []byte(`
name: budget-cli
budget:
  max_cost_usd: 2
  item_max_cost_usd: 1
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "/do ${item.n}"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "j1", "--json")
	if code != 1 {
		t.Fatalf("run exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	r := clitest.DecodeCost(t, out)
	// a and b reserve $1 each; after them $1.60 is spent and c's $1 does not fit.
	if r.Status != "budget_exhausted" || r.Pending != 1 || r.Successful != 2 || r.CostUSD != 1.6 || r.MaxCostUSD != 2 {
		t.Fatalf("run --json = %s", out)
	}
	if !strings.Contains(errOut, "spent $1.60 of the $2.00 job budget") || !strings.Contains(errOut, "resume j1 --max-cost-usd") {
		t.Errorf("stderr does not say what was spent and how to continue:\n%s", errOut)
	}
	code, out, _ = runCLIClaude(t, home, claude, "status", "j1", "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.CostUSD != 1.6 || r.Items[0].CostUSD != 0.8 || r.Items[2].State != "pending" || r.Items[2].CostUSD != 0 {
		t.Errorf("status --json (exit %d) = %s", code, out)
	}
	code, out, _ = runCLIClaude(t, home, claude, "status", "j1")
	if code != 0 || !strings.Contains(out, "cost:           $1.6000 of the $2.00 budget") || !strings.Contains(out, "budget_exhausted") {
		t.Errorf("status (exit %d):\n%s", code, out)
	}
	code, out, errOut = runCLIClaude(t, home, claude, "resume", "j1", "--max-cost-usd", "3", "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.Status != "completed" || r.Successful != 3 || r.CostUSD != 2.4 || r.MaxCostUSD != 3 {
		t.Fatalf("resume --max-cost-usd (exit %d) = %s\n%s", code, out, errOut)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "budgets"))
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "1.0000 1.0000 1.0000" {
		t.Errorf("--max-budget-usd values = %q", got)
	}
	if code, _, errOut := runCLIClaude(t, home, claude, "resume", "j1", "--max-cost-usd", "-1"); code != 2 {
		t.Errorf("negative --max-cost-usd: exit %d\n%s", code, errOut)
	}
}
