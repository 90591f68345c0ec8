package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/validate"
)

func TestTermCell(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":             "-",
		"item-1":       "item-1",
		"a\tb":         `"a\tb"`,
		" padded":      `" padded"`,
		"line\nbreak":  `"line\nbreak"`,
		"\x1b[31mred":  `"\x1b[31mred"`,
		"ünïcode ok ✓": "ünïcode ok ✓",
	}
	for in, want := range tests {
		if got := TermCell(in); got != want {
			t.Errorf("TermCell(%q) = %q, want %q", in, got, want)
		}
	}
	long := TermCell(strings.Repeat("x", 10*MaxTermCell))
	if utf8.RuneCountInString(long) != MaxTermCell || !strings.HasSuffix(long, "…") {
		t.Errorf("long cell: %d runes, want %d ending in …", utf8.RuneCountInString(long), MaxTermCell)
	}
}

// TestWriteDLQTableOneLinePerRecord: hostile item ids and signatures
// (newlines, escapes, huge) keep the table one line per record and bounded.
func TestWriteDLQTableOneLinePerRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []dlq.Summary{
		{ItemID: "ok", ErrorType: dlq.ErrorType{Kind: dlq.Timeout}, FailureCount: 2, ReprocessEligible: true, LastAttempt: at, ErrorSignature: "Timeout::x"},
		{ItemID: "evil\nrow\x1b[2J", ErrorType: dlq.ErrorType{Kind: dlq.Unknown}, FailureCount: 1, LastAttempt: at, ErrorSignature: strings.Repeat("s", 5000)},
	}
	var b bytes.Buffer
	if err := WriteDLQTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ITEM ID") || strings.Contains(b.String(), "\x1b") {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "2026-01-02T03:04:05Z") || !strings.Contains(lines[1], "true") {
		t.Errorf("row 1 = %q", lines[1])
	}
	if len(lines[2]) > 2*MaxTermCell+200 {
		t.Errorf("row 2 is %d bytes: not bounded", len(lines[2]))
	}
}

func TestWriteValidation(t *testing.T) {
	t.Parallel()
	v := validate.Result{Valid: true, File: "wf.yml", Warnings: []string{"w1"},
		ErrorPolicy: &validate.PolicySummary{OnItemFailure: "dlq", ContinueOnFailure: true},
		Retry: &validate.ResolvedRetry{Source: "workflow", Attempts: 3, Backoff: "linear", IncrementMS: 2000,
			InitialDelayMS: 1000, MaxDelayMS: 30000, RetryOn: []validate.RetryOnMatcher{{Kind: "timeout"}, {Kind: "pattern", Pattern: "5.."}}},
		RetryScheduleMS: []int64{1000, 3000}, WorstCaseRetryMS: 4000}
	var out, errw bytes.Buffer
	WriteValidation(&out, &errw, v)
	for _, want := range []string{"wf.yml: valid", "linear +2s", `retry_on timeout, pattern "5.."`, "waits before retries 1..2: 1s, 3s (worst case: 4s)", "budget none", "jitter off"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if errw.String() != "warning: w1\n" {
		t.Errorf("stderr = %q", errw.String())
	}
	out.Reset()
	errw.Reset()
	WriteValidation(&out, &errw, validate.Result{File: "bad.yml", Errors: []string{"e1", "e2"}})
	if out.Len() != 0 || !strings.Contains(errw.String(), "error: e2\nbad.yml: invalid (2 problems)") {
		t.Errorf("invalid: stdout %q, stderr %q", out.String(), errw.String())
	}
}
