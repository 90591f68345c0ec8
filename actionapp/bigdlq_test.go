package actionapp

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/ghaction"
)

// TestLargeDLQArtifactRedrivesFromItsArray: a DLQ of more records than
// ghaction.ItemEntriesMax is zipped with its records in dlq.json only (no
// items/ entry), and the redrive's reader takes every record from there,
// skipping a malformed or duplicated element with a warning — the same
// rules as items/ entries.
func TestLargeDLQArtifactRedrivesFromItsArray(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	items := filepath.Join(dir, "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	n := ghaction.ItemEntriesMax + 2
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		rec := dlq.FromAgentResult(dlq.AgentResult{ItemID: fmt.Sprintf("item-%06d", i), Status: dlq.StatusFailed,
			ItemData: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Failures: []dlq.Failure{{Attempt: 1, At: at, Type: &dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: "boom"}}})
		b, err := dlq.Encode(*rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(items, fmt.Sprintf("item-%06d.json", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, count, err := ghaction.BuildDLQZip(dir, nil)
	if err != nil || count != n {
		t.Fatalf("BuildDLQZip = %d records, %v; want %d", count, err, n)
	}
	recs, _, warns, err := readDLQZip(data)
	if err != nil || len(recs) != n || len(warns) != 0 {
		t.Fatalf("readDLQZip = %d records, warnings %v, %v; want %d, none", len(recs), warns, err, n)
	}
	var data5 bytes.Buffer
	_ = json.Compact(&data5, recs[5].ItemData)
	if recs[0].ItemID != "item-000000" || recs[n-1].ItemID != fmt.Sprintf("item-%06d", n-1) || data5.String() != `{"n":5}` {
		t.Errorf("records read back: first %s, last %s, item 5 data %s", recs[0].ItemID, recs[n-1].ItemID, data5.String())
	}

	// A hand-made zip: an array with a malformed element and a duplicate.
	good, _ := dlq.Encode(recs[0])
	crafted := zipOf(t, map[string]string{
		ghaction.DLQArrayFile: "[" + string(good) + `, {"item_id": 7}, ` + string(good) + "]",
	})
	recs, _, warns, err = readDLQZip(crafted)
	if err != nil || len(recs) != 1 || len(warns) != 2 ||
		!strings.Contains(warns[0], "malformed") || !strings.Contains(warns[1], "already in") {
		t.Fatalf("crafted array: %d records, warnings %q, %v", len(recs), warns, err)
	}
	if _, _, _, err := readDLQZip(zipOf(t, map[string]string{ghaction.DLQArrayFile: `{"not":"an array"}`})); err == nil {
		t.Error("a dlq.json that is not an array was accepted")
	}
}

// zipOf makes a zip of name → content.
func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
