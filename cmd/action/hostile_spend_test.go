package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// kill -9 after Claude Code has spent but before the checkpoint knows: the
// item's reservation counts as spent on resume, so what was really spent
// stays within the job budget.
func TestKillAfterSpendKeepsTheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process and kills it")
	}
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}, {"n": "c"}, {"n": "d"}]`})
	home := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	claude := clitest.FakeClaude(t, `echo run >> `+runs+`
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.8}'
`)
	wf := clitest.Workflow(t, `
name: kill-after-spend
budget:
  max_cost_usd: 2
  item_max_cost_usd: 1
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "do ${item.n}"
`)
	cmd := exec.Command(os.Args[0], "run", wf, "--repo", repo, "--job-id", "k1")
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home, "PRODIGY_CLAUDE_COMMAND="+claude, "PRODIGY_TEST_FAULT=claude-done:2:KILL")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("the run was not killed:\n%s", stderr.String())
	}
	code, out, errOut := clitest.Run{Home: home, Claude: claude}.Exec("resume", "k1", "--json")
	r := clitest.DecodeCost(t, out)
	b, _ := os.ReadFile(runs)
	spent := 0.8 * float64(strings.Count(string(b), "run"))
	if spent > 2+1e-9 {
		t.Fatalf("$%.2f really spent against a $2 cap (resume exit %d, %+v)\n%s", spent, code, r, errOut)
	}
	if r.CostUSD < spent-1e-9 || r.CostUSD > 2+1e-9 {
		t.Fatalf("recorded $%.2f, really spent $%.2f", r.CostUSD, spent)
	}
	if !strings.Contains(errOut, "its reservation counts as spent") {
		t.Errorf("resume does not say the crashed item's reservation counts:\n%s", errOut)
	}
}
