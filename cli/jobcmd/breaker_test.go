package jobcmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

type stormResult struct {
	Status     string `json:"status"`
	Successful int    `json:"successful"`
	Failed     int    `json:"failed"`
	Pending    int    `json:"pending"`
	DLQCount   int    `json:"dlq_count"`
	Error      string `json:"error"`
	Storm      *struct {
		Signature   string   `json:"signature"`
		Items       []string `json:"items"`
		Consecutive int      `json:"consecutive"`
	} `json:"storm"`
}

// TestFailureStormBreaker: a dependency breaks after 20 of 200 items. The
// default breaker (10 consecutive failures with one signature) stops
// launching: the running agents finish, the unstarted items stay pending
// (never run, never dead-lettered), the job ends stopped_by_breaker with
// exit 3 naming the signature, the items and the commands that continue;
// after the fix one command finishes every item.
func TestFailureStormBreaker(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": clitest.NumberedItems(200)})
	dir := t.TempDir()
	broken, runs, fixed := filepath.Join(dir, "broken"), filepath.Join(dir, "runs"), filepath.Join(dir, "fixed")
	wf := clitest.Workflow(t, fmt.Sprintf(`
name: storm
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        echo "${item.n}" >> %[2]q
        if [ "${item.n}" = 20 ] && [ ! -e %[3]q ]; then touch %[1]q; fi
        if [ -e %[1]q ]; then echo "npm ERR! 503 Service Unavailable: registry.npmjs.org (item ${item.n})" >&2; exit 1; fi
        echo "${item.n}" > "f${item.n}.txt" && git add -A && git commit -qm "item ${item.n}"
`, broken, runs, fixed))
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "storm", "--json")
	var r stormResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 3 || r.Status != "stopped_by_breaker" || r.Storm == nil || r.Storm.Consecutive != 10 || len(r.Storm.Items) != 10 {
		t.Fatalf("exit %d, %+v, want exit 3, stopped_by_breaker and a storm of 10\n%s", code, r, errOut)
	}
	if !strings.HasPrefix(r.Storm.Signature, "CommandFailed::") || !strings.Contains(r.Storm.Signature, "Service Unavailable") {
		t.Errorf("storm signature %q", r.Storm.Signature)
	}
	// Within the threshold: the 10 of the storm and the other agent
	// running when it tripped, plus the failures (at most 9) that item 19,
	// running beside them and succeeding last, cut off the storm's run;
	// everything else pending, never run.
	ran, _ := os.ReadFile(runs)
	started := len(strings.Fields(string(ran)))
	if r.Failed < 10 || r.Failed > 20 || r.DLQCount != r.Failed || r.Successful+r.Failed+r.Pending != 200 || started != r.Successful+r.Failed || r.Pending < 200-22-20 {
		t.Fatalf("%d started, %+v: want the storm's 10 (+1 in flight) failed, the rest pending and never started", started, r)
	}
	for _, want := range []string{"10 items in a row failed with CommandFailed::", "left pending, never started",
		"dlq retry storm --signature '" + r.Storm.Signature + "' --sample 1", "resume storm --include-dlq"} {
		if !strings.Contains(r.Error+errOut, want) {
			t.Errorf("the error lacks %q:\n%s", want, r.Error)
		}
	}
	if _, st, _ := runCLI(t, home, "status", "storm", "--json"); !strings.Contains(st, `"status": "stopped_by_breaker"`) {
		t.Errorf("status:\n%.400s", st)
	}
	events, _ := filepath.Glob(filepath.Join(home, "events", "*", "storm", "events.jsonl"))
	if len(events) != 1 {
		t.Fatalf("events files: %v", events)
	}
	if data, _ := os.ReadFile(events[0]); !strings.Contains(string(data), `"event_type":"breaker_tripped"`) {
		t.Errorf("no breaker_tripped event")
	}
	// The fix; one command finishes the failed and the pending items.
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, home, "resume", "storm", "--include-dlq", "--json")
	r = stormResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Status != "completed" || r.Successful != 200 || r.DLQCount != 0 {
		t.Fatalf("resume after the fix: exit %d, %+v, %v\n%s", code, r, err, errOut)
	}
}

