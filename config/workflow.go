package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// Load reads the workflow file at path and parses it (see Parse). A read
// failure is returned wrapped; every problem in the file is an *Error.
func Load(path string) (*Workflow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a workflow. file names the source in error
// positions. Decoding is strict: unknown keys, wrong types, bad durations
// and bad enum values are errors. All problems found are returned together
// (errors.Join of *Error, each "file:line:col: key: message"); on error the
// workflow is nil.
func Parse(file string, data []byte) (*Workflow, error) {
	d := &decoder{file: file, src: data}
	root, err := d.document(data)
	if err != nil {
		return nil, err
	}
	w := d.workflow(root)
	if d.aliasErr != nil {
		return nil, d.aliasErr
	}
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, byPosition)
		return nil, errors.Join(d.errs...)
	}
	w.Path = file
	w.Warnings = d.warnings
	return w, nil
}

// Parsing limits: a workflow file larger than MaxFileSize, nested deeper
// than MaxDepth flow collections, or whose aliases expand to more than
// MaxAliasNodes nodes is rejected before or while decoding, so a "billion
// laughs" or deeply nested file fails fast in little memory.
const (
	MaxFileSize   = 4 << 20
	MaxDepth      = 100
	MaxAliasNodes = 10_000
	// MaxLineIndicators bounds the flow-collection indicators ([ { ,) on
	// one line: the YAML scanner tokenizes a whole line before the depth
	// check sees it, so a one-line bomb is refused from its bytes first.
	MaxLineIndicators = 10_000
)

// document parses the YAML text into the body of its single document.
func (d *decoder) document(data []byte) (ast.Node, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{Pos: Position{File: d.file, Line: 1, Col: 1},
			Msg: fmt.Sprintf("the workflow file is %d bytes, more than the %d MiB limit", len(data), MaxFileSize>>20)}
	}
	if err := d.checkLines(data); err != nil {
		return nil, err
	}
	tokens, err := d.tokenize(string(data))
	if err != nil {
		return nil, err
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) && se.Token != nil && se.Token.Position != nil {
			p := Position{File: d.file, Line: se.Token.Position.Line, Col: se.Token.Position.Column}
			return nil, &Error{Pos: p, Msg: "invalid YAML: " + se.Message}
		}
		return nil, &Error{Pos: Position{File: d.file, Line: 1, Col: 1}, Msg: "invalid YAML: " + err.Error()}
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, &Error{Pos: Position{File: d.file, Line: 1, Col: 1}, Msg: "the workflow file is empty"}
	case len(docs) > 1:
		return nil, &Error{Pos: d.pos(docs[1].Body), Msg: "a workflow file holds one YAML document, found several"}
	}
	d.collectAnchors(docs[0].Body)
	return docs[0].Body, nil
}

// workflow decodes the top-level mapping.
func (d *decoder) workflow(root ast.Node) *Workflow {
	w := &Workflow{Mode: "mapreduce"}
	o := d.object(root, "")
	if o == nil {
		return w
	}
	defer o.finish()
	w.Name = strings.TrimSuffix(filepath.Base(d.file), filepath.Ext(d.file))
	if kv, ok := o.take("name"); ok {
		if v, ok := d.nonEmpty(kv); ok {
			w.Name = v
		}
	}
	if kv, ok := o.take("mode"); ok {
		if v, ok := d.str(kv); ok && v != "mapreduce" {
			d.fail(kv.val, kv.path, "only mode: mapreduce is supported, got %q", v)
		}
	}
	if kv, ok := o.take("env"); ok {
		w.Env, _ = d.envMap(kv)
	}
	if kv, ok := o.take("secrets"); ok {
		w.Secrets = d.secrets(kv)
	}
	if kv, ok := o.take("setup"); ok {
		w.Setup = d.steps(kv, true)
	}
	if kv, ok := o.take("reduce"); ok {
		w.Reduce = d.steps(kv, true)
	}
	var top, topBlock policySrc
	d.policyFields(o, &top)
	if kv, ok := o.take("error_policy"); ok {
		topBlock = d.errorPolicyBlock(kv)
	}
	top = d.sameLevel(topBlock, top)
	if kv, ok := o.take("preserve_failed_worktrees"); ok {
		w.PreserveFailedWorktrees, _ = d.boolean(kv)
	}
	if kv, ok := o.take("budget"); ok {
		w.Budget = d.budget(kv)
	}
	w.RateLimit = RateLimit{MaxWaits: DefaultMaxWaits, MaxCooldown: DefaultMaxCooldown}
	if kv, ok := o.take("rate_limit"); ok {
		w.RateLimit = d.rateLimit(kv)
	}
	if kv, ok := o.take("worktree"); ok {
		d.worktree(kv, w)
	}
	if kv, ok := o.take("claude"); ok {
		w.Claude = d.claudeSettings(kv)
	}
	var mapLevel policySrc
	if kv, ok := o.take("map"); ok {
		mapLevel = d.mapPhase(kv, w)
	} else {
		d.failAt(o.pos(), "map", "missing: a workflow needs a map phase with input and agent_template")
	}
	w.ErrorPolicy = resolvePolicy(mapLevel, top)
	return w
}

