package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// varName is the syntax of a capture_output variable name.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// steps decodes a step list. With legacy set, the deprecated
// `{commands: [...]}` mapping form is accepted too (with a warning).
func (d *decoder) steps(e entry, legacy bool) []Step {
	if legacy {
		if _, isMap := d.value(e.val).(*ast.MappingNode); isMap {
			o := d.object(e.val, e.path)
			kv, ok := o.take("commands")
			o.finish()
			if !ok {
				d.fail(e.val, e.path, "must be a list of steps (or the legacy {commands: [...]} form)")
				return nil
			}
			d.warn(kv.keyNode, e.path, "the {commands: [...]} form is deprecated: write the steps as a list")
			return d.steps(kv, false)
		}
	}
	nodes, ok := d.list(e)
	if !ok {
		return nil
	}
	out := make([]Step, 0, len(nodes))
	for i, n := range nodes {
		it := item(n, e.path, i)
		if _, isMap := d.value(n).(*ast.MappingNode); !isMap {
			d.fail(n, it.path, "a step must be a mapping such as {shell: \"make test\"}, got %s", d.kind(n))
			out = append(out, Step{Pos: d.pos(n)}) // keep the count: the error is reported
			continue
		}
		s, _ := d.step(it)
		out = append(out, s)
	}
	return out
}

// step decodes one step mapping; ok is false when it recorded a problem
// in the step's own keys.
func (d *decoder) step(e entry) (Step, bool) {
	o := d.object(e.val, e.path)
	if o == nil {
		return Step{}, false
	}
	defer o.finish()
	s := Step{Pos: o.pos()}
	nerr := len(d.errs)
	kinds := 0
	if kv, ok := o.take("shell"); ok {
		kinds++
		s.Shell, _ = d.nonEmpty(kv)
		s.TextPos, s.TextBlock = d.textPos(kv.val)
	}
	if kv, ok := o.take("claude"); ok {
		kinds++
		s.Claude, _ = d.nonEmpty(kv)
		s.TextPos, s.TextBlock = d.textPos(kv.val)
	}
	if kv, ok := o.take("write_file"); ok {
		kinds++
		s.WriteFile = d.writeFile(kv)
	}
	if kinds != 1 {
		d.failAt(s.Pos, e.path, "a step needs exactly one of shell, claude or write_file (found %d)", kinds)
	}
	d.stepOptions(o, &s)
	return s, len(d.errs) == nerr
}

// stepOptions decodes the keys every step kind accepts.
func (d *decoder) stepOptions(o *object, s *Step) {
	if kv, ok := o.take("name"); ok {
		s.Name, _ = d.str(kv)
	}
	if kv, ok := o.take("timeout"); ok {
		s.Timeout, _ = d.seconds(kv)
	}
	if kv, ok := o.take("on_failure"); ok {
		s.OnFailure = d.onFailure(kv)
	}
	if kv, ok := o.take("commit_required"); ok {
		s.CommitRequired, _ = d.boolean(kv)
	}
	if kv, ok := o.take("capture_output"); ok {
		s.CaptureOutput = d.captureOutput(kv)
	}
	if kv, ok := o.take("env"); ok {
		s.Env, s.EnvPos = d.envMap(kv)
	}
	if kv, ok := o.take("retry"); ok {
		s.Retry = d.retryConfig(kv)
	}
	if kv, ok := o.take("allow_nested_shell"); ok {
		s.AllowNestedShell, _ = d.boolean(kv)
	}
	if kv, ok := o.take("claude_options"); ok {
		if s.Claude == "" {
			d.fail(kv.keyNode, kv.path, "claude_options belongs to a claude step")
		}
		s.ClaudeOptions = d.claudeSettings(kv)
	}
}

// nonEmpty decodes a string that must not be blank.
func (d *decoder) nonEmpty(e entry) (string, bool) {
	v, ok := d.str(e)
	if ok && strings.TrimSpace(v) == "" {
		d.fail(e.val, e.path, "must not be empty")
		return "", false
	}
	return v, ok
}

// onFailure normalises on_failure: a string is one step (claude when it
// starts with "/", as in Prodigy), a mapping is one step, a list holds
// strings or mappings.
func (d *decoder) onFailure(e entry) []Step {
	switch v := d.value(e.val).(type) {
	case *ast.SequenceNode:
		var out []Step
		for i, n := range v.Values {
			out = append(out, d.onFailure(item(n, e.path, i))...)
		}
		return out
	case *ast.MappingNode:
		s, _ := d.step(e) // problems are recorded; keep the step so counts stay right
		return []Step{s}
	case *ast.StringNode, *ast.LiteralNode, *ast.TagNode:
		cmd, ok := d.nonEmpty(e)
		if !ok {
			return nil
		}
		s := Step{Pos: d.pos(e.val)}
		s.TextPos, s.TextBlock = d.textPos(e.val)
		if strings.HasPrefix(cmd, "/") {
			s.Claude = cmd
		} else {
			s.Shell = cmd
		}
		return []Step{s}
	}
	d.fail(e.val, e.path, "must be a command string, a step mapping {shell|claude: ...} or a list of them, got %s", d.kind(e.val))
	return nil
}

