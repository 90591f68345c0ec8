package jobstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/prodigy-action/prodigy-action/redact"
)

// MaxAttemptLog bounds one attempt's output log (Paths.AttemptLog):
// the first and the last half are kept, with a line saying how much was
// left out between them.
const MaxAttemptLog = 1 << 20

// AttemptLogWriter writes one attempt's output log: writes are redacted as
// a stream, then bounded (the first and the last half of max kept). Safe
// for concurrent use (a step's stdout and stderr are copied by two
// goroutines). A write never fails: a log that cannot be written never
// fails a step. Close flushes it.
type AttemptLogWriter struct {
	mu   sync.Mutex
	red  *redact.Writer
	file *boundedFile
}

// CreateAttemptLog creates (or truncates: an attempt re-run after a crash
// starts again) the output log of attempt n of item itemID
// (Paths.AttemptLog), redacted by red (nil: written as it is) and bounded
// to max bytes; nil when it cannot be created, and the attempt runs
// without it.
func (p Paths) CreateAttemptLog(itemID string, n int, red *redact.Redactor, max int) *AttemptLogWriter {
	path := p.AttemptLog(itemID, n)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil
	}
	bf := &boundedFile{f: f, half: max / 2}
	var w *redact.Writer
	if red != nil {
		w = red.Writer(bf)
	}
	return &AttemptLogWriter{red: w, file: bf}
}

func (l *AttemptLogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.red != nil {
		_, _ = l.red.Write(p)
	} else {
		_, _ = l.file.Write(p)
	}
	return len(p), nil // a log that cannot be written never fails a step
}

// Close flushes the redactor and writes the kept tail.
func (l *AttemptLogWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.red != nil {
		_ = l.red.Flush()
	}
	return l.file.Close()
}

// boundedFile writes the first half bytes to f, then keeps only the last
// half bytes in memory; Close appends them after a line counting what was
// left out.
type boundedFile struct {
	f       *os.File
	half    int
	written int
	tail    []byte
	dropped int64
}

func (b *boundedFile) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.half - b.written; room > 0 {
		k := min(room, len(p))
		if _, err := b.f.Write(p[:k]); err != nil {
			return 0, err
		}
		b.written += k
		p = p[k:]
	}
	if len(p) > 0 {
		b.tail = append(b.tail, p...)
		if over := len(b.tail) - b.half; over > 0 {
			b.dropped += int64(over)
			b.tail = append(b.tail[:0], b.tail[over:]...)
		}
	}
	return n, nil
}

func (b *boundedFile) Close() error {
	if b.dropped > 0 {
		fmt.Fprintf(b.f, "\n[… %d byte(s) of output not kept: the log keeps the first and last %d KiB …]\n", b.dropped, b.half>>10)
	}
	_, werr := b.f.Write(b.tail)
	cerr := b.f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

var _ io.WriteCloser = (*AttemptLogWriter)(nil)
