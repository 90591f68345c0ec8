package jobstore

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAppendItemMatchesMarshal: the hand encoder gives json.Marshal's
// bytes, and its redaction masks the secrets the whole-line redaction does.
func TestAppendItemMatchesMarshal(t *testing.T) {
	since := time.Date(2026, 11, 25, 10, 0, 0, 123, time.UTC)
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
		// An item whose attempt runs (what a crash then must find), whose
		// earlier attempts were lost and whose spend is reserved.
		{ItemOutcome: ItemOutcome{ItemID: "r", State: ItemRunning, Attempts: 3, CostUSD: 0.25}, Index: 4, DataOff: 10, DataLen: 2,
			InFlight: 3, InFlightAgent: "agent-7", InFlightSince: &since, Lost: 1, SpendCeiling: 1.75},
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

// TestAppendItemWritesEveryField: for every field of CheckpointItem (its
// outcome's included), an item with only that field set encodes to
// json.Marshal's bytes, so a field added to the checkpoint and forgotten
// by the hand encoder fails here instead of vanishing from the next
// snapshot (the in-flight attempt, the lost attempts and the spend ceiling
// once did).
func TestAppendItemWritesEveryField(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var set func(v reflect.Value, path string)
	s := &State{}
	check := func(path string, it *CheckpointItem) {
		t.Helper()
		want, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.appendItem(nil, it)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: appendItem = %s (%v)\nwant %s", path, got, err, want)
		}
	}
	set = func(v reflect.Value, path string) {
		typ := v.Type()
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				set(v.Field(i), path+f.Name+".")
				continue
			}
			it := &CheckpointItem{ItemOutcome: ItemOutcome{ItemID: "i", State: ItemRunning}}
			fv := reflect.ValueOf(it).Elem().FieldByName(f.Name)
			switch fv.Kind() {
			case reflect.String:
				fv.SetString("v")
			case reflect.Int, reflect.Int64:
				fv.SetInt(7)
			case reflect.Float64:
				fv.SetFloat(1.5)
			case reflect.Slice:
				if fv.Type() == reflect.TypeOf(json.RawMessage(nil)) {
					fv.Set(reflect.ValueOf(json.RawMessage(`{"k":1}`)))
				} else {
					fv.Set(reflect.ValueOf([]json.RawMessage{json.RawMessage(`{"k":1}`)}))
				}
			case reflect.Pointer:
				switch fv.Type().Elem() {
				case reflect.TypeOf(time.Time{}):
					fv.Set(reflect.ValueOf(&since))
				default:
					fv.Set(reflect.New(fv.Type().Elem()))
				}
			default:
				t.Fatalf("%s%s: no test value for a %s (add one)", path, f.Name, fv.Kind())
			}
			check(path+f.Name, it)
		}
	}
	set(reflect.ValueOf(CheckpointItem{}), "")
}
