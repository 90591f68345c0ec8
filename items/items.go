package items

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/theory/jsonpath"
)

// Options selects the work items of a map phase. Field names follow the
// workflow's map keys (input, json_path, filter, sort_by, distinct, offset,
// max_items).
type Options struct {
	// Input is a JSON file path (relative to Dir; $VAR and ${VAR} are
	// expanded from Env to find it) if such a file exists, else a command
	// run with `bash -c` in Dir. A missing one-word *.json / *.jsonl input is
	// reported as a missing file instead of being run.
	Input string
	// JSONPath is an RFC 9535 query applied to the parsed input; "" means the
	// input array itself (a non-array value becomes one item). When the query
	// selects exactly one node and that node is an array, its elements are
	// the items (so "$.items" works like "$.items[*]"). Selecting nothing
	// yields zero items, not an error.
	JSONPath string
	// Filter is an expression (see [CompileFilter]) evaluated per item; the
	// item's fields are top-level variables and the whole item is `item`.
	Filter string
	// SortBy is "field [ASC|DESC] [NULLS FIRST|LAST], …" with dotted/indexed
	// field paths; missing and null fields sort last unless NULLS FIRST.
	// The sort is stable.
	SortBy string
	// Distinct is a field path: only the first item per distinct value is
	// kept (missing and null count as one value, null).
	Distinct string
	// Offset skips that many items after sorting and distinct.
	Offset int
	// MaxItems limits the number of items; 0 means no limit.
	MaxItems int
	// IDField is a field path (like Distinct) whose value becomes each
	// item's ID instead of [DefaultID]; see assignIDs for what is an error.
	IDField string
	// Dir is the working directory of the command and the base of relative paths.
	Dir string
	// Env is the input command's environment; nil means os.Environ().
	Env []string
	// Timeout bounds the input command; 0 means [DefaultTimeout]. On timeout
	// the command's whole process group is killed.
	Timeout time.Duration
}

// Item is one work item.
type Item struct {
	// ID is [DefaultID] (Prodigy's "item_<Index>"), or the value of
	// Options.IDField.
	ID string `json:"id"`
	// Index is the item's position after the whole pipeline, from 0.
	Index int `json:"index"`
	// Data is the item as compact JSON (object keys sorted, numbers exactly
	// as in the input, no HTML escaping). A line of non-JSON command output
	// is a JSON string holding the line, so `${item}` renders the line.
	Data json.RawMessage `json:"data"`
}

// compiled holds the parsed selection options.
type compiled struct {
	path     *jsonpath.Path
	filter   *Filter
	sort     []sortKey
	distinct *fieldPath
	idField  *fieldPath
}

// Check compiles JSONPath, Filter, SortBy and Distinct and validates Offset
// and MaxItems without reading any input. Every problem is reported (joined
// with errors.Join), each naming its option and why.
func Check(o Options) error {
	_, err := compile(o)
	return err
}

func compile(o Options) (compiled, error) {
	var c compiled
	var errs []error
	if o.JSONPath != "" {
		p, err := jsonpath.Parse(o.JSONPath)
		if err != nil {
			hint := ""
			if !strings.HasPrefix(strings.TrimSpace(o.JSONPath), "$") {
				hint = " (a JSONPath starts with $, e.g. $.items[*])"
			}
			errs = append(errs, fmt.Errorf("invalid json_path %q: %w%s", o.JSONPath, err, hint))
		}
		c.path = p
	}
	if strings.TrimSpace(o.Filter) != "" {
		f, err := CompileFilter(o.Filter)
		if err != nil {
			errs = append(errs, err)
		}
		c.filter = f
	}
	keys, err := parseSortBy(o.SortBy)
	if err != nil {
		errs = append(errs, err)
	}
	c.sort = keys
	if d := strings.TrimSpace(o.Distinct); d != "" {
		f, err := parseFieldPath(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid distinct %q: %w", o.Distinct, err))
		}
		c.distinct = &f
	}
	if d := strings.TrimSpace(o.IDField); d != "" {
		f, err := parseFieldPath(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid id_field %q: %w", o.IDField, err))
		}
		c.idField = &f
	}
	if o.Offset < 0 {
		errs = append(errs, fmt.Errorf("invalid offset %d: must be 0 or more", o.Offset))
	}
	if o.MaxItems < 0 {
		errs = append(errs, fmt.Errorf("invalid max_items %d: must be 0 (no limit) or more", o.MaxItems))
	}
	return c, errors.Join(errs...)
}