// captureOutput decodes `capture_output`: true captures into
// ${shell.output}, false captures nothing, a string names the variable.
func (d *decoder) captureOutput(e entry) string {
	switch d.value(e.val).(type) {
	case *ast.BoolNode:
		if b, _ := d.boolean(e); b {
			return "shell.output"
		}
		return ""
	}
	name, ok := d.str(e)
	if !ok {
		return ""
	}
	if !varName.MatchString(name) {
		d.fail(e.val, e.path, "variable name %q must be letters, digits and _ (dots separate parts), not starting with a digit", name)
		return ""
	}
	return name
}

// writeFile decodes a write_file block.
func (d *decoder) writeFile(e entry) *WriteFile {
	o := d.object(e.val, e.path)
	if o == nil {
		return nil
	}
	defer o.finish()
	w := &WriteFile{}
	if kv, ok := o.take("path"); ok {
		w.Path, _ = d.nonEmpty(kv)
		if w.Path != "" && !filepath.IsLocal(placeholderRE.ReplaceAllString(w.Path, "x")) {
			d.fail(kv.val, kv.path, "%q leaves the worktree: write_file paths are relative to the worktree, without .. or a leading /", w.Path)
		}
	} else {
		d.failAt(o.pos(), e.path, "missing path")
	}
	if kv, ok := o.take("content"); ok {
		w.Content, _ = d.text(kv)
	}
	if kv, ok := o.take("mode"); ok {
		w.Mode = d.fileMode(kv)
	}
	if kv, ok := o.take("create_dirs"); ok {
		w.CreateDirs, _ = d.boolean(kv)
	}
	return w
}

// fileMode decodes an octal permission: 644, 0644, 0o644 or "0644".
func (d *decoder) fileMode(e entry) os.FileMode {
	raw, ok := d.text(e)
	if !ok {
		return 0
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(raw, "0o"), "0O")
	m, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || m > 0o7777 || m == 0 {
		d.fail(e.val, e.path, "must be an octal file mode such as 644 or \"0755\", got %q", raw)
		return 0
	}
	return os.FileMode(m)
}

// placeholderRE matches a ${…} placeholder (for lexical checks only).
var placeholderRE = regexp.MustCompile(`\$\{[^}]*\}`)

// envName is the syntax of an environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// textPos returns where a step's text value starts and whether it is a
// block scalar (| or >), whose content starts on the next line at the
// block's indentation.
func (d *decoder) textPos(n ast.Node) (Position, bool) {
	p := d.pos(n)
	lit, ok := d.value(n).(*ast.LiteralNode)
	if !ok {
		if s, ok := d.value(n).(*ast.StringNode); ok {
			if tk := s.GetToken(); tk != nil && (tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType) {
				p.Col++ // the opening quote
			}
		}
		return p, false
	}
	if lit.Start == nil || lit.Start.Position == nil {
		return p, true
	}
	// The content starts on the line after the | or > indicator, indented
	// like its first non-blank line.
	line := lit.Start.Position.Line + 1
	if d.lines == nil {
		d.lines = strings.Split(string(d.src), "\n")
	}
	lines := d.lines
	col := 1
	for i := line - 1; i >= 0 && i < len(lines); i++ {
		if t := strings.TrimLeft(lines[i], " "); t != "" {
			col = len(lines[i]) - len(t) + 1
			break
		}
	}
	return Position{File: d.file, Line: line, Col: col}, true
}

// stringMapPos returns the position of every value of a mapping.
func (d *decoder) stringMapPos(e entry) map[string]Position {
	es, ok := d.entries(e.val, e.path)
	if !ok || len(es) == 0 {
		return nil
	}
	out := make(map[string]Position, len(es))
	for _, kv := range es {
		out[kv.key] = d.pos(kv.keyNode)
	}
	return out
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// envMap decodes an env block; every name must be a valid environment
// variable name.
func (d *decoder) envMap(e entry) (map[string]string, map[string]Position) {
	m, pos := d.stringMap(e), d.stringMapPos(e)
	for _, name := range sortedNames(m) {
		if !envName.MatchString(name) {
			d.failAt(pos[name], join(e.path, name), "invalid environment variable name %q: use letters, digits and _, not starting with a digit", name)
		}
	}
	return m, pos
}

// TextPosition maps a 1-based line and column inside the step's text
// (shell script or claude prompt) to the file. Exact for block scalars
// (| and >) and for single-line values; for a multi-line flow scalar the
// column is the best guess.
func (s Step) TextPosition(line, col int) Position {
	p := s.TextPos
	if p.Line == 0 {
		return s.Pos
	}
	if line > 1 {
		p.Line += line - 1
		if !s.TextBlock {
			p.Col = col
			return p
		}
	}
	p.Col += col - 1
	return p
}
