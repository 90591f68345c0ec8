package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Claude permission modes Claude Code accepts (--permission-mode).
var claudePermissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual", "plan"}

// On-permission-denial settings (ClaudeSettings.OnPermissionDenial).
const (
	// DenialFail fails the attempt when Claude Code's result reports a
	// denied tool (the default).
	DenialFail = "fail"
	// DenialIgnore records the denials and lets the step succeed.
	DenialIgnore = "ignore"
)

// Defaults of a claude step that runs unattended: edits inside the
// worktree are accepted (acceptEdits) and the Bash tool may run any command
// (git, tests, builds) without a prompt nobody would answer under --print.
// Network tools (WebFetch, WebSearch) and edits outside the worktree are
// not granted; a step that tries them fails with the denial.
const DefaultClaudePermissionMode = "acceptEdits"

// DefaultClaudeAllowedTools is the allowed-tools default (see
// DefaultClaudePermissionMode).
var DefaultClaudeAllowedTools = []string{"Bash"}

// ClaudeSettings are the Claude Code options of claude steps: the workflow's
// `claude:` block, a step's `claude_options:`, and the CLI flags / Action
// inputs, each overriding the one before (Merge). A zero field is unset;
// a nil list is unset and an empty non-nil list is "none".
type ClaudeSettings struct {
	// Model is --model ("" = Claude Code's default).
	Model string `json:"model,omitempty"`
	// PermissionMode is --permission-mode (default acceptEdits).
	PermissionMode string `json:"permission_mode,omitempty"`
	// AllowedTools is --allowedTools (default [Bash]); rules such as
	// "Bash(git commit:*)" narrow a tool.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// DisallowedTools is --disallowedTools.
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	// MaxTurns is --max-turns (0 = Claude Code's default).
	MaxTurns int `json:"max_turns,omitempty"`
	// Args are extra arguments, placed after the ones above.
	Args []string `json:"args,omitempty"`
	// OnPermissionDenial is "fail" (default) or "ignore".
	OnPermissionDenial string `json:"on_permission_denial,omitempty"`
}

// Merge returns s with every field that over sets replacing s's.
func (s ClaudeSettings) Merge(over ClaudeSettings) ClaudeSettings {
	if over.Model != "" {
		s.Model = over.Model
	}
	if over.PermissionMode != "" {
		s.PermissionMode = over.PermissionMode
	}
	if over.AllowedTools != nil {
		s.AllowedTools = over.AllowedTools
	}
	if over.DisallowedTools != nil {
		s.DisallowedTools = over.DisallowedTools
	}
	if over.MaxTurns != 0 {
		s.MaxTurns = over.MaxTurns
	}
	if over.Args != nil {
		s.Args = over.Args
	}
	if over.OnPermissionDenial != "" {
		s.OnPermissionDenial = over.OnPermissionDenial
	}
	return s
}

// WithDefaults fills what is unset with the unattended defaults.
func (s ClaudeSettings) WithDefaults() ClaudeSettings {
	if s.PermissionMode == "" {
		s.PermissionMode = DefaultClaudePermissionMode
	}
	if s.AllowedTools == nil {
		s.AllowedTools = slices.Clone(DefaultClaudeAllowedTools)
	}
	if s.OnPermissionDenial == "" {
		s.OnPermissionDenial = DenialFail
	}
	return s
}

// FailOnDenial says whether a denied tool fails the attempt.
func (s ClaudeSettings) FailOnDenial() bool { return s.OnPermissionDenial != DenialIgnore }

// CommandArgs are the Claude Code arguments these settings stand for, in
// a fixed order (model, permission mode, allowed and disallowed tools, max
// turns, extra arguments). Lists are passed as one comma-separated
// argument each, so no list can swallow a later argument.
func (s ClaudeSettings) CommandArgs() []string {
	var args []string
	if s.Model != "" {
		args = append(args, "--model", s.Model)
	}
	if s.PermissionMode != "" {
		args = append(args, "--permission-mode", s.PermissionMode)
	}
	if len(s.AllowedTools) > 0 {
		args = append(args, "--allowedTools", strings.Join(s.AllowedTools, ","))
	}
	if len(s.DisallowedTools) > 0 {
		args = append(args, "--disallowedTools", strings.Join(s.DisallowedTools, ","))
	}
	if s.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(s.MaxTurns))
	}
	return append(args, s.Args...)
}