// Load reads the input and runs the pipeline: JSONPath → filter → sort →
// distinct → offset → limit. Options are checked first, so an invalid
// option never runs the input command. Errors name what went wrong: a
// missing file, a failing command (*CommandError with exit code and stderr
// tail), invalid JSON (with line and column), a bad option, or a filter that
// fails on an item (with the item's position in the selection).
func Load(ctx context.Context, o Options) ([]Item, error) {
	c, err := compile(o)
	if err != nil {
		return nil, err
	}
	src, err := readInput(ctx, o)
	if err != nil {
		return nil, err
	}
	return c.load(o, src)
}

// selectValues applies the JSONPath to root. Without a JSONPath the input
// must be an array of items: anything else is an error that says how to
// select the items, rather than a silent single item.
func (c compiled) selectValues(root any) ([]any, error) {
	if c.path == nil {
		if arr, ok := root.([]any); ok {
			return arr, nil
		}
		return nil, fmt.Errorf("input is a JSON %s, not an array of items: set map.json_path to select them (e.g. \"$.items[*]\", or \"$\" to process the whole value as one item)", jsonKind(root))
	}
	nodes := c.path.Select(root)
	if len(nodes) == 1 {
		if arr, ok := nodes[0].([]any); ok {
			return arr, nil
		}
	}
	return []any(nodes), nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	case []any:
		return "array"
	}
	return "number"
}

func (c compiled) filterValues(vals []any) ([]any, error) {
	if c.filter == nil {
		return vals, nil
	}
	kept := vals[:0:0]
	for i, v := range vals {
		ok, err := c.filter.Match(filterEnv(v))
		if err != nil {
			return nil, fmt.Errorf("item %d of the selection: %w", i, err)
		}
		if ok {
			kept = append(kept, v)
		}
	}
	return kept, nil
}

// filterEnv exposes an item's fields as variables and the item as `item`.
func filterEnv(v any) map[string]any {
	obj, _ := v.(map[string]any)
	env := make(map[string]any, len(obj)+1)
	for k, f := range obj {
		env[k] = f
	}
	env["item"] = v
	return env
}

func (c compiled) distinctValues(vals []any) []any {
	if c.distinct == nil {
		return vals
	}
	seen := make(map[string]bool, len(vals))
	kept := vals[:0:0]
	for _, v := range vals {
		f, _ := c.distinct.lookup(v)
		key, err := compactJSON(numbersToFloat(f))
		if err != nil || !seen[string(key)] {
			kept = append(kept, v)
		}
		seen[string(key)] = true
	}
	return kept
}

func page(vals []any, offset, limit int) []any {
	if offset >= len(vals) {
		return nil
	}
	vals = vals[offset:]
	if limit > 0 && limit < len(vals) {
		vals = vals[:limit]
	}
	return vals
}

func toItems(vals []any) ([]Item, error) {
	out := make([]Item, 0, len(vals))
	for i, v := range vals {
		data, err := compactJSON(v)
		if err != nil {
			return nil, fmt.Errorf("failed to encode item %d: %w", i, err)
		}
		out = append(out, Item{ID: DefaultID(i), Index: i, Data: data})
	}
	return out, nil
}

// compactJSON encodes v without HTML escaping or a trailing newline.
func compactJSON(v any) (json.RawMessage, error) {
	if b, ok := appendCompact(nil, v); ok {
		return b, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
