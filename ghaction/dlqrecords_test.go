package ghaction

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

// dlqDir writes n records item-<i>.json (i zero-padded, so name order is
// numeric order), each holding a secret to redact.
func dlqDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "items"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := fmt.Sprintf(`{"item_id":"item-%05d","last_error":"token s3cr3t-%d leaked","failure_count":%d}`, i, i, i%7)
		writeFile(t, filepath.Join(dir, "items", fmt.Sprintf("item-%05d.json", i)), rec)
	}
	return dir
}

// TestDLQRecordsKeepTheirOrderPastTheWindow: with records read ahead by
// several goroutines, each redacted there by the Action's own redactor,
// items/ and dlq.json still hold every record, once, redacted, in name
// order, far past the read-ahead window.
func TestDLQRecordsKeepTheirOrderPastTheWindow(t *testing.T) {
	n := 3*recordWindow + 7
	dir := dlqDir(t, n)
	red := redact.New(redact.Config{Values: []string{"s3cr3t"}})
	data, count, err := BuildDLQZip(dir, red.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("count = %d, want %d", count, n)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	var array []byte
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if bytes.Contains(b, []byte("s3cr3t")) {
			t.Errorf("%s holds the secret", f.Name)
		}
		switch {
		case strings.HasPrefix(f.Name, "items/"):
			items = append(items, f.Name)
		case f.Name == DLQArrayFile:
			array = b
		}
	}
	var recs []struct {
		ItemID string `json:"item_id"`
	}
	if err := json.Unmarshal(array, &recs); err != nil {
		t.Fatalf("dlq.json: %v", err)
	}
	if len(items) != n || len(recs) != n {
		t.Fatalf("%d items/ entries and %d records in dlq.json, want %d", len(items), len(recs), n)
	}
	for i := range n {
		id := fmt.Sprintf("item-%05d", i)
		if items[i] != "items/"+id+".json" || recs[i].ItemID != id {
			t.Fatalf("position %d holds %s and %s, want %s", i, items[i], recs[i].ItemID, id)
		}
	}
}

// failAfter fails every write once n bytes have gone through.
type failAfter struct{ n int }

var errDiskFull = errors.New("no space left on device")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errDiskFull
	}
	return len(p), nil
}

// TestDLQZipStopsAtTheFirstError: a record that is not JSON in the middle,
// or a writer that fails part-way, ends the zip with that error, and the
// goroutines reading ahead are gone when it returns.
func TestDLQZipStopsAtTheFirstError(t *testing.T) {
	n := 2*recordWindow + 3
	before := runtime.NumGoroutine()

	bad := dlqDir(t, n)
	writeFile(t, filepath.Join(bad, "items", "item-00300.json"), `{"item_id": "item-00300", oops`)
	if _, err := WriteDLQZip(io.Discard, bad, nil); err == nil || !strings.Contains(err.Error(), "item-00300.json is not valid JSON") {
		t.Errorf("a record that is not JSON: err = %v", err)
	}

	good := dlqDir(t, n)
	for _, after := range []int{0, 100, 20 << 10} {
		if _, err := WriteDLQZip(&failAfter{n: after}, good, nil); !errors.Is(err, errDiskFull) {
			t.Errorf("a writer failing after %d bytes: err = %v", after, err)
		}
	}

	// A record that is not a regular file is skipped, as before.
	if err := os.Symlink("/etc/passwd", filepath.Join(good, "items", "zz-link.json")); err != nil {
		t.Fatal(err)
	}
	if _, count, err := BuildDLQZip(good, nil); err != nil || count != n {
		t.Errorf("with a symbolic link among the records: count %d, err %v; want %d, nil", count, err, n)
	}

	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after the zips, %d before: the read-ahead outlived its zip", after, before)
	}
}
