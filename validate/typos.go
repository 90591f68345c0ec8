package validate

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/interp"
)

// bashRefRE finds variable references in a shell step's text ($NAME,
// ${NAME…}) to point at them; envTypos skips the escaped ones ($${ is a
// literal ${ for bash, \$ a literal $) and those on comment lines.
var bashRefRE = regexp.MustCompile(`\$(\{)?([A-Za-z_][A-Za-z0-9_]*)`)

// envTypos finds, in a shell step, references to variables that the
// workflow does not set but whose name is one edit or two away from one it
// does (workflow env, the step's env): ${MAX_LINE} for MAX_LINES is left to
// bash, which expands it from the environment (empty when unset), so the
// step silently does something else. Which names bash really expands, and
// which the script sets itself, comes from the bash syntax tree
// (interp.ShellNames): text in single quotes, quoted here-documents and
// comments is never reported; $${NAME} says "bash's own variable".
func envTypos(wf *config.Workflow, st config.Step, scope interp.Scope) []error {
	if st.Shell == "" {
		return nil
	}
	known := make([]string, 0, len(wf.Env)+len(st.Env))
	for k := range wf.Env {
		known = append(known, k)
	}
	for k := range st.Env {
		known = append(known, k)
	}
	if len(known) == 0 {
		return nil
	}
	expanded, assigned, ok := interp.ShellNames(st.Shell, scope)
	if !ok {
		return nil
	}
	var errs []error
	reported := map[string]bool{}
	for _, m := range bashRefRE.FindAllStringSubmatchIndex(st.Shell, -1) {
		name := st.Shell[m[4]:m[5]]
		if m[0] > 0 && (st.Shell[m[0]-1] == '$' || st.Shell[m[0]-1] == '\\') || onCommentLine(st.Shell, m[0]) {
			continue
		}
		if reported[name] || !expanded[name] || assigned[name] || slices.Contains(known, name) {
			continue
		}
		near := interp.Closest(name, known)
		if near == "" {
			continue
		}
		reported[name] = true
		ref := "$" + name
		if m[2] >= 0 {
			ref = "${" + name + "}"
		}
		line, col := lineCol(st.Shell, m[0])
		errs = append(errs, fmt.Errorf("%s: %s is not set by the workflow (did you mean %s?): bash would expand it from the environment, empty when unset; write $${%s} if you mean bash's own variable",
			st.TextPosition(line, col), ref, strings.Replace(ref, name, near, 1), name))
	}
	return errs
}

// onCommentLine reports whether offset i is on a line whose first
// non-blank character is #.
func onCommentLine(s string, i int) bool {
	start := strings.LastIndex(s[:i], "\n") + 1
	return strings.HasPrefix(strings.TrimLeft(s[start:i], " \t"), "#")
}

// lineCol is the 1-based line and column of byte offset i in s.
func lineCol(s string, i int) (int, int) {
	line := 1 + strings.Count(s[:i], "\n")
	return line, i - strings.LastIndex(s[:i], "\n")
}

// itemFieldRE finds ${item.FIELD…} placeholders (not escaped as $${),
// with whether they carry a :-default.
var itemFieldRE = regexp.MustCompile(`(^|[^$])\$\{item\.([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)(:-)?`)

// ItemFields checks the fields the agent template reads (${item.FIELD}
// without a default) against the items as they are loaded: a field that no
// item has is a typo that would fail every item at run time, one DLQ
// record each, so it is reported once, before any agent starts. Make one
// with NewItemFields, call Add for each item, then Err. It is not safe for
// concurrent use.
type ItemFields struct {
	want  map[string]config.Position // field → where it is first used
	seen  map[string]bool
	keys  map[string]bool // fields the items have (bounded, for hints)
	items int
}

const maxHintKeys = 200

// NewItemFields collects the fields that steps (and their on_failure
// handlers) read without a default.
func NewItemFields(steps []config.Step) *ItemFields {
	f := &ItemFields{want: map[string]config.Position{}, seen: map[string]bool{}, keys: map[string]bool{}}
	walkSteps(steps, func(st config.Step) {
		texts := []string{st.Shell, st.Claude}
		if st.WriteFile != nil {
			texts = append(texts, st.WriteFile.Path, st.WriteFile.Content)
		}
		for _, k := range slices.Sorted(maps.Keys(st.Env)) {
			texts = append(texts, st.Env[k])
		}
		for i, t := range texts {
			for _, m := range itemFieldRE.FindAllStringSubmatchIndex(t, -1) {
				if m[8] >= 0 { // :-default
					continue
				}
				field := t[m[4]:m[5]]
				if _, ok := f.want[field]; ok {
					continue
				}
				p := st.Pos
				if i < 2 {
					line, col := lineCol(t, m[3])
					p = st.TextPosition(line, col)
				}
				f.want[field] = p
			}
		}
	})
	return f
}

// Add looks at one loaded item's data.
func (f *ItemFields) Add(data json.RawMessage) {
	f.items++
	if len(f.want) == len(f.seen) {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return
	}
	for k := range obj {
		if _, ok := f.want[k]; ok {
			f.seen[k] = true
		}
		if len(f.keys) < maxHintKeys {
			f.keys[k] = true
		}
	}
}

// Err reports the fields no item has, with the closest field names (nil
// when every field was seen, or no item was added).
func (f *ItemFields) Err() error {
	if f.items == 0 || len(f.want) == len(f.seen) {
		return nil
	}
	keys := make([]string, 0, len(f.keys))
	for k := range f.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var missing []string
	for field := range f.want {
		if !f.seen[field] {
			missing = append(missing, field)
		}
	}
	sort.Strings(missing)
	var b strings.Builder
	for i, field := range missing {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: ${item.%s}: none of the %d item(s) has a field %q", f.want[field], field, f.items, field)
		if near := interp.Closest(field, keys); near != "" {
			fmt.Fprintf(&b, " (did you mean ${item.%s}?)", near)
		}
	}
	fields := "the items are not JSON objects"
	if len(keys) > 0 {
		fields = "the items' fields: " + strings.Join(keys, ", ")
	}
	return fmt.Errorf("%s; %s (use ${item.FIELD:-default} for a field only some items have)", b.String(), fields)
}
