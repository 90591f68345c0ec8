package items

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultID is the id an item gets without map.id_field: "item_<index>",
// Prodigy's scheme, where index is the item's position after the whole
// pipeline (filter, sort, distinct, offset, limit), from 0. Such ids change
// when the input's order or the selection changes; set map.id_field for
// ids that follow the item.
func DefaultID(index int) string { return "item_" + strconv.Itoa(index) }

// maxIDBytes bounds an id_field value (the DLQ store escapes any id into a
// safe file name; this keeps ids readable in tables and commit trailers).
const maxIDBytes = 200

// assignIDs sets every item's ID to the value of the field at path (a
// string as is, a number or boolean as its JSON text). A missing, null,
// empty, non-scalar, over-long or control-character value, and a value
// shared by two items, is an input error naming the item(s) by position
// and label.
func assignIDs(list []Item, vals []any, path fieldPath) error {
	seen := make(map[string]int, len(list))
	for i, v := range vals {
		f, _ := path.lookup(v)
		id, why := scalarID(f)
		if why != "" {
			return fmt.Errorf("map.id_field %q: item %d (%s) %s", path.src, i, Label(list[i].Data), why)
		}
		if j, dup := seen[id]; dup {
			return fmt.Errorf("map.id_field %q: items %d (%s) and %d (%s) share the id %q; ids must be unique",
				path.src, j, Label(list[j].Data), i, Label(list[i].Data), id)
		}
		seen[id] = i
		list[i].ID = id
	}
	return nil
}

// scalarID renders an id_field value, or says why it cannot be an id.
func scalarID(v any) (string, string) {
	var id string
	switch x := v.(type) {
	case nil:
		return "", "has no value for it (missing or null)"
	case string:
		id = x
	case json.Number:
		id = x.String()
	case float64:
		id = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		id = strconv.FormatBool(x)
	default:
		k := jsonKind(v)
		art := "a"
		if strings.ContainsRune("aeiou", rune(k[0])) {
			art = "an"
		}
		return "", fmt.Sprintf("has %s %s there; an id must be a string or a number", art, k)
	}
	switch {
	case strings.TrimSpace(id) == "":
		return "", "has an empty value for it"
	case len(id) > maxIDBytes:
		return "", fmt.Sprintf("has a value of %d bytes (at most %d)", len(id), maxIDBytes)
	case !utf8.ValidString(id):
		return "", "has a value that is not valid UTF-8"
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return "", "has a value with a control character (newline, tab, …)"
	}
	return id, ""
}

// labelRunes bounds a generated label.
const labelRunes = 60

// Label is a short one-line rendering of an item for progress lines and
// tables: a string item is its text, anything else its compact JSON; either
// is cut to 60 characters (with "…") and control characters become spaces.
func Label(data json.RawMessage) string {
	s := strings.TrimSpace(string(data))
	var str string
	var b bytes.Buffer
	if json.Unmarshal(data, &str) == nil {
		s = str
	} else if json.Compact(&b, data) == nil {
		s = b.String()
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > labelRunes {
		r := []rune(s)
		s = string(r[:labelRunes-1]) + "…"
	}
	return s
}

// ItemLabel is the label of an item: its id when the workflow sets
// map.id_field (idField != ""), else Label(data).
func ItemLabel(id string, data json.RawMessage, idField string) string {
	if idField != "" {
		return id
	}
	return Label(data)
}
