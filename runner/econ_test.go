package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// standInClaude writes a stand-in `claude`: it records the arguments it
// got (its --max-budget-usd in dir/budgets as "NAME CALL BUDGET"), reads
// its cost from dir/cost, and on the calls listed in dir/ratelimit
// ("NAME CALL" lines) emits api_retry and rate_limit events and fails. The
// prompt's last word names the item. Calls are counted per name.
func standInClaude(t *testing.T, cost string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cost"), []byte(cost), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/usr/bin/env bash
dir=%q
budget=none
args=("$@")
for ((i=0; i<${#args[@]}; i++)); do
  [[ "${args[$i]}" == --max-budget-usd ]] && budget="${args[$((i+1))]}"
done
prompt="${@: -1}"
name="${prompt##* }"
n=$(( $(cat "$dir/calls-$name" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$dir/calls-$name"
echo "$name $n $budget" >> "$dir/budgets"
cost=$(cat "$dir/cost")
echo '{"type":"system","subtype":"init","session_id":"s"}'
if grep -qx "$name $n" "$dir/ratelimit" 2>/dev/null; then
  echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":7000,"error_status":429,"error":"rate_limit"}'
  echo '{"type":"assistant","message":{"content":[]},"error":"rate_limit","parent_tool_use_id":null}'
  echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: Request rejected (429) rate_limit","total_cost_usd":0.01,"num_turns":1}'
  exit 1
fi
if [[ -e "$dir/overspend" ]]; then
  echo '{"type":"result","subtype":"error_max_budget_usd","is_error":true,"total_cost_usd":'"$budget"',"num_turns":3,"errors":[]}'
  exit 1
fi
echo "$name" > "claude-$name.txt" && git add "claude-$name.txt" && git commit -qm "claude: $name"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":2,"total_cost_usd":'"$cost"',"usage":{"input_tokens":90,"output_tokens":10,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"claude-x":{"inputTokens":100,"outputTokens":20,"cacheReadInputTokens":5,"cacheCreationInputTokens":1,"costUSD":'"$cost"'}}}'
`, dir)
	path = filepath.Join(dir, "claude")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return strings.Split(s, "\n")
	}
	return nil
}

// eventTypes reads events.jsonl of job-1 as (type, raw event) pairs.
func jobEvents(t *testing.T, r *testRepo) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.Home, "events", "repo", "job-1", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.Event)
	}
	return out
}

const econItems = `[{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]`

func TestBudgetRunsOutMidJob(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": econItems})
	claude, dir := standInClaude(t, "1.5")
	wf := r.Workflow(`
name: budget
budget:
  max_cost_usd: 5
  item_max_cost_usd: 2
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - claude: "/fix ${item.name}"
`)
	o, _, stderr, _ := r.options(wf)
	o.ClaudeCommand = claude
	res, err := r.run(o)
	if !errors.Is(err, runner.ErrBudgetExhausted) || runner.ExitCode(err) != 1 {
		t.Fatalf("run err = %v, want budget exhausted (exit 1)\n%s", err, stderr)
	}
	if res.Status != runner.StatusBudgetExhausted || res.Successful != 3 || res.Pending != 1 || res.Failed != 0 {
		t.Fatalf("result = %s", mustJSON(t, res))
	}
	if res.CostUSD != 4.5 || res.CostUSD > 5 {
		t.Errorf("cost_usd = %v, want 4.5 (within the $5 budget)", res.CostUSD)
	}
	for _, want := range []string{"spent $4.50 of the $5.00 job budget", "resume job-1 --max-cost-usd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	var pending string
	for _, it := range res.Items {
		switch it.State {
		case runner.ItemPending:
			pending = it.ItemID
			if it.Attempts != 0 || it.CostUSD != 0 {
				t.Errorf("pending item %+v was started", it)
			}
		case runner.ItemMerged:
			if it.CostUSD != 1.5 || it.Tokens == nil || it.Tokens.Input != 100 || it.Tokens.Output != 20 || it.Tokens.CacheRead != 5 {
				t.Errorf("item %s cost %v tokens %+v", it.ItemID, it.CostUSD, it.Tokens)
			}
		}
	}
	// Every claude step got what was left of its item's $2 reservation;
	// the pending item never ran.
	calls := readLines(t, filepath.Join(dir, "budgets"))
	if len(calls) != 3 {
		t.Fatalf("claude calls = %q, want 3", calls)
	}
	for _, c := range calls {
		if !strings.HasSuffix(c, " 1 2.0000") {
			t.Errorf("call %q: want --max-budget-usd 2.0000", c)
		}
	}
	if len(r.DLQRecords("job-1")) != 0 {
		t.Error("an item was dead-lettered")
	}
	for _, ev := range jobEvents(t, r) {
		if ev["event_type"] == "agent_completed" && ev["cost_usd"] != 1.5 {
			t.Errorf("agent_completed cost_usd = %v", ev["cost_usd"])
		}
		if ev["event_type"] == "agent_started" && strings.Contains(fmt.Sprint(ev["item_id"]), pending) {
			t.Errorf("the pending item %s was started: %v", pending, ev)
		}
	}

	// A larger budget finishes the job; the spend of the first run counts.
	o2, _, stderr2, _ := r.options(nil)
	o2.ClaudeCommand = claude
	o2.MaxCostUSD = 7
	res, err = resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 4 || res.Pending != 0 {
		t.Fatalf("resume: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	if res.CostUSD != 6 {
		t.Errorf("cost after resume = %v, want 6", res.CostUSD)
	}
	if n := len(readLines(t, filepath.Join(dir, "budgets"))); n != 4 {
		t.Errorf("claude ran %d times in all, want 4", n)
	}
}

func TestItemBudgetStopsClaudeWithoutRetry(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`})
	claude, dir := standInClaude(t, "1")
	if err := os.WriteFile(filepath.Join(dir, "overspend"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wf := r.Workflow(`
name: budget
budget:
  item_max_cost_usd: 0.75
map:
  input: items.json
  agent_template:
    - claude: "/fix ${item.name}"
  retry_config:
    attempts: 3
`)
	o, _, stderr, _ := r.options(wf)
	o.ClaudeCommand = claude
	res, err := r.run(o)
	if err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	it := res.Items[0]
	if it.Attempts != 1 || it.ErrorType != "ResourceExhausted" || it.CostUSD != 0.75 {
		t.Errorf("item = %+v, want one ResourceExhausted attempt costing 0.75", it)
	}
	if calls := readLines(t, filepath.Join(dir, "budgets")); len(calls) != 1 || calls[0] != "a 1 0.7500" {
		t.Errorf("claude calls = %q", calls)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, r.DLQRecords("job-1")["item_0"])), &rec); err != nil {
		t.Fatal(err)
	}
	for k := range rec {
		if strings.Contains(k, "cost") {
			t.Errorf("the DLQ record gained a field %q", k)
		}
	}

	// A redrive starts a new item budget: the step gets the whole $0.75
	// again; the job's cost keeps the first run's spend.
	if err := os.Remove(filepath.Join(dir, "overspend")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cost"), []byte("0.5"), 0o644); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr2, _ := r.options(nil)
	o2.ClaudeCommand = claude
	res, err = retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Run: o2})
	if err != nil || res.Successful != 1 || res.CostUSD != 1.25 {
		t.Fatalf("redrive: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	if calls := readLines(t, filepath.Join(dir, "budgets")); len(calls) != 2 || calls[1] != "a 2 0.7500" {
		t.Errorf("claude calls = %q", calls)
	}
}

func TestRateLimitedItemDoesNotSpendAttempts(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}, {"name": "b"}, {"name": "c"}]`})
	claude, dir := standInClaude(t, "0.25")
	if err := os.WriteFile(filepath.Join(dir, "ratelimit"), []byte("a 1\na 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := r.Workflow(`
name: ratelimit
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - claude: "/fix ${item.name}"
  retry_config:
    attempts: 1
`)
	o, clock, stderr, _ := r.options(wf)
	o.ClaudeCommand = claude
	res, err := r.run(o)
	if err != nil || res.Successful != 3 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	for _, it := range res.Items {
		if it.ItemID == "item_0" && (it.Attempts != 1 || it.CostUSD != 0.27) {
			t.Errorf("item a = %+v, want 1 attempt costing 0.27 (two rate-limited runs at 0.01)", it)
		}
	}
	if res.FleetCooldowns != 2 {
		t.Errorf("fleet_cooldowns = %d, want 2", res.FleetCooldowns)
	}
	if got := readLines(t, filepath.Join(dir, "calls-a")); len(got) != 1 || got[0] != "3" {
		t.Errorf("claude ran %v times for a, want 3", got)
	}
	// The provider's retry delay (7s) is what the fleet waited.
	var waited bool
	for _, d := range clock.Sleeps() {
		waited = waited || d.Seconds() == 7
	}
	if !waited {
		t.Errorf("sleeps = %v, want a 7s cool-down", clock.Sleeps())
	}
	on, started, ended := false, 0, 0
	for _, ev := range jobEvents(t, r) {
		switch ev["event_type"] {
		case "fleet_cooldown_started":
			if on || ev["reason"] != "claude: rate_limit" || ev["until"] == nil {
				t.Errorf("cool-down event %v (another one on: %v)", ev, on)
			}
			on = true
			started++
		case "fleet_cooldown_ended":
			on = false
			ended++
		case "agent_started":
			if on {
				t.Errorf("agent started during a cool-down: %v", ev)
			}
		}
	}
	if started != 2 || ended != 2 {
		t.Errorf("cool-downs started %d ended %d, want 2 and 2", started, ended)
	}
	if len(r.DLQRecords("job-1")) != 0 {
		t.Error("a rate-limited item was dead-lettered")
	}
}

func TestShellRateLimitOn(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`})
	count := filepath.Join(t.TempDir(), "count")
	wf := r.Workflow(fmt.Sprintf(`
name: shell-ratelimit
rate_limit:
  max_waits: 1
  rate_limit_on:
    - {exit_code: 75}
map:
  input: items.json
  agent_template:
    - shell: 'n=$(( $(cat %[1]s 2>/dev/null || echo 0) + 1 )); echo $n > %[1]s; [ $n -ge 3 ] || exit 75'
  retry_config:
    attempts: 2
    backoff: {fixed: {delay: 3s}}
`, count))
	o, clock, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	// Run 1 was rate-limited (not counted, one wait), run 2 was attempt 1
	// failing again past max_waits (counted), run 3 attempt 2 succeeded.
	if it := res.Items[0]; it.Attempts != 2 || res.FleetCooldowns != 1 {
		t.Errorf("attempts %d, cool-downs %d; want 2 and 1\n%s", it.Attempts, res.FleetCooldowns, stderr)
	}
	if s := clock.Sleeps(); len(s) == 0 || s[0].Seconds() != 3 {
		t.Errorf("sleeps = %v, want the item's 3s backoff as the cool-down", s)
	}
}

func TestSetupAndReduceSpendCountsForTheJob(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "a"}]`})
	claude, dir := standInClaude(t, "0.5")
	wf := r.Workflow(`
name: phases
setup:
  - claude: "/prepare s"
map:
  input: items.json
  agent_template:
    - claude: "/fix ${item.name}"
reduce:
  - claude: "/summarise r"
`)
	o, _, stderr, _ := r.options(wf)
	o.ClaudeCommand = claude
	res, err := r.run(o)
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if res.CostUSD != 1.5 || res.Items[0].CostUSD != 0.5 {
		t.Errorf("job cost %v (want 1.5: setup, item, reduce), item cost %v", res.CostUSD, res.Items[0].CostUSD)
	}
	// Phases have no item budget: no --max-budget-usd.
	for _, c := range readLines(t, filepath.Join(dir, "budgets")) {
		if !strings.HasSuffix(c, " none") {
			t.Errorf("call %q got a budget", c)
		}
	}
}
