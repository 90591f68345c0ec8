package jobcmd_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// A prompt-injected agent controls what Claude Code prints (its Bash tool
// can write anything to the transcript's stream): costs that are negative,
// strings, out of range or absurd must not switch the budget off, and no
// non-finite number may reach the checkpoint.
func TestHostileCostsFailClosed(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":"neg"},{"n":"str"},{"n":"inf"},{"n":"big"},{"n":"missing"},{"n":"big2"}]`})
	home := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	// The stand-in prints a hostile total_cost_usd chosen by the item.
	claude := clitest.FakeClaude(t, `echo run >> `+runs+`
case "${@: -1}" in
  *neg) cost=-10 ;;
  *str) cost='"0.01"' ;;
  *inf) cost=1e309 ;;
  *big|*big2) cost=1e308 ;;
  *missing) echo '{"type":"result","subtype":"success","is_error":false,"result":"ok"}'; exit 0 ;;
esac
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":'"$cost"'}'
`)
	wf := clitest.Workflow(t, `
name: hostile-costs
budget:
  max_cost_usd: 2
  item_max_cost_usd: 0.5
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "do ${item.n}"
`)
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "h1", "--json")
	r := clitest.DecodeCost(t, out)
	// Each untrusted cost counts as the item's whole $0.50 reservation:
	// four items fit in $2, the other two stay pending.
	if code != 1 || r.Status != "budget_exhausted" || r.Successful != 4 || r.Pending != 2 || math.Abs(r.CostUSD-2) > 1e-9 {
		t.Fatalf("exit %d, %+v\n%s", code, r, errOut)
	}
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), "run"); n != 4 {
		t.Fatalf("claude ran %d times against a $2 cap with $0.50 per item; want 4", n)
	}
	if !strings.Contains(errOut, "cost unknown") && !strings.Contains(out+errOut, "budget") {
		t.Errorf("no word of the untrusted costs:\n%s", errOut)
	}
	// The checkpoint is valid JSON with finite numbers, and a resume runs
	// nothing that already ran.
	cp, err := os.ReadFile(filepath.Join(home, "state", "repo", "jobs", "h1", "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(cp, &v); err != nil {
		t.Fatalf("checkpoint.json: %v", err)
	}
	if strings.Contains(string(cp), "Inf") || strings.Contains(string(cp), "NaN") || strings.Contains(string(cp), "e+308") {
		t.Fatalf("a non-finite or absurd number reached the checkpoint")
	}
	code, out, errOut = runCLIClaude(t, home, claude, "resume", "h1", "--json")
	if r := clitest.DecodeCost(t, out); code != 1 || r.Status != "budget_exhausted" || r.Successful != 4 {
		t.Fatalf("resume: exit %d %+v\n%s", code, r, errOut)
	}
	b, _ = os.ReadFile(runs)
	if n := strings.Count(string(b), "run"); n != 4 {
		t.Fatalf("resume re-ran paid items: %d runs", n)
	}
}

// One api_retry event asking for a year's wait must not stop the fleet for
// a year: the cool-down is clamped to rate_limit.max_cooldown.
func TestHostileRetryDelayIsClamped(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}]`})
	home := t.TempDir()
	dir := t.TempDir()
	claude := clitest.FakeClaude(t, `if [ ! -e `+dir+`/once ]; then
  touch `+dir+`/once
  echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":31536000000,"error_status":429,"error":"rate_limit"}'
  echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429","total_cost_usd":0}'
  exit 1
fi
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.01}'
`)
	wf := clitest.Workflow(t, `
name: hostile-delay
rate_limit:
  max_cooldown: 2m
map:
  input: items.json
  agent_template:
    - claude: "do ${item.n}"
`)
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--json")
	r := clitest.DecodeCost(t, out)
	if code != 0 || r.Successful != 1 {
		t.Fatalf("exit %d %+v\n%s", code, r, errOut)
	}
	if !strings.Contains(errOut, "clamped to rate_limit.max_cooldown (2m0s)") || !strings.Contains(errOut, "fleet cool-down 2m0s") {
		t.Fatalf("the year-long delay was not clamped to 2m:\n%s", errOut)
	}
}

// A rejected subscription limit (rate_limit_event) holds the fleet until
// it resets; one that resets later than rate_limit.max_cooldown stops the
// job with every unfinished item pending (none dead-lettered), naming the
// reset time.
func TestSubscriptionLimitResets(t *testing.T) {
	t.Parallel()
	// runCLIClaude's clock stands at 2026-01-01T00:00:00Z (1767225600).
	limited := func(resetsAt string, dir string) string {
		return clitest.FakeClaude(t, `if [ ! -e `+dir+`/once ]; then
  touch `+dir+`/once
  echo '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":`+resetsAt+`,"rateLimitType":"five_hour"},"uuid":"u","session_id":"s"}'
  echo '{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached","total_cost_usd":0}'
  exit 1
fi
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.01}'
`)
	}
	wf := clitest.Workflow(t, `
name: subscription
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "do ${item.n}"
`)
	t.Run("resets within max_cooldown: the fleet waits", func(t *testing.T) {
		t.Parallel()
		repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}]`})
		code, out, errOut := runCLIClaude(t, t.TempDir(), limited("1767226200", t.TempDir()), "run", wf, "--repo", repo, "--json")
		if r := clitest.DecodeCost(t, out); code != 0 || r.Successful != 2 {
			t.Fatalf("exit %d %+v\n%s", code, r, errOut)
		}
		if !strings.Contains(errOut, "fleet cool-down 10m0s") {
			t.Fatalf("no cool-down until the reset:\n%s", errOut)
		}
	})
	t.Run("resets after max_cooldown: pending, never the DLQ", func(t *testing.T) {
		t.Parallel()
		repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}, {"n": "c"}]`})
		code, out, errOut := runCLIClaude(t, t.TempDir(), limited("1767236400", t.TempDir()), "run", wf, "--repo", repo, "--json")
		r := clitest.DecodeCost(t, out)
		if code != 1 || r.Pending != 3 || r.Successful != 0 {
			t.Fatalf("exit %d %+v\n%s", code, r, errOut)
		}
		if !strings.Contains(errOut, "resets at 2026-01-01T03:00:00Z") || !strings.Contains(errOut, "resume") {
			t.Fatalf("the message does not name the reset time and resume:\n%s", errOut)
		}
	})
}
