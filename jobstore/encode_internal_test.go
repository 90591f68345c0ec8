package jobstore

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestAppendItemMatchesMarshal: the hand encoder gives json.Marshal's
// bytes, and its redaction masks the secrets the whole-line redaction does.
func TestAppendItemMatchesMarshal(t *testing.T) {
	items := []*CheckpointItem{
		{ItemOutcome: ItemOutcome{ItemID: "item_0", State: ItemPending}},
		{ItemOutcome: ItemOutcome{ItemID: "a-b", Label: "src/x.go", State: ItemMerged, Attempts: 2, Commits: 3, DurationMS: 1234,
			TimingsMS: &Timings{Prepare: 1.5, Steps: 1e-7, Merge: 2e21, Cleanup: 0, Bookkeeping: 123456.789}, CostUSD: 0.000123},
			Index: 7, DataOff: 99, DataLen: 12, BudgetBase: 1, CostBase: 0.5, MergeCommit: "0123456789abcdef0123456789abcdef01234567"},
		{ItemOutcome: ItemOutcome{ItemID: "x", State: ItemDLQ, Error: "exit 1: boom", ErrorType: "CommandFailed", LogLocation: "/l/a.jsonl", CostUSD: -2}},
		{ItemOutcome: ItemOutcome{ItemID: "é<&>\"\\\n", State: ItemSkipped}},                  // fallback: escapes
		{ItemOutcome: ItemOutcome{ItemID: "t", State: ItemMerged, Tokens: &Tokens{Input: 1}}}, // fallback: tokens
		{ItemOutcome: ItemOutcome{ItemID: "f", State: ItemDLQ}, Failures: []json.RawMessage{[]byte(`{"a":1}`)}, PendingRecord: []byte(`{}`)},
		{ItemOutcome: ItemOutcome{ItemID: "d", State: ItemPending}, Data: []byte(`{"k":"v"}`)},
		{ItemOutcome: ItemOutcome{ItemID: "n", State: ItemPending, CostUSD: math.SmallestNonzeroFloat64}},
	}
	s := &State{}
	for _, it := range items {
		want, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.appendItem(nil, it)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendItem = %s (%v)\nwant        %s", got, err, want)
		}
	}
	s.redact = func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), "hunter2", "***")) }
	it := &CheckpointItem{ItemOutcome: ItemOutcome{ItemID: "id-hunter2", Label: "hunter2", State: ItemDLQ, Error: "pw hunter2 leaked", LogLocation: "/hunter2"}}
	got, err := s.appendItem(nil, it)
	want, _ := json.Marshal(it)
	if err != nil || strings.Contains(string(got), "hunter2") || string(got) != strings.ReplaceAll(string(want), "hunter2", "***") {
		t.Errorf("redacted appendItem = %s (%v)", got, err)
	}
}
