package runner

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

func TestScanClaudeRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, transcript string
		want             claudeRun
	}{
		{"success with modelUsage", `{"type":"system","subtype":"init"}
{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.42,"usage":{"input_tokens":1,"output_tokens":1},"modelUsage":{"a":{"inputTokens":10,"outputTokens":2,"cacheReadInputTokens":3,"cacheCreationInputTokens":4},"b":{"inputTokens":1,"outputTokens":1,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}`,
			claudeRun{Found: true, Subtype: "success", CostUSD: 0.42, Tokens: jobstore.Tokens{Input: 11, Output: 3, CacheRead: 3, CacheCreation: 4}, Models: "a,b"}},
		{"usage fallback", `{"type":"result","subtype":"success","total_cost_usd":0.1,"usage":{"input_tokens":7,"output_tokens":8,"cache_read_input_tokens":9,"cache_creation_input_tokens":1}}`,
			claudeRun{Found: true, Subtype: "success", CostUSD: 0.1, Tokens: jobstore.Tokens{Input: 7, Output: 8, CacheRead: 9, CacheCreation: 1}}},
		{"overloaded api_retry by status", `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":1500,"error_status":529,"error":"unknown"}
{"type":"result","subtype":"error_during_execution","is_error":true,"total_cost_usd":0}`,
			claudeRun{Found: true, Subtype: "error_during_execution", IsError: true, RateLimit: "overloaded", RetryDelay: 1500 * time.Millisecond}},
		{"server error is not a rate limit", `{"type":"system","subtype":"api_retry","retry_delay_ms":100,"error_status":500,"error":"server_error"}
{"type":"result","subtype":"error_during_execution","is_error":true,"result":"boom"}`,
			claudeRun{Found: true, Subtype: "error_during_execution", IsError: true}},
		{"result api_error_status 429", `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"x"}`,
			claudeRun{Found: true, Subtype: "success", IsError: true, RateLimit: "rate_limit"}},
		{"rate limit text on a successful result is ignored", `{"type":"result","subtype":"success","is_error":false,"result":"fixed the rate limit bug"}`,
			claudeRun{Found: true, Subtype: "success"}},
		{"no result", `{"type":"assistant","error":"rate_limit"}` + "\nnot json\n",
			claudeRun{RateLimit: "rate_limit"}},
	} {
		path := filepath.Join(t.TempDir(), "t.jsonl")
		if err := os.WriteFile(path, []byte("{\"type\":\"result\",\"total_cost_usd\":99}\n"+tt.transcript+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := scanClaudeRun(path, int64(len("{\"type\":\"result\",\"total_cost_usd\":99}\n")))
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestShellRateLimitMatchers(t *testing.T) {
	t.Parallel()
	s := &itemSpend{matchers: []config.RateLimitMatcher{{ExitCode: 75}, {Pattern: "Too Many Requests"}}}
	s.noteShellFailure(&stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: "x", Tail: "HTTP 500"})
	if r, _ := s.rateLimited(); r != "" {
		t.Errorf("exit 1 / HTTP 500 marked rate-limited: %q", r)
	}
	s.noteShellFailure(&stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 75}, Message: "x"})
	if r, _ := s.rateLimited(); r != "shell: exit code 75" {
		t.Errorf("exit 75: %q", r)
	}
	s.beginAttempt()
	s.noteShellFailure(&stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Tail: "curl: 429 Too Many Requests\n"})
	if r, _ := s.rateLimited(); r != `shell: output matches "Too Many Requests"` {
		t.Errorf("pattern: %q", r)
	}
}

func TestJobBudgetReservations(t *testing.T) {
	t.Parallel()
	never := func() bool { return false }
	b := newJobBudget(5, 2, 0.5)
	a1, ok1 := b.reserve(0, never)
	a2, ok2 := b.reserve(1.5, never) // an item that spent 1.5 in an earlier run reserves 0.5
	if !ok1 || !ok2 || a1 != 2 || a2 != 0.5 {
		t.Fatalf("reservations %v %v %v %v", a1, ok1, a2, ok2)
	}
	done := make(chan bool)
	go func() { _, ok := b.reserve(0, never); done <- ok }() // 0.5+2.5+2 > 5: waits for a release
	b.release(a1, 0.25)                                      // committed 0.75, reserved 0.5: 2 more fits
	if !<-done {
		t.Fatal("the waiting reservation did not fit after a release")
	}
	b.release(a2, 0.5)
	b.release(2, 2) // committed 3.25: another 2 does not fit and nothing runs
	if _, ok := b.reserve(0, never); ok || !b.isExhausted() {
		t.Error("a reservation beyond the budget succeeded")
	}
}
