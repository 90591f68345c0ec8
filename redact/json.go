package redact

import (
	"bytes"
	"encoding/json"
	"io"
)

// JSON redacts JSON text (one value, or JSON lines). Each string literal
// is decoded, redacted and re-encoded when it changed, so a secret written
// with escapes (quotes, newlines, \u sequences) is found and the result
// stays valid JSON with its layout kept. Text outside string literals, and
// text that is not a valid string literal, is redacted as plain text; input
// that is not a JSON stream is also redacted as a whole, so non-JSON text
// is covered as Bytes covers it. b itself is returned when it holds no
// secret.
func (r *Redactor) JSON(b []byte) []byte {
	var out []byte
	changed := false
	// emit appends segment b[start:start+len(seg)], or its redaction red;
	// nothing is copied until the first change.
	emit := func(start int, seg, red []byte, ok bool) {
		switch {
		case ok && !changed:
			changed = true
			out = append(make([]byte, 0, len(b)+16), b[:start]...)
			out = append(out, red...)
		case ok:
			out = append(out, red...)
		case changed:
			out = append(out, seg...)
		}
	}
	plain := func(start, end int) {
		red, ok := r.text(b[start:end])
		emit(start, b[start:end], red, ok)
	}
	p := 0 // start of the current plain segment
	for i := 0; i < len(b); {
		if b[i] != '"' {
			i++
			continue
		}
		j, esc := i+1, false
		for j < len(b) && b[j] != '"' && b[j] != '\n' {
			if b[j] == '\\' {
				esc = true
				j++
			}
			j++
		}
		if j >= len(b) || b[j] != '"' { // unterminated: plain text
			i = min(j, len(b))
			continue
		}
		plain(p, i)
		lit := b[i : j+1]
		switch {
		case !esc:
			red, ok := r.text(lit[1 : len(lit)-1])
			if ok {
				red = append(append([]byte{'"'}, red...), '"')
			}
			emit(i, lit, red, ok)
		default:
			var s string
			if err := json.Unmarshal(lit, &s); err != nil {
				plain(i, j+1)
				break
			}
			if red, ok := r.text([]byte(s)); ok {
				emit(i, lit, []byte(jsonString(string(red), true)), true)
			} else {
				emit(i, lit, nil, false)
			}
		}
		i, p = j+1, j+1
	}
	plain(p, len(b))
	if !changed {
		out = b
	}
	// Text that is not JSON can hold a secret across a quote (a"b), which
	// the string-literal split hides: redact the result once more as text
	// unless it is a valid JSON stream, where such a match is structure.
	if spans := r.orShapes().find(out); len(spans) > 0 && !validStream(out) {
		return apply(out, spans)
	}
	return out
}

// validStream reports whether b is a sequence of JSON values.
func validStream(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			return true
		} else if err != nil {
			return false
		}
	}
}

// jsonString encodes s as a JSON string literal.
func jsonString(s string, escapeHTML bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s) // a string always encodes
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
