package cmdutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/prodigy-action/prodigy-action/runner"
)

// ResultJSON writes a runner.Result as WriteJSON does, byte for byte, with
// its items streamed: Head writes the job's fields, Item each item as it
// comes, Close the rest. Neither the item list nor the document is ever
// whole in memory, so a job of any size prints in memory independent of
// its item count (WriteJSON of a 10,000-item result built and indented
// about 30 MB before writing a byte).
type ResultJSON struct {
	w    *bufio.Writer
	tail []byte // what follows "items" in the head's encoding
	n    int    // items written
	err  error  // the first write error
}

// NewResultJSON returns a writer to out.
func NewResultJSON(out io.Writer) *ResultJSON {
	return &ResultJSON{w: bufio.NewWriterSize(out, 64<<10)}
}

// itemsSlot is how the head's encoding holds the item list it leaves out.
const itemsSlot = `"items": null`

// Head writes res's fields up to its item list (res.Items is ignored).
func (r *ResultJSON) Head(res *runner.Result) error {
	head := *res
	head.Items = nil
	var b bytes.Buffer
	if err := WriteJSON(&b, &head); err != nil {
		return err
	}
	before, after, ok := bytes.Cut(b.Bytes(), []byte(itemsSlot))
	if !ok {
		return fmt.Errorf("write JSON: no items field")
	}
	r.tail = after
	_, _ = r.w.Write(before)
	_, err := r.w.WriteString(`"items": [`)
	return r.keep(err)
}

// Item writes the next item.
func (r *ResultJSON) Item(it runner.ItemOutcome) error {
	b, err := json.MarshalIndent(it, "    ", "  ")
	if err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	sep := ",\n    "
	if r.n == 0 {
		sep = "\n    "
	}
	r.n++
	_, _ = r.w.WriteString(sep)
	_, err = r.w.Write(b)
	return r.keep(err)
}

// Close ends the item list and the document and flushes.
func (r *ResultJSON) Close() error {
	if r.n > 0 {
		_, _ = r.w.WriteString("\n  ")
	}
	_, _ = r.w.WriteString("]")
	_, _ = r.w.Write(r.tail)
	return r.keep(r.w.Flush())
}

func (r *ResultJSON) keep(err error) error {
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("write JSON: %w", err)
	}
	return r.err
}

// WriteResultJSON writes res as WriteJSON does, streaming its items (see
// ResultJSON), also those read from the job's checkpoint (EachItem). A
// result without an item list (a summary) is written as it is.
func WriteResultJSON(out io.Writer, res *runner.Result) error {
	if !res.HasItems() {
		return WriteJSON(out, res)
	}
	rj := NewResultJSON(out)
	if err := rj.Head(res); err != nil {
		return err
	}
	if err := res.EachItem(rj.Item); err != nil {
		return err
	}
	return rj.Close()
}
