package cmdutil

import (
	"bytes"
	"errors"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestWriteResultJSONIsWriteJSON: the streamed encoding is WriteJSON's,
// byte for byte, for a summary (nil items), an empty item list and items
// holding every kind of value (strings needing escapes, nested timings).
func TestWriteResultJSONIsWriteJSON(t *testing.T) {
	t.Parallel()
	items := []runner.ItemOutcome{
		{ItemID: "a", State: runner.ItemMerged, Attempts: 1, Commits: 2, DurationMS: 1200, CostUSD: 0.25, Tokens: &jobstore.Tokens{Input: 10}},
		{ItemID: "b\"<&>\u2028", Label: "ü", State: runner.ItemDLQ, Attempts: 3, Error: "line 1\nline 2", ErrorType: "CommandFailed", TimingsMS: &runner.Timings{Merge: 1.5}},
		{ItemID: "c", State: runner.ItemPending},
	}
	for name, res := range map[string]*runner.Result{
		"summary": {JobID: "j", Status: runner.StatusCompleted, Total: 3},
		"empty":   {JobID: "j", Status: runner.StatusCompleted, Items: []runner.ItemOutcome{}},
		"one":     {JobID: "j", Status: runner.StatusFailed, Items: items[:1], Failed: 1},
		"items":   {JobID: "j", Status: runner.StatusInterrupted, Items: items, OrphanedWorktrees: []runner.OrphanedWorktree{}},
	} {
		var want, got bytes.Buffer
		if err := WriteJSON(&want, res); err != nil {
			t.Fatal(err)
		}
		if err := WriteResultJSON(&got, res); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: streamed\n%s\nWriteJSON\n%s", name, got.String(), want.String())
		}
	}
}

// TestWriteResultJSONReportsWriteErrors: a writer that fails is reported,
// not lost in the buffer.
func TestWriteResultJSONReportsWriteErrors(t *testing.T) {
	t.Parallel()
	res := &runner.Result{JobID: "j", Items: []runner.ItemOutcome{{ItemID: "a"}}}
	if err := WriteResultJSON(failingWriter{}, res); err == nil {
		t.Fatal("a failing writer gave no error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