// Validate checks values a caller set outside a workflow file (CLI flags,
// Action inputs); the workflow's own blocks are checked when parsed.
func (s ClaudeSettings) Validate() error {
	if s.PermissionMode != "" && !slices.Contains(claudePermissionModes, s.PermissionMode) {
		return fmt.Errorf("unknown Claude permission mode %q (one of %s)", s.PermissionMode, strings.Join(claudePermissionModes, ", "))
	}
	for _, t := range append(slices.Clone(s.AllowedTools), s.DisallowedTools...) {
		if err := checkToolRule(t); err != nil {
			return err
		}
	}
	if s.MaxTurns < 0 {
		return fmt.Errorf("max turns must be positive, got %d", s.MaxTurns)
	}
	switch s.OnPermissionDenial {
	case "", DenialFail, DenialIgnore:
	default:
		return fmt.Errorf("on_permission_denial must be %q or %q, got %q", DenialFail, DenialIgnore, s.OnPermissionDenial)
	}
	return nil
}

// checkToolRule refuses a tool rule that cannot travel in a
// comma-separated list.
func checkToolRule(t string) error {
	switch {
	case strings.TrimSpace(t) == "":
		return fmt.Errorf("a tool name must not be empty")
	case strings.ContainsAny(t, ",\n\x00"):
		return fmt.Errorf("tool rule %q: a comma or line break would split it; give each rule as its own list entry without commas", t)
	case strings.HasPrefix(t, "-"):
		return fmt.Errorf("tool rule %q must not start with '-'", t)
	}
	return nil
}

// claudeSettings decodes a `claude:` (workflow) or `claude_options:`
// (step) block.
func (d *decoder) claudeSettings(e entry) ClaudeSettings {
	var s ClaudeSettings
	o := d.object(e.val, e.path)
	if o == nil {
		return s
	}
	defer o.finish()
	if kv, ok := o.take("model"); ok {
		s.Model, _ = d.nonEmpty(kv)
	}
	if kv, ok := o.take("permission_mode"); ok {
		if v, ok := d.nonEmpty(kv); ok {
			if !slices.Contains(claudePermissionModes, v) {
				d.fail(kv.val, kv.path, "unknown permission mode %q (one of %s)", v, strings.Join(claudePermissionModes, ", "))
			} else {
				s.PermissionMode = v
			}
		}
	}
	tools := func(key string) []string {
		kv, ok := o.take(key)
		if !ok {
			return nil
		}
		nodes, ok := d.list(kv)
		if !ok {
			return nil
		}
		out := make([]string, 0, len(nodes))
		for i, n := range nodes {
			it := item(n, kv.path, i)
			v, ok := d.str(it)
			if !ok {
				continue
			}
			if err := checkToolRule(v); err != nil {
				d.fail(n, it.path, "%s", err)
				continue
			}
			out = append(out, v)
		}
		return out
	}
	s.AllowedTools = tools("allowed_tools")
	s.DisallowedTools = tools("disallowed_tools")
	if kv, ok := o.take("max_turns"); ok {
		s.MaxTurns, _ = d.integer(kv, 1)
	}
	if kv, ok := o.take("args"); ok {
		if nodes, ok := d.list(kv); ok {
			s.Args = make([]string, 0, len(nodes))
			for i, n := range nodes {
				if v, ok := d.text(item(n, kv.path, i)); ok {
					s.Args = append(s.Args, v)
				}
			}
		}
	}
	if kv, ok := o.take("on_permission_denial"); ok {
		if v, ok := d.str(kv); ok {
			if v != DenialFail && v != DenialIgnore {
				d.fail(kv.val, kv.path, "must be %q (a denied tool fails the attempt) or %q (record it and go on), got %q", DenialFail, DenialIgnore, v)
			} else {
				s.OnPermissionDenial = v
			}
		}
	}
	return s
}

// For resolves the Claude Code options of step st from s (a workflow's
// `claude:` block): s, then the step's `claude_options:`, then over (CLI
// flags or Action inputs), then the unattended defaults.
func (s ClaudeSettings) For(st Step, over ClaudeSettings) ClaudeSettings {
	return s.Merge(st.ClaudeOptions).Merge(over).WithDefaults()
}

// ClaudeFor resolves the Claude Code options of step st (ClaudeSettings.For
// of the workflow's `claude:` block).
func (w *Workflow) ClaudeFor(st Step, over ClaudeSettings) ClaudeSettings {
	return w.Claude.For(st, over)
}
