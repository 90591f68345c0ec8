package items

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"strings"
)

// Each runs the input pipeline as Load does and calls fn with each item,
// in order; it returns the number of items. When the input is a file
// holding a JSON array and the pipeline only pages it (no json_path,
// filter, sort_by or distinct), the file is decoded one element at a time
// as it is read, so memory holds one decoded item (plus the ids, with
// id_field, in a file beyond half a million) where Load holds the file and every item decoded at once; the
// items are the same (same ids, indexes and data bytes). Any other input
// goes through Load. When Each returns an error, the items fn already
// received are void; the error is the one Load gives, or fn's.
func Each(ctx context.Context, o Options, fn func(Item) error) (int, error) {
	c, err := compile(o)
	if err != nil {
		return 0, err
	}
	streamed := false
	if f := c.streamFile(o); f != nil {
		var fnErr error
		n, err := c.stream(o, f, func(it Item) error {
			streamed = true
			fnErr = fn(it)
			return fnErr
		})
		_ = f.Close()
		switch {
		case fnErr != nil:
			return 0, fnErr
		case err == nil:
			return n, nil
		}
		// The input or an id is wrong: Load words the error.
	}
	src, err := readInput(ctx, o)
	if err != nil {
		return 0, err
	}
	list, err := c.load(o, src)
	if err != nil {
		return 0, err
	}
	if streamed {
		return 0, fmt.Errorf("input file %q changed while it was read", src.fromFile)
	}
	for _, it := range list {
		if err := fn(it); err != nil {
			return 0, err
		}
	}
	return len(list), nil
}

// streamFile opens the input when the pipeline only pages a file whose
// JSON value is an array; nil otherwise.
func (c compiled) streamFile(o Options) *os.File {
	if c.path != nil || c.filter != nil || len(c.sort) > 0 || c.distinct != nil {
		return nil
	}
	in := strings.TrimSpace(o.Input)
	if in == "" {
		return nil
	}
	f, err := os.Open(resolvePath(o.Dir, os.Expand(in, envLookup(o.Env))))
	if err != nil {
		return nil
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil
	}
	r := bufio.NewReader(f)
	for {
		b, err := r.ReadByte()
		if err == nil && b == '[' {
			if _, err := f.Seek(0, io.SeekStart); err == nil {
				return f
			}
		}
		if err != nil || b == '[' || (b != ' ' && b != '\t' && b != '\r' && b != '\n') {
			_ = f.Close()
			return nil
		}
	}
}

// load is Load after the input is read.
func (c compiled) load(o Options, src source) ([]Item, error) {
	root, err := parseInput(src)
	if err != nil {
		return nil, err
	}
	vals, err := c.selectValues(root)
	if err != nil {
		return nil, err
	}
	if vals, err = c.filterValues(vals); err != nil {
		return nil, err
	}
	sortValues(vals, c.sort)
	vals = c.distinctValues(vals)
	vals = page(vals, o.Offset, o.MaxItems)
	list, err := toItems(vals)
	if err != nil || c.idField == nil {
		return list, err
	}
	if err := assignIDs(list, vals, *c.idField); err != nil {
		return nil, err
	}
	return list, nil
}

// errStream: the streamed input is not what load accepts; load says why.
// errStream: the streamed input is not what load accepts; load says why.
var errStream = errors.New("the input cannot be streamed")

// stream decodes the array element by element as it reads r, pages it
// and calls fn. Ids (with id_field) are checked for uniqueness at the
// end, by sorting them.
func (c compiled) stream(o Options, r io.Reader, fn func(Item) error) (int, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 256<<10))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, errStream
	}
	// Ids are checked for duplicates by their 64-bit hashes, so a large
	// input's ids are not all held (idHashes: a large input's hashes go
	// to a file): two equal hashes (a duplicate, or once in ~10^7 inputs
	// of a million items a collision) send the input to Load, which words
	// the error or, for a collision, loads it whole.
	var ids idHashes
	defer ids.close()
	seed := maphash.MakeSeed()
	sel, n := 0, 0
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, errStream
		}
		keep := sel >= o.Offset && (o.MaxItems <= 0 || n < o.MaxItems)
		sel++
		if !keep {
			continue // still decoded: Load rejects invalid JSON anywhere
		}
		data, err := compactJSON(v)
		if err != nil {
			return 0, fmt.Errorf("failed to encode item %d: %w", n, err)
		}
		it := Item{Index: n, Data: data}
		if c.idField != nil {
			f, _ := c.idField.lookup(v)
			id, why := scalarID(f)
			if why != "" {
				return 0, errStream
			}
			it.ID = id
			ids.add(maphash.String(seed, id))
		} else {
			it.ID = DefaultID(n)
		}
		if err := fn(it); err != nil {
			return 0, err
		}
		n++
	}
	if t, err := dec.Token(); err != nil || t != json.Delim(']') {
		return 0, errStream
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return 0, errStream
	}
	if dup, err := ids.duplicate(); dup || err != nil {
		return 0, errStream
	}
	return n, nil
}