// TestBreakerIgnoresOverloads: items failing because the provider is
// overloaded (Claude Code's api_retry 529s, then its give-up) say nothing
// about the items: the breaker does not trip on them (the fleet cool-down
// holds them instead), and `circuit_breaker: false` turns it off.
func TestBreakerIgnoresOverloads(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": clitest.NumberedItems(14)})
	claude := clitest.FakeClaude(t, `echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1,"error_status":529,"error":"overloaded"}'
echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: Repeated 529 Overloaded errors","api_error_status":529}'
exit 1
`)
	wf := clitest.Workflow(t, `
name: overload
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - claude: "do ${item.n}"
`)
	home := t.TempDir()
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "busy", "--json")
	var r stormResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, errOut)
	}
	if r.Status == "stopped_by_breaker" || r.Storm != nil || code == 3 {
		t.Fatalf("the breaker tripped on overloads: exit %d, %+v\n%s", code, r, errOut)
	}
	// Off: 14 identical failures, no storm.
	off := clitest.Workflow(t, `
name: off
error_policy:
  circuit_breaker: false
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "same failure" >&2; exit 1
`)
	code, out, errOut = runCLI(t, home, "run", off, "--repo", repo, "--job-id", "off", "--json")
	r = stormResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Failed != 14 || r.Storm != nil {
		t.Fatalf("breaker off: exit %d, %+v, %v\n%s", code, r, err, errOut)
	}
}

// TestCostPerMergedItem: every attempt's cost counts, failed ones too,
// and is split by outcome: what the merged items cost (their failed
// attempts included), what was lost to items that ended in the DLQ, and
// the job's cost per merged item; a redrive reports what recovering its
// items cost (execution_cost_usd) and moves their spend to merged.
func TestCostPerMergedItem(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":"a"},{"n":"b"},{"n":"c"},{"n":"d"}]`})
	dir := t.TempDir()
	fixed := filepath.Join(dir, "fixed")
	// a, b: $0.10 and done. c: fails once ($0.05), then $0.10. d: fails
	// ($0.05 each attempt) until fixed, then $0.20.
	claude := clitest.FakeClaude(t, fmt.Sprintf(`item="${@: -1}"; item="${item#do }"
n=$(cat %[1]q/"$item" 2>/dev/null || echo 0); echo $((n+1)) > %[1]q/"$item"
fail() { echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"tool broke","total_cost_usd":0.05}'; exit 1; }
case "$item" in
  c) [ "$n" = 0 ] && fail; cost=0.10 ;;
  d) [ -e %[2]q ] || fail; cost=0.20 ;;
  *) cost=0.10 ;;
esac
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":'"$cost"'}'
`, dir, fixed))
	wf := clitest.Workflow(t, `
name: costs
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "do ${item.n}"
error_policy:
  retry_config:
    attempts: 2
    backoff: fixed
    initial_delay: 1ms
`)
	home := t.TempDir()
	type costs struct {
		Status           string  `json:"status"`
		Successful       int     `json:"successful"`
		CostUSD          float64 `json:"cost_usd"`
		MergedCostUSD    float64 `json:"merged_cost_usd"`
		FailedCostUSD    float64 `json:"failed_cost_usd"`
		CostPerMergedUSD float64 `json:"cost_per_merged_usd"`
		ExecutionCostUSD float64 `json:"execution_cost_usd"`
	}
	decode := func(code int, out, errOut string) costs {
		t.Helper()
		var c costs
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("exit %d: %v\n%s", code, err, errOut)
		}
		return c
	}
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "costs", "--json")
	got := decode(code, out, errOut)
	want := costs{Status: "completed", Successful: 3, CostUSD: 0.45, MergedCostUSD: 0.35, FailedCostUSD: 0.10, CostPerMergedUSD: 0.15, ExecutionCostUSD: 0.45}
	if got != want {
		t.Fatalf("run: %+v\nwant %+v\n%s", got, want, errOut)
	}
	if !strings.Contains(errOut, "spent $0.45 (this run $0.45): merged items $0.35, lost to failures $0.10, $0.15 per merged item") {
		t.Errorf("the summary line lacks the split:\n%s", errOut)
	}
	if _, st, _ := runCLI(t, home, "status", "costs"); !strings.Contains(st, "merged items $0.35, lost to failures $0.10, $0.15 per merged item") {
		t.Errorf("status:\n%s", st)
	}
	// dlq analyze: what each cause cost (d's two failed attempts).
	if _, an, _ := runCLI(t, home, "dlq", "analyze", "--job-id", "costs"); !strings.Contains(an, "SPEND LOST") || !strings.Contains(an, "$0.10") {
		t.Errorf("dlq analyze lacks the spend lost per signature:\n%s", an)
	}
	if _, an, _ := runCLI(t, home, "dlq", "analyze", "--job-id", "costs", "--json"); !strings.Contains(an, `"spend_lost_usd":0.1`) {
		t.Errorf("dlq analyze --json lacks spend_lost_usd:\n%s", an)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLIClaude(t, home, claude, "dlq", "retry", "costs", "--json")
	got = decode(code, out, errOut)
	want = costs{Status: "completed", Successful: 4, CostUSD: 0.65, MergedCostUSD: 0.65, CostPerMergedUSD: 0.1625, ExecutionCostUSD: 0.20}
	if got != want {
		t.Fatalf("redrive: %+v\nwant %+v\n%s", got, want, errOut)
	}
}
