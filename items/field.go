package items

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// fieldStep is one step of a field path: an object key, or an array index
// when isIndex is set.
type fieldStep struct {
	key     string
	index   int
	isIndex bool
}

// fieldPath is a parsed field reference such as "a.b", "tags[0]" or
// "location.lines[2].start" used by sort_by and distinct.
type fieldPath struct {
	src   string
	steps []fieldStep
}

// parseFieldPath parses a dotted field path with optional [n] indexes.
func parseFieldPath(src string) (fieldPath, error) {
	p := fieldPath{src: src}
	if src == "" {
		return p, fmt.Errorf("empty field name")
	}
	rest := src
	for rest != "" {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p, fmt.Errorf("field %q: unclosed '['", src)
			}
			n, err := strconv.Atoi(rest[1:end])
			if err != nil || n < 0 {
				return p, fmt.Errorf("field %q: index %q is not a non-negative integer", src, rest[1:end])
			}
			p.steps = append(p.steps, fieldStep{index: n, isIndex: true})
			rest = rest[end+1:]
			if strings.HasPrefix(rest, ".") {
				rest = rest[1:]
				if rest == "" || rest[0] == '.' || rest[0] == '[' {
					return p, fmt.Errorf("field %q: empty name after '.'", src)
				}
			}
			continue
		}
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		key := rest[:end]
		if key == "" {
			return p, fmt.Errorf("field %q: empty name", src)
		}
		if strings.ContainsAny(key, " \t\n]") {
			return p, fmt.Errorf("field %q: unexpected character in name %q", src, key)
		}
		p.steps = append(p.steps, fieldStep{key: key})
		rest = rest[end:]
		if strings.HasPrefix(rest, ".") {
			rest = rest[1:]
			if rest == "" || rest[0] == '.' || rest[0] == '[' {
				return p, fmt.Errorf("field %q: empty name after '.'", src)
			}
		}
	}
	return p, nil
}

// lookup returns the value at p inside v and whether every step existed.
func (p fieldPath) lookup(v any) (any, bool) {
	for _, s := range p.steps {
		if s.isIndex {
			arr, ok := v.([]any)
			if !ok || s.index >= len(arr) {
				return nil, false
			}
			v = arr[s.index]
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok = obj[s.key]
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// numbersToFloat returns v with every json.Number replaced by a float64 (or
// kept as a string when it does not fit one), copying containers that change.
func numbersToFloat(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = numbersToFloat(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = numbersToFloat(e)
		}
		return out
	default:
		return v
	}
}
