package ghaction

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DLQArrayFile is the name of the combined array of records in a DLQ zip.
const DLQArrayFile = "dlq.json"

// ExtraFile is an additional file stored in a DLQ zip (e.g. the job's
// checkpoint, so that a later run can redrive the job).
type ExtraFile struct {
	// Name is the slash-separated path inside the zip.
	Name string
	// Path is the file on disk; a missing file is skipped.
	Path string
}

// BuildDLQZip zips a job's DLQ folder (dir holds items/*.json and
// index.json) and adds dlq.json, a JSON array of every record in item file
// name order, plus any extra files. Every file's bytes pass through redact
// (nil keeps them) so no secret reaches the artifact. It returns the zip
// bytes and the number of records; a folder with no records yields count 0
// (callers skip the upload). Each entry carries its file's modification
// time; dlq.json carries the newest of the records' (or the folder's).
func BuildDLQZip(dir string, redact func([]byte) []byte, extra ...ExtraFile) ([]byte, int, error) {
	if redact == nil {
		redact = func(b []byte) []byte { return b }
	}
	itemsDir := filepath.Join(dir, "items")
	entries, err := os.ReadDir(itemsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("read DLQ items %s: %w", itemsDir, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	records := make([]json.RawMessage, 0, len(names))
	var newest time.Time
	for _, n := range names {
		p := filepath.Join(itemsDir, n)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, 0, fmt.Errorf("read DLQ record %s: %w", n, err)
		}
		data = redact(data)
		if !json.Valid(data) {
			return nil, 0, fmt.Errorf("DLQ record %s is not valid JSON", n)
		}
		records = append(records, json.RawMessage(data))
		mt := modTime(p)
		if mt.After(newest) {
			newest = mt
		}
		if err := addZipFile(zw, path.Join("items", n), data, mt); err != nil {
			return nil, 0, err
		}
	}
	if idx, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		if err := addZipFile(zw, "index.json", redact(idx), modTime(filepath.Join(dir, "index.json"))); err != nil {
			return nil, 0, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("read DLQ index: %w", err)
	}
	for _, x := range extra {
		data, err := os.ReadFile(x.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", x.Path, err)
		}
		if err := addZipFile(zw, x.Name, redact(data), modTime(x.Path)); err != nil {
			return nil, 0, err
		}
	}
	arr, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return nil, 0, fmt.Errorf("encode %s: %w", DLQArrayFile, err)
	}
	if newest.IsZero() {
		newest = modTime(dir)
	}
	if err := addZipFile(zw, DLQArrayFile, arr, newest); err != nil {
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, fmt.Errorf("close DLQ zip: %w", err)
	}
	return buf.Bytes(), len(records), nil
}

// modTime returns p's modification time, or the zero time when p cannot be
// read (the entry then carries the zip format's 1980 epoch).
func modTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func addZipFile(zw *zip.Writer, name string, data []byte, mtime time.Time) error {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	if !mtime.IsZero() {
		h.Modified = mtime.UTC()
	}
	w, err := zw.CreateHeader(h)
	if err != nil {
		return fmt.Errorf("add %s to zip: %w", name, err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write %s to zip: %w", name, err)
	}
	return nil
}
