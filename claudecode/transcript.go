package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Size limits of one claude step's stream-json transcript: what an agent
// prints (tool results echoed into assistant and user events) can be made
// arbitrarily large, so the transcript keeps at most maxTranscriptBytes of
// whole lines and drops any line over maxTranscriptLine. Past the limit only
// the lines the engine reads for accounting (result, rate_limit_event,
// system api_retry; each at most maxTranscriptLine) are still written, so
// cost and provider limits are never lost to truncation. A note line
// ({"type":"prodigy_transcript_truncated",…}) at the end says what was
// dropped.
const (
	maxTranscriptBytes = 64 << 20
	maxTranscriptLine  = 4 << 20
)

// transcriptLimiter applies the limits above to a stream of JSON lines
// written to w. It buffers at most one line of maxTranscriptLine bytes.
type transcriptLimiter struct {
	w       io.Writer
	max     int64
	written int64
	// line is the line being assembled; skipping says the current line
	// went over maxTranscriptLine and is being dropped.
	line     []byte
	skipping bool
	dropped  int64 // bytes dropped
	lines    int   // lines dropped
	err      error
}

// LimitTranscript returns a writer that applies the limits above to the
// stream-json lines of one claude run written to w. Its Write never fails
// because of the limits (it returns w's first error); Close, after the run,
// writes what is left of an unterminated line and the truncation note. It
// is not safe for concurrent use.
func LimitTranscript(w io.Writer) io.WriteCloser {
	return newTranscriptLimiter(w, maxTranscriptBytes)
}

func newTranscriptLimiter(w io.Writer, max int64) *transcriptLimiter {
	return &transcriptLimiter{w: w, max: max}
}

// Write never fails because of the limits; it returns the underlying
// writer's first error.
func (l *transcriptLimiter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i+1]
		}
		p = p[len(chunk):]
		if l.skipping {
			l.dropped += int64(len(chunk))
		} else if len(l.line)+len(chunk) > maxTranscriptLine {
			l.dropped += int64(len(l.line) + len(chunk))
			l.line, l.skipping = l.line[:0], true
		} else {
			l.line = append(l.line, chunk...)
		}
		if i >= 0 {
			if l.skipping {
				l.lines++
				l.skipping = false
			} else {
				l.emit(l.line)
			}
			l.line = l.line[:0]
		}
	}
	return n, l.err
}

// emit writes one whole line when it fits or is an accounting line.
func (l *transcriptLimiter) emit(line []byte) {
	if l.err != nil {
		return
	}
	if l.written+int64(len(line)) > l.max && !accountingLine(line) {
		l.dropped += int64(len(line))
		l.lines++
		return
	}
	_, l.err = l.w.Write(line)
	l.written += int64(len(line))
}

// Close writes what is left of an unterminated line (under the same rule)
// and the truncation note.
func (l *transcriptLimiter) Close() error {
	if len(l.line) > 0 && !l.skipping {
		l.emit(append(l.line, '\n'))
	} else if l.skipping {
		l.lines++
	}
	l.line = nil
	if l.lines > 0 && l.err == nil {
		note, _ := json.Marshal(map[string]any{"type": "prodigy_transcript_truncated", "dropped_bytes": l.dropped, "dropped_lines": l.lines,
			"note": fmt.Sprintf("lines over %d MiB, and lines past %d MiB other than result, rate_limit_event and api_retry events, were dropped", maxTranscriptLine>>20, l.max>>20)})
		_, l.err = l.w.Write(append(note, '\n'))
	}
	return l.err
}

// accountingLine says whether a transcript line is one the engine reads
// for spend and provider limits.
func accountingLine(line []byte) bool {
	var ev struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	return ev.Type == "result" || ev.Type == "rate_limit_event" || (ev.Type == "system" && ev.Subtype == "api_retry")
}
