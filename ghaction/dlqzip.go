package ghaction

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DLQArrayFile is the name of the combined array of records in a DLQ zip.
const DLQArrayFile = "dlq.json"

// ItemEntriesMax is how many records a DLQ zip holds as items/*.json
// entries as well as in dlq.json; a DLQ with more has only dlq.json (every
// record, same format), so the zip's central directory — which a zip
// writer keeps in memory until the end — stays small whatever the count.
// The redrive reads dlq.json when a zip has no items/ entries.
const ItemEntriesMax = 10_000

// ExtraFile is an additional file stored in a DLQ zip (e.g. the job's
// checkpoint, so that a later run can redrive the job).
type ExtraFile struct {
	// Name is the slash-separated path inside the zip.
	Name string
	// Path is the file on disk; a missing file is skipped.
	Path string
}

// BuildDLQZip is WriteDLQZip into memory: the zip's bytes and the number
// of records (tests and small callers; the Action streams to a file).
func BuildDLQZip(dir string, redact func([]byte) []byte, extra ...ExtraFile) ([]byte, int, error) {
	var buf bytes.Buffer
	n, err := WriteDLQZip(&buf, dir, redact, extra...)
	if err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), n, nil
}

// WriteDLQZipFile is WriteDLQZip into f (from its current offset, a new
// file in practice) through a buffer, returning f as the Blob to upload
// (size and sha256 digest computed as it was written) and the number of
// records.
func WriteDLQZipFile(f *os.File, dir string, redact func([]byte) []byte, extra ...ExtraFile) (Blob, int, error) {
	var n int
	blob, err := writeBlob(f, func(w io.Writer) (err error) {
		n, err = WriteDLQZip(w, dir, redact, extra...)
		return err
	})
	return blob, n, err
}

// writeBlob has write write into f through a buffer and returns f as the
// Blob to upload, its size and sha256 digest computed on the way.
func writeBlob(f *os.File, write func(io.Writer) error) (Blob, error) {
	sum := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, sum)}
	bw := bufio.NewWriterSize(cw, 256<<10)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return Blob{}, err
	}
	return Blob{ReaderAt: f, Size: cw.n, Digest: "sha256:" + hex.EncodeToString(sum.Sum(nil))}, nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteDLQZip writes to w a zip of a job's DLQ folder (dir holds
// items/*.json and index.json): every record under items/, index.json,
// any extra files, and dlq.json, a JSON array of every record in item file
// name order (formatted as json.MarshalIndent formats an array of them).
// Every file's bytes pass through redact (nil keeps them) so no secret
// reaches the artifact. It returns the number of records; a folder with no
// records yields 0 (callers skip the upload). Each entry carries its
// file's modification time; dlq.json carries the newest of the records'
// (or the folder's). Beyond ItemEntriesMax records there are no items/
// entries, dlq.json carries the items directory's time and holds the
// records in directory order (a redrive sorts them by item id anyway).
//
// Memory does not grow with the number of records: records are read a
// window at a time (eachRecord: a few goroutines read, redact, check and
// format them ahead of the writer, which takes them in order), twice up to
// ItemEntriesMax (once for items/, once for dlq.json, names sorted in
// memory), once beyond it (names streamed from the directory; counting
// them stops at the first beyond ItemEntriesMax), and compressed as they
// are written (deflate, fastest level: the zip is written once and read
// once).
func WriteDLQZip(w io.Writer, dir string, redact func([]byte) []byte, extra ...ExtraFile) (int, error) {
	if redact == nil {
		redact = func(b []byte) []byte { return b }
	}
	itemsDir := filepath.Join(dir, "items")
	// Whether there are more than ItemEntriesMax records: the listing
	// stops at the first beyond.
	total, err := countRecords(itemsDir, ItemEntriesMax+1)
	if err != nil {
		return 0, err
	}
	entries := total <= ItemEntriesMax
	var names *nameList // sorted; nil: streamed in directory order
	if entries {
		if names, err = recordNames(itemsDir); err != nil {
			return 0, err
		}
	}
	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, fastDeflate)
	var newest time.Time
	count := 0
	if entries {
		if err := eachRecord(itemsDir, names, redact, nil, func(r *dlqRecord) error {
			count++
			if r.mtime.After(newest) {
				newest = r.mtime
			}
			return addZipFile(zw, path.Join("items", r.name), r.data, r.mtime)
		}); err != nil {
			return 0, err
		}
	}
	if idx, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		if err := addZipFile(zw, "index.json", redact(idx), modTime(filepath.Join(dir, "index.json"))); err != nil {
			return 0, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("read DLQ index: %w", err)
	}
	for _, x := range extra {
		data, err := os.ReadFile(x.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", x.Path, err)
		}
		if err := addZipFile(zw, x.Name, redact(data), modTime(x.Path)); err != nil {
			return 0, err
		}
	}
	if newest.IsZero() && !entries {
		newest = modTime(itemsDir)
	}
	if newest.IsZero() {
		newest = modTime(dir)
	}
	h := &zip.FileHeader{Name: DLQArrayFile, Method: zip.Deflate}
	if !newest.IsZero() {
		h.Modified = newest.UTC()
	}
	aw, err := zw.CreateHeader(h)
	if err != nil {
		return 0, fmt.Errorf("add %s to zip: %w", DLQArrayFile, err)
	}
	bw := bufio.NewWriterSize(aw, 64<<10)
	first := true
	indent := func(out *bytes.Buffer, data []byte) error {
		return json.Indent(out, bytes.TrimSpace(data), "  ", "  ")
	}
	if err := eachRecord(itemsDir, names, redact, indent, func(r *dlqRecord) error {
		if !entries {
			count++
		}
		sep := ",\n  "
		if first {
			sep, first = "[\n  ", false
		}
		bw.WriteString(sep)
		_, err := bw.Write(r.data)
		return err
	}); err != nil {
		return 0, err
	}
	if first {
		bw.WriteString("[]")
	} else {
		bw.WriteString("\n]")
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write %s to zip: %w", DLQArrayFile, err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("close DLQ zip: %w", err)
	}
	return count, nil
}

