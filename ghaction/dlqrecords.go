package ghaction

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// A DLQ zip's records are read, redacted, checked and formatted by a few
// goroutines ahead of the one writing the zip, which takes them in the
// order the names come (the zip's deflate stream is one goroutine's work):
// reading a million small files and compressing what they hold then
// overlap instead of following each other. At most recordWindow records
// are in flight, so memory stays independent of the record count.

// recordWindow is how many records may be read ahead of the writer.
const recordWindow = 256

// dlqRecord is one record as the writer receives it.
type dlqRecord struct {
	name  string
	mtime time.Time
	data  []byte // valid until the callback returns
	ok    bool   // false: not a regular file (skipped)
	err   error
	buf   bytes.Buffer
	out   bytes.Buffer
	ready chan struct{}
}

// prepareRecord reads the record at itemsDir/r.name into r: its redacted
// bytes, checked to be JSON, then passed through format (nil keeps them;
// else format writes what the writer receives into out).
func prepareRecord(itemsDir string, r *dlqRecord, redact func([]byte) []byte, format func(out *bytes.Buffer, data []byte) error) {
	p := filepath.Join(itemsDir, r.name)
	fi, err := os.Lstat(p)
	if err != nil {
		r.err = fmt.Errorf("read DLQ record %s: %w", r.name, err)
		return
	}
	if !fi.Mode().IsRegular() {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		r.err = fmt.Errorf("read DLQ record %s: %w", r.name, err)
		return
	}
	_, err = r.buf.ReadFrom(f)
	f.Close()
	if err != nil {
		r.err = fmt.Errorf("read DLQ record %s: %w", r.name, err)
		return
	}
	data := redact(r.buf.Bytes())
	if !json.Valid(data) {
		r.err = fmt.Errorf("DLQ record %s is not valid JSON", r.name)
		return
	}
	if format != nil {
		if err := format(&r.out, data); err != nil {
			r.err = fmt.Errorf("encode %s: %w", r.name, err)
			return
		}
		data = r.out.Bytes()
	}
	r.data, r.mtime, r.ok = data, fi.ModTime(), true
}

// errStopRecords stops the listing when the writer has failed.
var errStopRecords = errors.New("stop")

var recordPool = sync.Pool{New: func() any { return new(dlqRecord) }}

// eachRecord calls fn, in the order eachRecordName gives the names of
// itemsDir (names, or the directory's order when nil), with every record
// read and prepared as prepareRecord does; records that are not regular
// files are skipped. It stops at the first error, a record's or fn's.
func eachRecord(itemsDir string, names *nameList, redact func([]byte) []byte, format func(out *bytes.Buffer, data []byte) error, fn func(r *dlqRecord) error) error {
	order := make(chan *dlqRecord, recordWindow)
	jobs := make(chan *dlqRecord, recordWindow)
	done := make(chan struct{})
	var listErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		_, listErr = eachRecordName(itemsDir, names, func(n string) error {
			r := recordPool.Get().(*dlqRecord)
			r.name, r.mtime, r.data, r.ok, r.err = n, time.Time{}, nil, false, nil
			r.ready = make(chan struct{})
			r.buf.Reset()
			r.out.Reset()
			select {
			case order <- r:
			case <-done:
				return errStopRecords
			}
			select {
			case jobs <- r:
			case <-done:
				close(r.ready)
				return errStopRecords
			}
			return nil
		})
	}()
	for range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				prepareRecord(itemsDir, r, redact, format)
				close(r.ready)
			}
		}()
	}
	var err error
	for r := range order {
		if err == nil {
			<-r.ready
			err = r.err
			if err == nil && r.ok {
				err = fn(r)
			}
			if err != nil {
				close(done)
			}
		} else {
			<-r.ready
		}
		r.data = nil
		recordPool.Put(r)
	}
	wg.Wait()
	if err == nil && listErr != nil && !errors.Is(listErr, errStopRecords) {
		err = listErr
	}
	return err
}
