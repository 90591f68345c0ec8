package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// decoder walks the goccy/go-yaml AST of one file. Every problem is
// collected with its position; decoding goes on so that one run reports
// as many problems as possible.
type decoder struct {
	file  string
	src   []byte   // the file's text
	lines []string // src split into lines, made when first needed
	// aliasNodes counts the nodes reached through aliases; past
	// MaxAliasNodes, aliasErr is set and aliases resolve to nothing.
	aliasNodes  int
	anchorSizes map[string]int
	aliasErr    error
	errs        []error
	warnings    []string
	anchors     map[string]ast.Node
}

// entry is one key/value pair of a mapping.
type entry struct {
	key     string
	keyNode ast.Node
	val     ast.Node // raw value: may be an anchor, alias or tag
	path    string   // dotted path of the value, such as "map.input"
}

func (d *decoder) pos(n ast.Node) Position {
	switch v := n.(type) {
	case nil:
		return Position{File: d.file}
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 { // a block mapping's token is its first ':'
			return d.pos(v.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return d.pos(v.Key)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Position{File: d.file}
	}
	return Position{File: d.file, Line: tk.Position.Line, Col: tk.Position.Column}
}

// fail records a problem at n.
func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Pos: d.pos(n), Key: path, Msg: fmt.Sprintf(format, args...)})
}

// failAt records a problem at p.
func (d *decoder) failAt(p Position, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Pos: p, Key: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) warn(n ast.Node, path, format string, args ...any) {
	d.warnings = append(d.warnings, fmt.Sprintf("%s: %s: %s", d.pos(n), path, fmt.Sprintf(format, args...)))
}

// collectAnchors records every &anchor so aliases can be resolved.
func (d *decoder) collectAnchors(root ast.Node) {
	d.anchors = map[string]ast.Node{}
	ast.Walk(anchorVisitor(d.anchors), root)
}

type anchorVisitor map[string]ast.Node

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		v[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// value resolves anchors and aliases (and drops a tag other than !!str)
// so that callers see the node holding the data. nil means no value.
func (d *decoder) value(n ast.Node) ast.Node {
	for range 64 { // bounded: an alias cycle cannot loop forever
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil || d.aliasErr != nil {
				return nil
			}
			name := v.Value.GetToken().Value
			target, ok := d.anchors[name]
			if !ok {
				return nil
			}
			if !d.chargeAlias(v, name, target) {
				return nil
			}
			n = target
		case *ast.TagNode:
			if v.Start != nil && v.Start.Value == "!!str" {
				return n
			}
			n = v.Value
		default:
			return n
		}
	}
	return nil
}

// chargeAlias counts the nodes an alias expands to and reports false
// (recording aliasErr once) when the document's aliases exceed
// MaxAliasNodes: the decoder's work stays proportional to the limit, not
// to the exponential size an alias bomb describes.
func (d *decoder) chargeAlias(alias *ast.AliasNode, name string, target ast.Node) bool {
	if d.anchorSizes == nil {
		d.anchorSizes = map[string]int{}
	}
	size, ok := d.anchorSizes[name]
	if !ok {
		ast.Walk(nodeCounter(func() { size++ }), target)
		d.anchorSizes[name] = size
	}
	d.aliasNodes += size + 1
	if d.aliasNodes > MaxAliasNodes {
		d.aliasErr = &Error{Pos: d.pos(alias), Msg: fmt.Sprintf("aliases expand to more than %d nodes (a YAML alias bomb?); "+
			"use fewer or smaller anchors", MaxAliasNodes)}
		return false
	}
	return true
}

type nodeCounter func()

func (c nodeCounter) Visit(ast.Node) ast.Visitor { c(); return c }

// kind names a node's YAML type for error messages.
func (d *decoder) kind(n ast.Node) string {
	switch v := d.value(n).(type) {
	case nil, *ast.NullNode:
		return "nothing (null)"
	case *ast.StringNode, *ast.LiteralNode, *ast.TagNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	default:
		return v.Type().String()
	}
}

// entries returns the key/value pairs of a mapping node, with `<<` merge
// keys expanded (explicit keys win). ok is false (and an error recorded)
// when n is not a mapping; a null value is an empty mapping.
func (d *decoder) entries(n ast.Node, path string) ([]entry, bool) {
	var values []*ast.MappingValueNode
	switch v := d.value(n).(type) {
	case nil, *ast.NullNode:
		return nil, true
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		d.fail(n, path, "must be a mapping (key: value lines), got %s", d.kind(n))
		return nil, false
	}
	var out, merged []entry
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			merged = append(merged, d.mergeEntries(mv.Value, path)...)
			continue
		}
		k := mv.Key.GetToken().Value
		out = append(out, entry{key: k, keyNode: mv.Key, val: mv.Value, path: join(path, k)})
	}
	for _, m := range merged {
		if !slices.ContainsFunc(out, func(e entry) bool { return e.key == m.key }) {
			out = append(out, m)
		}
	}
	return out, true
}

