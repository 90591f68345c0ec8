package interp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Vars is the variable scope of one step. Keys are variable names, some of
// them dotted: "item" (any JSON value; ${item.a.b} and ${item.list[0]} reach
// inside it), "item_id", "item_index", "item_total", "attempt",
// "shell.output" and any capture variable name, workflow env names, and in
// reduce "map.total", "map.successful", "map.failed", "map.results".
//
// Values may be Go values (strings, numbers, bools, maps, slices, structs)
// or json.RawMessage; paths are resolved inside all of them.
type Vars map[string]any

// Render renders a value for text: strings raw, numbers and bools as JSON,
// null (nil) as "", objects and arrays as compact JSON (no HTML escaping).
// A json.RawMessage renders as the value it encodes.
func Render(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case json.RawMessage:
		return renderRawJSON(x)
	}
	b, err := compactJSONNoEscape(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return renderRawJSON(b)
}

// renderRawJSON renders encoded JSON: a string as its text, null as "", anything
// else compacted.
func renderRawJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return ""
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// compactJSONNoEscape encodes v without HTML escaping or a trailing newline.
func compactJSONNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Interpolate replaces every ${name} / ${a.b.c} / ${list[0]} in s; it is for
// plain text (claude prompts, write_file path and content). ${name:-text}
// uses text when the variable is unknown or renders empty. An unknown
// variable or path is an error naming the placeholder and listing the
// available names. $${ is a literal ${; a bare $NAME is left alone.
func Interpolate(s string, vars Vars) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			out.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			ph, end, err := parseVarPlaceholder(s, i)
			if err != nil {
				return "", err
			}
			val, err := ph.value(vars)
			if err != nil {
				return "", err
			}
			out.WriteString(val)
			i = end
		default:
			out.WriteByte(s[i])
			i++
		}
	}
	return out.String(), nil
}

// varPlaceholder is a parsed ${…}.
type varPlaceholder struct {
	text       string // the whole ${…} as written
	root       string // first name segment
	steps      []varPathStep
	def        string
	hasDefault bool
}

type varPathStep struct {
	key     string
	index   int
	isIndex bool
}

var varPlaceholderRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)(?::-(.*))?$`)
var varStepRE = regexp.MustCompile(`\.([A-Za-z0-9_-]+)|\[([0-9]+)\]`)

// parseVarPlaceholder parses the ${…} starting at s[i] and returns it with the
// offset just past its closing brace.
func parseVarPlaceholder(s string, i int) (varPlaceholder, int, error) {
	ph, end, ok := scanVarPlaceholder(s, i)
	if end < 0 {
		return ph, 0, fmt.Errorf("unterminated placeholder %q at line %d (write $${ for a literal ${)", clipForError(s[i:], 40), lineNumberAt(s, i))
	}
	if !ok {
		return ph, 0, fmt.Errorf("invalid placeholder %s at line %d: want ${name}, ${name.field}, ${name[0]} or ${name:-default} (write $${ for a literal ${)",
			ph.text, lineNumberAt(s, i))
	}
	return ph, end, nil
}

// scanVarPlaceholder reads ${…} at s[i]. end is -1 when there is no closing
// brace; ok is false when the content is not placeholder syntax (it may be
// a bash expansion such as ${#x} or ${x//a/b}).
func scanVarPlaceholder(s string, i int) (ph varPlaceholder, end int, ok bool) {
	j := strings.IndexByte(s[i+2:], '}')
	if j < 0 {
		return varPlaceholder{text: s[i:]}, -1, false
	}
	end = i + 2 + j + 1
	ph.text = s[i:end]
	m := varPlaceholderRE.FindStringSubmatch(s[i+2 : end-1])
	if m == nil || strings.Contains(m[3], "${") {
		return ph, end, false
	}
	ph.root = m[1]
	for _, sm := range varStepRE.FindAllStringSubmatch(m[2], -1) {
		if sm[1] != "" {
			ph.steps = append(ph.steps, varPathStep{key: sm[1]})
		} else {
			n, err := strconv.Atoi(sm[2])
			if err != nil {
				return ph, end, false
			}
			ph.steps = append(ph.steps, varPathStep{index: n, isIndex: true})
		}
	}
	ph.hasDefault = strings.Contains(s[i+2:end-1], ":-")
	ph.def = m[3]
	return ph, end, true
}

// value resolves and renders the placeholder, applying its default.
func (ph varPlaceholder) value(vars Vars) (string, error) {
	v, err := ph.resolve(vars)
	if ph.hasDefault && (err != nil || Render(v) == "") {
		return ph.def, nil
	}
	if err != nil {
		return "", err
	}
	return Render(v), nil
}

// dotted reports whether the placeholder has a .field step, which no bash
// expansion has.
func (ph varPlaceholder) dotted() bool {
	for _, st := range ph.steps {
		if !st.isIndex {
			return true
		}
	}
	return false
}

// resolve finds the variable: the longest dotted prefix of the path that is
// a key of vars, then the rest of the path inside its value.
func (ph varPlaceholder) resolve(vars Vars) (any, error) {
	keys := []string{ph.root}
	for _, st := range ph.steps {
		if st.isIndex {
			break
		}
		keys = append(keys, st.key)
	}
	for n := len(keys); n >= 1; n-- {
		name := strings.Join(keys[:n], ".")
		v, ok := vars[name]
		if !ok {
			continue
		}
		return walkVarPath(ph, name, v, ph.steps[n-1:])
	}
	return nil, fmt.Errorf("unknown variable %s (available: %s)", ph.text, availableVarNames(vars))
}

// known reports whether the placeholder names a variable of the scope
// (some dotted prefix of its path is a name in vars; the rest of the path
// is only known at run time). A placeholder with a :-default is always
// accepted, as it is at run time.
func (ph varPlaceholder) known(vars Vars) error {
	if ph.hasDefault {
		return nil
	}
	name := ph.root
	if _, ok := vars[name]; ok {
		return nil
	}
	for _, st := range ph.steps {
		if st.isIndex {
			break
		}
		name += "." + st.key
		if _, ok := vars[name]; ok {
			return nil
		}
	}
	if ph.root == "map" {
		return fmt.Errorf("%s is only available in reduce steps (after the map phase)", ph.text)
	}
	if hint := closestName(ph.root, vars); hint != "" {
		return fmt.Errorf("unknown variable %s: no variable %q here (did you mean %s?); available: %s", ph.text, ph.root, hint, availableVarNames(vars))
	}
	return fmt.Errorf("unknown variable %s: no variable %q here; available: %s", ph.text, ph.root, availableVarNames(vars))
}

// closestName suggests a root of vars within edit distance 2 of root.
func closestName(root string, vars Vars) string {
	best, bestD := "", 3
	for k := range vars {
		r, _, _ := strings.Cut(k, ".")
		if d := editDistance(root, r); d < bestD || d == bestD && r < best {
			best, bestD = r, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// walkVarPath follows steps inside v, whose own name is name.
func walkVarPath(ph varPlaceholder, name string, v any, steps []varPathStep) (any, error) {
	at := name
	for _, st := range steps {
		v = toGenericJSON(v)
		if st.isIndex {
			arr, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("unknown variable %s: %s is %s, not an array", ph.text, at, jsonKindName(v))
			}
			if st.index >= len(arr) {
				return nil, fmt.Errorf("unknown variable %s: %s has %d element(s), no index %d", ph.text, at, len(arr), st.index)
			}
			v = arr[st.index]
			at += "[" + strconv.Itoa(st.index) + "]"
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("unknown variable %s: %s is %s, not an object", ph.text, at, jsonKindName(v))
		}
		next, ok := obj[st.key]
		if !ok {
			return nil, fmt.Errorf("unknown variable %s: %s has no field %q (fields: %s)", ph.text, at, st.key, listSortedNames(mapKeyNames(obj)))
		}
		v = next
		at += "." + st.key
	}
	return v, nil
}

// toGenericJSON turns v into the shapes encoding/json decodes into (maps, slices,
// json.Number…) so paths can walk typed Go values and raw JSON alike.
func toGenericJSON(v any) any {
	switch v.(type) {
	case nil, string, bool, json.Number, float64, map[string]any, []any:
		return v
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return v
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return v
	}
	return out
}

func jsonKindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}

func availableVarNames(vars Vars) string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		if !strings.HasPrefix(k, "__") {
			names = append(names, k)
		}
	}
	return listSortedNames(names)
}

func mapKeyNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// listSortedNames sorts names and joins the first few.
func listSortedNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	const maxListed = 20
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(", … (%d more)", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

func lineNumberAt(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

func clipForError(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ItemEnv returns the environment variables that describe the current item
// to every step's process: PRODIGY_ITEM (the item as compact JSON),
// PRODIGY_ITEM_ID, PRODIGY_ITEM_INDEX, PRODIGY_ITEM_TOTAL and
// PRODIGY_ATTEMPT (1 for the first execution).
func ItemEnv(item any, id string, index, total, attempt int) []string {
	var data []byte
	if raw, ok := item.(json.RawMessage); ok {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			data = buf.Bytes()
		}
	}
	if data == nil {
		b, err := compactJSONNoEscape(item)
		if err != nil {
			b = []byte("null")
		}
		data = b
	}
	return []string{
		"PRODIGY_ITEM=" + string(data),
		"PRODIGY_ITEM_ID=" + id,
		"PRODIGY_ITEM_INDEX=" + strconv.Itoa(index),
		"PRODIGY_ITEM_TOTAL=" + strconv.Itoa(total),
		"PRODIGY_ATTEMPT=" + strconv.Itoa(attempt),
	}
}
