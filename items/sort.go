package items

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// sortKey is one clause of sort_by: "field [ASC|DESC] [NULLS FIRST|LAST]".
type sortKey struct {
	field      fieldPath
	desc       bool
	nullsFirst bool
}

// parseSortBy parses a comma-separated sort_by value. Keywords are
// case-insensitive; the default is ASC with nulls (and missing fields) last
// in either direction.
func parseSortBy(src string) ([]sortKey, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	var keys []sortKey
	for i, clause := range strings.Split(src, ",") {
		k, err := parseSortClause(clause)
		if err != nil {
			return nil, fmt.Errorf("invalid sort_by %q: clause %d %q: %w", src, i+1, strings.TrimSpace(clause), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func parseSortClause(clause string) (sortKey, error) {
	words := strings.Fields(clause)
	if len(words) == 0 {
		return sortKey{}, fmt.Errorf("empty clause (want `field [ASC|DESC] [NULLS FIRST|LAST]`)")
	}
	f, err := parseFieldPath(words[0])
	if err != nil {
		return sortKey{}, err
	}
	k := sortKey{field: f}
	rest := words[1:]
	if len(rest) > 0 {
		switch strings.ToUpper(rest[0]) {
		case "ASC":
			rest = rest[1:]
		case "DESC":
			k.desc = true
			rest = rest[1:]
		}
	}
	if len(rest) > 0 {
		if len(rest) != 2 || !strings.EqualFold(rest[0], "NULLS") {
			return k, fmt.Errorf("unexpected %q (want `field [ASC|DESC] [NULLS FIRST|LAST]`)", strings.Join(rest, " "))
		}
		switch strings.ToUpper(rest[1]) {
		case "FIRST":
			k.nullsFirst = true
		case "LAST":
		default:
			return k, fmt.Errorf("NULLS must be followed by FIRST or LAST, not %q", rest[1])
		}
	}
	return k, nil
}

// sortValues stably sorts vals (decoded items) by keys.
func sortValues(vals []any, keys []sortKey) {
	if len(keys) == 0 {
		return
	}
	slices.SortStableFunc(vals, func(a, b any) int {
		for _, k := range keys {
			if c := k.compare(a, b); c != 0 {
				return c
			}
		}
		return 0
	})
}

func (k sortKey) compare(a, b any) int {
	va, _ := k.field.lookup(a)
	vb, _ := k.field.lookup(b)
	switch {
	case va == nil && vb == nil:
		return 0
	case va == nil:
		if k.nullsFirst {
			return -1
		}
		return 1
	case vb == nil:
		if k.nullsFirst {
			return 1
		}
		return -1
	}
	c := orderValues(va, vb)
	if k.desc {
		return -c
	}
	return c
}

// orderValues is a total order on non-null JSON values: numbers < strings <
// booleans < arrays < objects; within a kind the natural order (arrays and
// objects by their compact JSON).
func orderValues(a, b any) int {
	ra, rb := kindRank(a), kindRank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case 0:
		fa, _ := toFloat(a)
		fb, _ := toFloat(b)
		return cmp3(fa, fb)
	case 1:
		return strings.Compare(a.(string), b.(string))
	case 2:
		return cmp3(boolInt(a.(bool)), boolInt(b.(bool)))
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return strings.Compare(string(ja), string(jb))
}

func kindRank(v any) int {
	if _, ok := toFloat(v); ok {
		return 0
	}
	switch v.(type) {
	case string:
		return 1
	case bool:
		return 2
	case []any:
		return 3
	}
	return 4
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
