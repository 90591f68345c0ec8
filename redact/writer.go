package redact

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// Streaming limits.
const (
	// shapeHold is held back beyond the longest literal, so that a token
	// shape cut by a Write boundary is seen whole.
	shapeHold = 512
	// lineCap is the longest partial line held before text is cut
	// inside a line (text mode).
	lineCap = 64 << 10
	// hardCap is the most ever held: past it everything is written,
	// secrets still open at the end masked to the end (fail closed).
	hardCap = 1 << 20
)

// Writer redacts a stream before it reaches the underlying writer. It holds
// back a tail (a partial line, the last bytes that could start a secret,
// a secret still open at the end) so that a secret split across Write
// calls is found; Flush or Close writes the rest. Safe for concurrent use.
type Writer struct {
	r     *Redactor
	w     io.Writer
	json  bool
	mu    sync.Mutex
	buf   []byte
	err   error
	stale int // bytes at the end of buf that arrived since the last cut
}

// Writer returns a text-mode stream redactor writing to w.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// JSONLinesWriter returns a stream redactor for JSON lines (transcripts):
// it writes whole lines only, each redacted with JSON.
func (r *Redactor) JSONLinesWriter(w io.Writer) *Writer { return &Writer{r: r, w: w, json: true} }

// Write buffers p and writes what can no longer be part of a secret. It
// returns len(p) unless an earlier write to the underlying writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	w.stale += len(p)
	// Work only when a line ended or enough arrived, so that tiny writes
	// of a long line do not rescan the held tail each time.
	if bytes.IndexByte(p, '\n') < 0 && w.stale < 4<<10 {
		return len(p), nil
	}
	w.stale = 0
	w.drain(false)
	return len(p), w.err
}

// Flush redacts and writes everything held.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.drain(true)
	}
	return w.err
}

// Close flushes; it does not close the underlying writer.
func (w *Writer) Close() error { return w.Flush() }

// drain writes the part of buf that is safe to redact on its own.
func (w *Writer) drain(final bool) {
	cut, spans := len(w.buf), []span(nil)
	if !final {
		cut, spans = w.safeCut()
	}
	if cut == 0 {
		return
	}
	chunk := w.buf[:cut]
	var out []byte
	switch {
	case w.json:
		out = w.r.JSON(chunk)
	case final || (w.r != nil && w.r.star):
		out = w.r.Bytes(chunk)
	default: // the spans found by safeCut that end before the cut
		k := 0
		for k < len(spans) && spans[k].e <= cut {
			k++
		}
		out = chunk
		if k > 0 {
			out = apply(chunk, spans[:k])
		}
	}
	if _, err := w.w.Write(out); err != nil {
		w.err = err
	}
	w.buf = append(w.buf[:0], w.buf[cut:]...)
}

// safeCut returns how many leading bytes of buf can be redacted and
// written now: no secret may straddle the cut or still grow past the end.
func (w *Writer) safeCut() (int, []span) {
	r := w.r
	if r == nil {
		r = shapesOnly
	}
	n := len(w.buf)
	limit := n - (r.maxLit + shapeHold)
	if limit <= 0 {
		if n <= hardCap {
			return 0, nil
		}
		limit = n
	}
	cut := bytes.LastIndexByte(w.buf[:limit], '\n') + 1
	if cut == 0 && !w.json && n > lineCap {
		cut = limit
	}
	spans := r.find(w.buf)
	for moved := true; moved && cut > 0; {
		moved = false
		for _, sp := range spans {
			if sp.s < cut && (cut < sp.e || sp.e == n) {
				cut, moved = sp.s, true
				if w.json {
					cut = bytes.LastIndexByte(w.buf[:cut], '\n') + 1
				}
			}
		}
	}
	if cut == 0 && n > hardCap {
		return n, spans
	}
	return cut, spans
}

// EachWrite returns a writer that redacts every Write on its own and holds
// nothing back: for writers fed whole messages (log lines, progress
// redraws) whose output must not be delayed. A secret split across two
// Write calls is not found; use Writer for streams.
func (r *Redactor) EachWrite(w io.Writer) io.Writer { return eachWriter{r, w} }

type eachWriter struct {
	r *Redactor
	w io.Writer
}

// Unwrap returns the writer the redacted bytes go to, so that a caller
// can ask what it is (a terminal?) without writing around the redactor.
func (e eachWriter) Unwrap() io.Writer { return e.w }

func (e eachWriter) Write(p []byte) (int, error) {
	if _, err := e.w.Write(e.r.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WithNames returns a Redactor that also redacts the values that names
// have in environ (KEY=VALUE entries), whatever the names look like;
// values shorter than MinValue are ignored.
func (r *Redactor) WithNames(environ []string, names ...string) *Redactor {
	if len(names) == 0 {
		return r.orShapes()
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var vals []string
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && want[k] {
			vals = append(vals, v)
		}
	}
	return r.With(vals...)
}

func (r *Redactor) orShapes() *Redactor {
	if r == nil {
		return shapesOnly
	}
	return r
}