// mapPhase decodes `map:` into w.Map and returns its error-policy settings.
func (d *decoder) mapPhase(e entry, w *Workflow) policySrc {
	m := &w.Map
	m.Pos = d.pos(e.keyNode)
	m.MaxParallel = "10"
	o := d.object(e.val, e.path)
	if o == nil {
		return policySrc{}
	}
	defer o.finish()
	if kv, ok := o.take("input"); ok {
		m.Input, _ = d.nonEmpty(kv)
	} else {
		d.failAt(m.Pos, "map.input", "missing: a JSON file or a command producing the work items")
	}
	strs := []struct {
		key string
		dst *string
	}{{"json_path", &m.JSONPath}, {"filter", &m.Filter}, {"sort_by", &m.SortBy}, {"distinct", &m.Distinct}, {"id_field", &m.IDField}}
	for _, s := range strs {
		if kv, ok := o.take(s.key); ok {
			*s.dst, _ = d.str(kv)
			if s.key == "filter" {
				m.FilterPos, _ = d.textPos(kv.val)
			}
		}
	}
	if kv, ok := o.take("offset"); ok {
		m.Offset, _ = d.integer(kv, 0)
	}
	if kv, ok := o.take("max_items"); ok {
		m.MaxItems, _ = d.integer(kv, 0)
	}
	if kv, ok := o.take("agent_template"); ok {
		m.AgentTemplate = d.steps(kv, true)
		if len(m.AgentTemplate) == 0 {
			d.fail(kv.val, kv.path, "must hold at least one step")
		}
	} else {
		d.failAt(m.Pos, "map.agent_template", "missing: the steps to run for every item")
	}
	if kv, ok := o.take("max_parallel"); ok {
		m.MaxParallel = d.maxParallel(kv)
	}
	d.agentTimeout(o, m)
	if kv, ok := o.take("preserve_failed_worktrees"); ok {
		if v, ok := d.boolean(kv); ok {
			w.PreserveFailedWorktrees = w.PreserveFailedWorktrees || v
		}
	}
	var conv, block policySrc
	d.policyFields(o, &conv)
	d.retryField(o, &conv)
	if kv, ok := o.take("error_policy"); ok {
		block = d.errorPolicyBlock(kv)
	}
	return d.sameLevel(block, conv)
}

var envRef = regexp.MustCompile(`^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$`)

