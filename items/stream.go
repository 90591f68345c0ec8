package items

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Each runs the input pipeline as Load does and calls fn with each item,
// in order; it returns the number of items. When the input is a file
// holding a JSON array and the pipeline only pages it (no json_path,
// filter, sort_by or distinct), the array is decoded one element at a
// time, so memory holds the input's bytes and one decoded item (plus the
// ids seen, with id_field) where Load holds every item decoded at once;
// the items are the same (same ids, indexes and data bytes). Any other
// input goes through Load. When Each returns an error, the items fn
// already received are void; the error is the one Load gives, or fn's.
func Each(ctx context.Context, o Options, fn func(Item) error) (int, error) {
	c, err := compile(o)
	if err != nil {
		return 0, err
	}
	src, err := readInput(ctx, o)
	if err != nil {
		return 0, err
	}
	if !c.streamable(src) {
		list, err := c.load(o, src)
		if err != nil {
			return 0, err
		}
		for _, it := range list {
			if err := fn(it); err != nil {
				return 0, err
			}
		}
		return len(list), nil
	}
	var fnErr error
	n, err := c.stream(o, src, func(it Item) error {
		fnErr = fn(it)
		return fnErr
	})
	switch {
	case fnErr != nil:
		return 0, fnErr
	case err != nil:
		// The input or an id is wrong: Load words the error.
		if _, lerr := c.load(o, src); lerr != nil {
			return 0, lerr
		}
		return 0, err
	}
	return n, nil
}

// streamable: the pipeline only pages a file's top-level array.
func (c compiled) streamable(src source) bool {
	if src.fromFile == "" || c.path != nil || c.filter != nil || len(c.sort) > 0 || c.distinct != nil {
		return false
	}
	trimmed := bytes.TrimLeft(src.data, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
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
var errStream = errors.New("the input cannot be streamed")

// stream decodes the array element by element, pages it and calls fn.
func (c compiled) stream(o Options, src source, fn func(Item) error) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(src.data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, errStream
	}
	var seen map[string]bool
	if c.idField != nil {
		seen = map[string]bool{}
	}
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
		it := Item{ID: DefaultID(n), Index: n, Data: data}
		if c.idField != nil {
			f, _ := c.idField.lookup(v)
			id, why := scalarID(f)
			if why != "" || seen[id] {
				return 0, errStream
			}
			seen[id] = true
			it.ID = id
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
	return n, nil
}