// mergeEntries expands the value of a `<<` key: a mapping or a list of
// mappings (earlier ones win).
func (d *decoder) mergeEntries(n ast.Node, path string) []entry {
	if seq, ok := d.value(n).(*ast.SequenceNode); ok {
		var out []entry
		for _, item := range seq.Values {
			for _, e := range d.mergeEntries(item, path) {
				if !slices.ContainsFunc(out, func(o entry) bool { return o.key == e.key }) {
					out = append(out, e)
				}
			}
		}
		return out
	}
	es, _ := d.entries(n, path)
	return es
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object is a mapping being decoded strictly: every key must be taken by
// the decoding code, or finish reports it as unknown.
type object struct {
	d       *decoder
	node    ast.Node
	path    string
	entries []entry
	asked   []string
	used    map[string]bool
}

// object starts strict decoding of the mapping n. It returns nil (after
// recording an error) when n is not a mapping.
func (d *decoder) object(n ast.Node, path string) *object {
	es, ok := d.entries(n, path)
	if !ok {
		return nil
	}
	return &object{d: d, node: n, path: path, entries: es, used: map[string]bool{}}
}

// take returns the entry of key, marking key as accepted.
func (o *object) take(key string) (entry, bool) {
	o.asked = append(o.asked, key)
	for _, e := range o.entries {
		if e.key == key {
			o.used[key] = true
			return e, true
		}
	}
	return entry{}, false
}

// finish reports every key that no take call accepted.
func (o *object) finish() {
	accepted := slices.Clone(o.asked)
	slices.Sort(accepted)
	accepted = slices.Compact(accepted)
	for _, e := range o.entries {
		if o.used[e.key] {
			continue
		}
		if why, ok := unsupportedKeys[e.key]; ok {
			o.d.fail(e.keyNode, e.path, "%s; accepted keys here: %s", why, strings.Join(accepted, ", "))
			continue
		}
		o.d.fail(e.keyNode, e.path, "unknown key %q; accepted keys here: %s", e.key, strings.Join(accepted, ", "))
	}
}

// pos returns the position of the mapping (its first key), for errors
// about missing keys.
func (o *object) pos() Position { return o.d.pos(o.node) }

// unsupportedKeys are Prodigy keys this tool does not implement: they are
// rejected with an explanation rather than silently ignored.
var unsupportedKeys = map[string]string{
	"merge":                     "Prodigy's `merge` workflow is not supported (the results branch is merged by you)",
	"secrets":                   "`secrets` is not supported: pass secrets through the environment",
	"env_files":                 "`env_files` is not supported",
	"profiles":                  "`profiles` is not supported",
	"circuit_breaker":           "`circuit_breaker` is not supported",
	"capture":                   "`capture` is not supported: use capture_output",
	"capture_format":            "`capture_format` is not supported",
	"capture_streams":           "`capture_streams` is not supported",
	"output_file":               "`output_file` is not supported",
	"working_dir":               "`working_dir` is not supported",
	"on_success":                "`on_success` is not supported",
	"on_exit_code":              "`on_exit_code` is not supported",
	"commit_config":             "`commit_config` is not supported",
	"auto_commit":               "`auto_commit` is not supported",
	"validate":                  "`validate` is not supported",
	"step_validate":             "`step_validate` is not supported",
	"skip_validation":           "`skip_validation` is not supported",
	"validation_timeout":        "`validation_timeout` is not supported",
	"ignore_validation_failure": "`ignore_validation_failure` is not supported",
	"when":                      "`when` is not supported",
	"foreach":                   "`foreach` is not supported in MapReduce workflows",
	"handler":                   "`handler` steps are not supported",
	"command":                   "legacy `command:` steps are not supported: use shell or claude",
	"test":                      "legacy `test:` steps are not supported: use shell",
	"goal_seek":                 "`goal_seek` is not supported",
	"retry_config":              "`retry_config` does not belong here: put it under map, map.error_policy or error_policy (a step uses `retry:`)",
	"command_timeouts":          "`timeout_config.command_timeouts` is not supported: use a step's `timeout`",
	"timeout_policy":            "`timeout_config.timeout_policy` is not supported",
	"cleanup_grace_period_secs": "`timeout_config.cleanup_grace_period_secs` is not supported",
	"timeout_action":            "`timeout_config.timeout_action` is not supported: use on_item_failure",
	"enable_monitoring":         "`timeout_config.enable_monitoring` is not supported",
	"fail_workflow":             "`fail_workflow` is not supported",
	"retry_original":            "`retry_original` is not supported",
	"max_retries":               "`max_retries` is not supported here: use `retry:` on the step",
	"format":                    "`write_file.format` is not supported: write the content as text",
}

// str decodes a string scalar (no numbers or booleans).
func (d *decoder) str(e entry) (string, bool) {
	switch v := d.value(e.val).(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.TagNode:
		return v.Value.GetToken().Value, true
	}
	d.fail(e.val, e.path, "must be a string, got %s", d.kind(e.val))
	return "", false
}

// text decodes any scalar as text: numbers and booleans as written, null
// as "".
func (d *decoder) text(e entry) (string, bool) {
	switch v := d.value(e.val).(type) {
	case nil, *ast.NullNode:
		return "", true
	case *ast.StringNode, *ast.LiteralNode, *ast.TagNode:
		return d.str(e)
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, true
	}
	d.fail(e.val, e.path, "must be a single value (string, number or boolean), got %s", d.kind(e.val))
	return "", false
}

// integer decodes a whole number >= min.
func (d *decoder) integer(e entry, min int) (int, bool) {
	v, ok := d.value(e.val).(*ast.IntegerNode)
	if !ok {
		d.fail(e.val, e.path, "must be a whole number, got %s", d.kind(e.val))
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(v.GetToken().Value, "_", ""), 0, 64)
	if err != nil || n > math.MaxInt32 {
		d.fail(e.val, e.path, "number %s is out of range", v.GetToken().Value)
		return 0, false
	}
	if int(n) < min {
		d.fail(e.val, e.path, "must be at least %d, got %d", min, n)
		return 0, false
	}
	return int(n), true
}

// number decodes an integer or decimal number.
func (d *decoder) number(e entry) (float64, bool) {
	switch v := d.value(e.val).(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		f, err := strconv.ParseFloat(strings.ReplaceAll(v.GetToken().Value, "_", ""), 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, true
		}
		if n, ierr := strconv.ParseInt(v.GetToken().Value, 0, 64); ierr == nil {
			return float64(n), true
		}
	}
	d.fail(e.val, e.path, "must be a number, got %s", d.kind(e.val))
	return 0, false
}

// boolean decodes true or false.
func (d *decoder) boolean(e entry) (bool, bool) {
	if v, ok := d.value(e.val).(*ast.BoolNode); ok {
		return v.Value, true
	}
	d.fail(e.val, e.path, "must be true or false, got %s", d.kind(e.val))
	return false, false
}

// duration decodes a duration string such as "2s" (see ParseDuration).
// Bare numbers are rejected: the unit would be a guess.
func (d *decoder) duration(e entry) (time.Duration, bool) {
	switch v := d.value(e.val).(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		tok := v.GetToken().Value
		d.fail(e.val, e.path, "invalid duration %s: a bare number has no unit (write %sms or %ss); %s", tok, tok, tok, durationForms)
		return 0, false
	case *ast.StringNode, *ast.LiteralNode, *ast.TagNode:
		s, _ := d.str(e)
		dur, err := ParseDuration(s)
		if err != nil {
			d.fail(e.val, e.path, "%s", err)
			return 0, false
		}
		return dur, true
	}
	d.fail(e.val, e.path, "must be a duration such as 2s, got %s; %s", d.kind(e.val), durationForms)
	return 0, false
}

// seconds decodes a timeout given as whole seconds (300) or as a duration
// string ("5m").
func (d *decoder) seconds(e entry) (time.Duration, bool) {
	if _, ok := d.value(e.val).(*ast.IntegerNode); ok {
		n, ok := d.integer(e, 0)
		return time.Duration(n) * time.Second, ok
	}
	switch d.value(e.val).(type) {
	case *ast.StringNode, *ast.LiteralNode, *ast.TagNode:
		return d.duration(e)
	}
	d.fail(e.val, e.path, "must be whole seconds (300) or a duration (5m), got %s", d.kind(e.val))
	return 0, false
}

// list returns the elements of a sequence; null is an empty list.
func (d *decoder) list(e entry) ([]ast.Node, bool) {
	switch v := d.value(e.val).(type) {
	case nil, *ast.NullNode:
		return nil, true
	case *ast.SequenceNode:
		return v.Values, true
	}
	d.fail(e.val, e.path, "must be a list, got %s", d.kind(e.val))
	return nil, false
}

// item returns the entry of the i-th element of a list at path.
func item(n ast.Node, path string, i int) entry {
	return entry{val: n, path: fmt.Sprintf("%s[%d]", path, i)}
}

// stringMap decodes a mapping of scalars into strings (env blocks).
func (d *decoder) stringMap(e entry) map[string]string {
	es, ok := d.entries(e.val, e.path)
	if !ok || len(es) == 0 {
		return nil
	}
	out := make(map[string]string, len(es))
	for _, kv := range es {
		if v, ok := d.text(kv); ok {
			out[kv.key] = v
		}
	}
	return out
}
