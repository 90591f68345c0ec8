package spend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScanClaudeRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, transcript string
		want             ClaudeRun
	}{
		{"success with modelUsage", `{"type":"system","subtype":"init"}
{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.42,"usage":{"input_tokens":1,"output_tokens":1},"modelUsage":{"a":{"inputTokens":10,"outputTokens":2,"cacheReadInputTokens":3,"cacheCreationInputTokens":4},"b":{"inputTokens":1,"outputTokens":1,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}`,
			ClaudeRun{Found: true, Subtype: "success", CostUSD: 0.42, Tokens: Tokens{Input: 11, Output: 3, CacheRead: 3, CacheCreation: 4}, Models: "a,b"}},
		{"usage fallback", `{"type":"result","subtype":"success","total_cost_usd":0.1,"usage":{"input_tokens":7,"output_tokens":8,"cache_read_input_tokens":9,"cache_creation_input_tokens":1}}`,
			ClaudeRun{Found: true, Subtype: "success", CostUSD: 0.1, Tokens: Tokens{Input: 7, Output: 8, CacheRead: 9, CacheCreation: 1}}},
		{"overloaded api_retry by status", `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":1500,"error_status":529,"error":"unknown"}
{"type":"result","subtype":"error_during_execution","is_error":true,"total_cost_usd":0}`,
			ClaudeRun{Found: true, Subtype: "error_during_execution", IsError: true, RateLimit: "overloaded", RetryDelay: 1500 * time.Millisecond}},
		{"server error is not a rate limit", `{"type":"system","subtype":"api_retry","retry_delay_ms":100,"error_status":500,"error":"server_error"}
{"type":"result","subtype":"error_during_execution","is_error":true,"result":"boom"}`,
			ClaudeRun{Found: true, Subtype: "error_during_execution", IsError: true, CostInvalid: "the result has no total_cost_usd"}},
		{"result api_error_status 429", `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"x"}`,
			ClaudeRun{Found: true, Subtype: "success", IsError: true, RateLimit: "rate_limit", CostInvalid: "the result has no total_cost_usd"}},
		{"rate limit text on a successful result is ignored", `{"type":"result","subtype":"success","is_error":false,"result":"fixed the rate limit bug"}`,
			ClaudeRun{Found: true, Subtype: "success", CostInvalid: "the result has no total_cost_usd"}},
		{"no result", `{"type":"assistant","error":"rate_limit"}` + "\nnot json\n",
			ClaudeRun{RateLimit: "rate_limit"}},
		// What an agent can make Claude Code's output say: the cost fails
		// closed, delays are bounded, no number is ever non-finite.
		{"negative cost", `{"type":"result","subtype":"success","total_cost_usd":-10}`,
			ClaudeRun{Found: true, Subtype: "success", CostInvalid: "total_cost_usd -10 is negative"}},
		{"cost as a string", `{"type":"result","subtype":"success","total_cost_usd":"0.01"}`,
			ClaudeRun{Found: true, Subtype: "success", CostInvalid: `total_cost_usd "0.01" is not a number`}},
		{"cost out of range", `{"type":"result","subtype":"success","total_cost_usd":1e309}`,
			ClaudeRun{Found: true, Subtype: "success", CostInvalid: "total_cost_usd 1e309 is not a finite number"}},
		{"absurd cost", `{"type":"result","subtype":"success","total_cost_usd":1e308}`,
			ClaudeRun{Found: true, Subtype: "success", CostInvalid: "total_cost_usd 1e308 is more than one step can cost ($10000)"}},
		{"a second result cannot lower the spend", `{"type":"result","subtype":"success","total_cost_usd":1.5}
{"type":"result","subtype":"success","total_cost_usd":0}`,
			ClaudeRun{Found: true, Subtype: "success", CostUSD: 1.5}},
		{"a second result cannot launder an invalid cost", `{"type":"result","subtype":"success","total_cost_usd":-1}
{"type":"result","subtype":"success","total_cost_usd":0.01}`,
			ClaudeRun{Found: true, Subtype: "success", CostUSD: 0.01, CostInvalid: "total_cost_usd -1 is negative"}},
		{"a year-long retry delay is bounded", `{"type":"system","subtype":"api_retry","retry_delay_ms":31536000000000000,"error_status":429,"error":"rate_limit"}`,
			ClaudeRun{RateLimit: "rate_limit", RetryDelay: maxProviderDelay}},
		{"a rejected subscription limit", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767229200,"rateLimitType":"five_hour"}}
{"type":"result","subtype":"success","is_error":true,"total_cost_usd":0,"result":"limit reached"}`,
			ClaudeRun{Found: true, Subtype: "success", IsError: true, RateLimit: "subscription limit (five_hour)", ResetsAt: time.Unix(1767229200, 0).UTC()}},
		{"an allowed rate_limit_event is nothing", `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1767229200}}`,
			ClaudeRun{}},
	} {
		path := filepath.Join(t.TempDir(), "t.jsonl")
		if err := os.WriteFile(path, []byte("{\"type\":\"result\",\"total_cost_usd\":99}\n"+tt.transcript+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ScanClaudeRun(path, int64(len("{\"type\":\"result\",\"total_cost_usd\":99}\n")))
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestShellRateLimitMatchers(t *testing.T) {
	t.Parallel()
	s := NewItemSpend(0, false, []RateLimitMatcher{{ExitCode: 75}, {Pattern: "Too Many Requests"}})
	s.NoteShellFailure(1, "x\nHTTP 500")
	if r, _, _ := s.RateLimited(); r != "" {
		t.Errorf("exit 1 / HTTP 500 marked rate-limited: %q", r)
	}
	s.NoteShellFailure(75, "x\n")
	if r, _, _ := s.RateLimited(); r != "shell: exit code 75" {
		t.Errorf("exit 75: %q", r)
	}
	s.BeginAttempt()
	s.NoteShellFailure(1, "\ncurl: 429 Too Many Requests")
	if r, _, _ := s.RateLimited(); r != `shell: output matches "Too Many Requests"` {
		t.Errorf("pattern: %q", r)
	}
}

func TestJobBudgetReservations(t *testing.T) {
	t.Parallel()
	never := func() bool { return false }
	b := NewBudget(5, 2, 0.5)
	a1, ok1 := b.Reserve(0, never)
	a2, ok2 := b.Reserve(1.5, never) // an item that spent 1.5 in an earlier run reserves 0.5
	if !ok1 || !ok2 || a1 != 2 || a2 != 0.5 {
		t.Fatalf("reservations %v %v %v %v", a1, ok1, a2, ok2)
	}
	done := make(chan bool)
	go func() { _, ok := b.Reserve(0, never); done <- ok }() // 0.5+2.5+2 > 5: waits for a release
	b.Release(a1, 0.25)                                      // committed 0.75, reserved 0.5: 2 more fits
	if !<-done {
		t.Fatal("the waiting reservation did not fit after a release")
	}
	b.Release(a2, 0.5)
	b.Release(2, 2) // committed 3.25: another 2 does not fit and nothing runs
	if _, ok := b.Reserve(0, never); ok || !b.Exhausted() {
		t.Error("a reservation beyond the budget succeeded")
	}
}

func TestExhaustedErrorSaysHowToContinue(t *testing.T) {
	err := ExhaustedError("job-7", 0.1234, 0.15, 0.02005, 3)
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("%v does not wrap ErrExhausted", err)
	}
	// 0.1234 + 0.02005 = 0.14345, rounded up to the cent's hundredth.
	want := "budget exhausted: spent $0.1234 of the $0.15 job budget; 3 item(s) left pending, never started; continue with `resume job-7 --max-cost-usd 0.1435`"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	if got := ExhaustedError("j", 2, 2, 0, 1).Error(); !strings.HasSuffix(got, "`resume j a higher --max-cost-usd`") {
		t.Fatalf("unknown need: %s", got)
	}
	for v, want := range map[float64]string{0: "0.00", 2: "2.00", 0.0246: "0.0246", 1.5: "1.50", 0.12345: "0.1235"} {
		if got := FormatUSD(v); got != want {
			t.Errorf("FormatUSD(%v) = %s, want %s", v, got, want)
		}
	}
}