// maxParallel keeps max_parallel raw: a positive number or "$VAR"/"${VAR}".
func (d *decoder) maxParallel(e entry) string {
	if _, ok := d.value(e.val).(*ast.IntegerNode); ok {
		n, _ := d.integer(e, 1)
		return strconv.Itoa(n)
	}
	s, ok := d.str(e)
	if !ok {
		return ""
	}
	if envRef.MatchString(s) {
		return s
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 1 {
		return s
	}
	d.fail(e.val, e.path, "must be a positive number or an environment reference such as ${MAX_PARALLEL}, got %q", s)
	return ""
}

// agentTimeout decodes agent_timeout_secs and timeout_config (one of them).
func (d *decoder) agentTimeout(o *object, m *MapPhase) {
	direct, hasDirect := o.take("agent_timeout_secs")
	if hasDirect {
		m.AgentTimeout, _ = d.seconds(direct)
	}
	kv, ok := o.take("timeout_config")
	if !ok {
		return
	}
	tc := d.object(kv.val, kv.path)
	if tc == nil {
		return
	}
	defer tc.finish()
	if inner, ok := tc.take("agent_timeout_secs"); ok {
		if hasDirect {
			d.fail(inner.keyNode, inner.path, "also set at map.agent_timeout_secs (%s): keep only one", d.pos(direct.keyNode))
			return
		}
		m.AgentTimeout, _ = d.seconds(inner)
	}
}

// ResolveMaxParallel returns map.max_parallel as a number >= 1. A "$VAR"
// or "${VAR}" reference is looked up in the workflow env first, then with
// getenv (which may be nil).
func (w *Workflow) ResolveMaxParallel(getenv func(string) string) (int, error) {
	raw := w.Map.MaxParallel
	if raw == "" {
		raw = "10"
	}
	val, source := raw, ""
	if envRef.MatchString(raw) {
		name := strings.Trim(strings.TrimPrefix(raw, "$"), "{}")
		v, ok := w.Env[name]
		source = fmt.Sprintf(" (from env %s)", name)
		if !ok && getenv != nil {
			v = getenv(name)
			source = fmt.Sprintf(" (from environment variable %s)", name)
		}
		if v == "" {
			return 0, fmt.Errorf("%s: map.max_parallel: %s is not set in the workflow env or the environment", w.Map.Pos, raw)
		}
		val = v
	}
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: map.max_parallel: must be a whole number >= 1, got %q%s", w.Map.Pos, val, source)
	}
	return n, nil
}

// byPosition orders *Error values by line, then column.
func byPosition(a, b error) int {
	var ea, eb *Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return 0
	}
	if ea.Pos.Line != eb.Pos.Line {
		return ea.Pos.Line - eb.Pos.Line
	}
	return ea.Pos.Col - eb.Pos.Col
}

// checkLines refuses a line with more than MaxLineIndicators flow
// indicators before anything is tokenized: such a line (deep or huge flow
// collections written on one line) would cost memory proportional to its
// tokens before the depth check could run.
func (d *decoder) checkLines(data []byte) error {
	line, n := 1, 0
	for _, b := range data {
		switch b {
		case '\n':
			line, n = line+1, 0
		case '[', '{', ',':
			if n++; n > MaxLineIndicators {
				return &Error{Pos: Position{File: d.file, Line: line, Col: 1},
					Msg: fmt.Sprintf("line %d has more than %d flow-collection indicators ([ { ,); split it over several lines", line, MaxLineIndicators)}
			}
		}
	}
	return nil
}

// tokenize scans the YAML text into tokens (as lexer.Tokenize does),
// rejecting flow collections ([ ], { }) nested deeper than MaxDepth and
// block collections indented deeper than MaxDepth levels as soon as the
// scanner reaches them, before the recursive parser sees them.
func (d *decoder) tokenize(src string) (token.Tokens, error) {
	var (
		sc      scanner.Scanner
		tokens  token.Tokens
		depth   int
		indents []int // columns of the open block levels
	)
	sc.Init(src)
	for {
		sub, err := sc.Scan()
		if err == io.EOF {
			return tokens, nil
		}
		for _, tk := range sub {
			switch tk.Type {
			case token.SequenceStartType, token.MappingStartType:
				depth++
			case token.SequenceEndType, token.MappingEndType:
				depth--
			case token.MappingValueType, token.SequenceEntryType:
				if depth > 0 || tk.Position == nil {
					break
				}
				col := tk.Position.Column
				for len(indents) > 0 && indents[len(indents)-1] > col {
					indents = indents[:len(indents)-1]
				}
				if len(indents) == 0 || indents[len(indents)-1] < col {
					indents = append(indents, col)
				}
			}
			if depth > MaxDepth || len(indents) > MaxDepth {
				p := Position{File: d.file, Line: 1, Col: 1}
				if tk.Position != nil {
					p.Line, p.Col = tk.Position.Line, tk.Position.Column
				}
				return nil, &Error{Pos: p, Msg: fmt.Sprintf("collections are nested more than %d levels deep", MaxDepth)}
			}
		}
		tokens.Add(sub...)
	}
}
