package jobstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// spool is a job's items.jsonl: every item's JSON value, one per line,
// written once (append-only) and read back by offset. Not safe for
// concurrent use except read (State serialises the rest under its lock).
type spool struct {
	f       *os.File
	w       *bufio.Writer
	size    int64 // bytes written, buffered ones included
	flushed int64 // bytes handed to the file
	synced  bool  // everything flushed is durable
}

func openSpool(path string) (*spool, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open item data: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("open item data: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open item data: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriterSize(f, 256<<10), size: st.Size(), flushed: st.Size(), synced: true}, nil
}

// add appends one value (compacted to one line) and returns where it is.
func (s *spool) add(data []byte) (int64, int, error) {
	if bytes.IndexByte(data, '\n') >= 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, data); err == nil {
			data = b.Bytes()
		}
	}
	off := s.size
	if _, err := s.w.Write(data); err != nil {
		return 0, 0, err
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return 0, 0, err
	}
	s.size += int64(len(data)) + 1
	s.synced = false
	return off, len(data), nil
}

// flushFor hands the buffered bytes to the file when end is beyond what
// it holds.
func (s *spool) flushFor(end int64) error {
	if end <= s.flushed {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	s.flushed = s.size
	return nil
}

// sync makes everything added durable.
func (s *spool) sync() error {
	if s.synced {
		return nil
	}
	if err := s.flushFor(s.size); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.synced = true
	return nil
}

// read returns the n bytes at off (safe for concurrent use with itself).
func (s *spool) read(off int64, n int, itemID string) (json.RawMessage, error) {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read the data of item %s from %s: %w", itemID, s.f.Name(), err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("read the data of item %s: %s holds no JSON value at offset %d", itemID, s.f.Name(), off)
	}
	return b, nil
}

func (s *spool) close() error {
	err := s.sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ItemDataReader reads the data of a job's items from a checkpoint loaded
// with LoadCheckpoint (whose spooled items have no Data). Close it after
// use.
type ItemDataReader struct {
	p  Paths
	sp *spool
}

// NewItemDataReader returns a reader for the items of job p.
func NewItemDataReader(p Paths) *ItemDataReader { return &ItemDataReader{p: p} }

// Data returns it's JSON value: Data, or its line of items.jsonl.
func (r *ItemDataReader) Data(it *CheckpointItem) (json.RawMessage, error) {
	if it.Data != nil || it.DataLen == 0 {
		return it.Data, nil
	}
	if r.sp == nil {
		f, err := os.Open(r.p.ItemData())
		if err != nil {
			return nil, fmt.Errorf("read the data of item %s: %w", it.ItemID, err)
		}
		r.sp = &spool{f: f}
	}
	return r.sp.read(it.DataOff, it.DataLen, it.ItemID)
}

// Close releases the file.
func (r *ItemDataReader) Close() error {
	if r.sp == nil {
		return nil
	}
	return r.sp.f.Close()
}