// fastDeflate is the zip writer's deflate compressor at the fastest level,
// its state reused across entries (a new flate writer per record would
// allocate ~1 MiB each).
func fastDeflate(w io.Writer) (io.WriteCloser, error) {
	fw, _ := flatePool.Get().(*flate.Writer)
	if fw == nil {
		var err error
		if fw, err = flate.NewWriter(w, flate.BestSpeed); err != nil {
			return nil, err
		}
	} else {
		fw.Reset(w)
	}
	return &pooledFlate{fw}, nil
}

var flatePool sync.Pool

type pooledFlate struct{ *flate.Writer }

func (p *pooledFlate) Close() error {
	err := p.Writer.Close()
	flatePool.Put(p.Writer)
	p.Writer = nil
	return err
}

// nameList holds file names compactly: one byte slice and offsets, not a
// string or DirEntry each.
type nameList struct {
	buf []byte
	end []uint32
}

func (l *nameList) len() int { return len(l.end) }

func (l *nameList) at(i int) string { return string(l.bytes(i)) }

func (l *nameList) bytes(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = l.end[i-1]
	}
	return l.buf[start:l.end[i]]
}

// countRecords counts the *.json names of dir, up to upTo: the listing
// stops there.
func countRecords(dir string, upTo int) (int, error) {
	n, err := eachRecordName(dir, nil, func(string) error {
		if upTo--; upTo <= 0 {
			return errStopRecords
		}
		return nil
	})
	if errors.Is(err, errStopRecords) {
		err = nil
	}
	return n, err
}

// eachRecordName calls fn with every *.json name of dir: those of names
// in order when it is not nil, else as the directory lists them (read
// 1,024 at a time); a missing dir has none. It returns how many there
// were.
func eachRecordName(dir string, names *nameList, fn func(string) error) (int, error) {
	if names != nil {
		for i := range names.len() {
			if err := fn(names.at(i)); err != nil {
				return i, err
			}
		}
		return names.len(), nil
	}
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read DLQ items %s: %w", dir, err)
	}
	defer f.Close()
	n := 0
	for {
		batch, err := f.Readdirnames(1024)
		for _, name := range batch {
			if strings.HasSuffix(name, ".json") {
				n++
				if err := fn(name); err != nil {
					return n, err
				}
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read DLQ items %s: %w", dir, err)
		}
	}
}

// recordNames lists the *.json names of dir, sorted; a missing dir is
// empty.
func recordNames(dir string) (*nameList, error) {
	var raw nameList
	if _, err := eachRecordName(dir, nil, func(n string) error {
		raw.buf = append(raw.buf, n...)
		raw.end = append(raw.end, uint32(len(raw.buf)))
		return nil
	}); err != nil {
		return nil, err
	}
	idx := make([]int32, raw.len())
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return bytes.Compare(raw.bytes(int(a)), raw.bytes(int(b))) })
	sorted := &nameList{buf: make([]byte, 0, len(raw.buf)), end: make([]uint32, 0, len(raw.end))}
	for _, i := range idx {
		sorted.buf = append(sorted.buf, raw.bytes(int(i))...)
		sorted.end = append(sorted.end, uint32(len(sorted.buf)))
	}
	return sorted, nil
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
