package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/spend"
)

// TestTranscriptLimiterKeepsAccountingLines: an agent that floods the
// transcript cannot fill the disk nor hide the result event the budget
// reads.
func TestTranscriptLimiterKeepsAccountingLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	l := newTranscriptLimiter(&out, 1000)
	big := `{"type":"user","message":"` + strings.Repeat("x", 300) + `"}` + "\n"
	for range 10 {
		if _, err := l.Write([]byte(big)); err != nil {
			t.Fatal(err)
		}
	}
	// One line over the per-line limit, written in small pieces.
	huge := `{"type":"assistant","message":"` + strings.Repeat("y", maxTranscriptLine) + `"}` + "\n"
	for i := 0; i < len(huge); i += 4096 {
		l.Write([]byte(huge[i:min(i+4096, len(huge))]))
	}
	l.Write([]byte(`{"type":"system","subtype":"api_retry","retry_delay_ms":100,"error_status":429,"error":"rate_limit"}` + "\n"))
	l.Write([]byte(`{"type":"result","subtype":"success","total_cost_usd":0.25}`)) // no final newline
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if out.Len() > 1000+2000 {
		t.Fatalf("transcript is %d bytes, over its limit", out.Len())
	}
	if strings.Count(got, `"type":"user"`) != 3 || strings.Contains(got, "yyyy") {
		t.Fatalf("kept the wrong lines:\n%.300s", got)
	}
	for _, want := range []string{`"subtype":"api_retry"`, `"total_cost_usd":0.25}` + "\n", `"type":"prodigy_transcript_truncated"`, `"dropped_lines":8`} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %s:\n%s", want, got[len(got)-400:])
		}
	}
	// What the budget reads survives the truncation.
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := spend.ScanClaudeRun(p, 0)
	if err != nil || !run.Found || run.CostUSD != 0.25 || run.RateLimit != "rate_limit" {
		t.Fatalf("scan after truncation: %+v %v", run, err)
	}
}
