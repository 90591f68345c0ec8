package cmdutil

import (
	"github.com/spf13/pflag"

	"github.com/prodigy-action/prodigy-action/config"
)

// ClaudeFlags registers the flags that override the Claude Code options of
// the workflow's `claude:` block and every step's claude_options: --claude-model,
// --claude-permission-mode, --claude-allowed-tools, --claude-disallowed-tools,
// --claude-max-turns and --claude-arg (repeatable). Check with CheckClaude.
func ClaudeFlags(fs *pflag.FlagSet, s *config.ClaudeSettings) {
	fs.StringVar(&s.Model, "claude-model", "", "Claude Code --model for every claude step")
	fs.StringVar(&s.PermissionMode, "claude-permission-mode", "", "Claude Code --permission-mode (default acceptEdits: edits inside the worktree)")
	fs.StringSliceVar(&s.AllowedTools, "claude-allowed-tools", nil, `tools Claude Code may use without asking, comma-separated (default "Bash"; e.g. "Bash(git:*),Bash(go test:*)")`)
	fs.StringSliceVar(&s.DisallowedTools, "claude-disallowed-tools", nil, "tools Claude Code must not use, comma-separated (e.g. WebFetch,WebSearch)")
	fs.IntVar(&s.MaxTurns, "claude-max-turns", 0, "Claude Code --max-turns for every claude step")
	fs.StringArrayVar(&s.Args, "claude-arg", nil, "an extra Claude Code argument (repeatable, e.g. --claude-arg=--append-system-prompt --claude-arg='Be brief')")
}

// CheckClaude validates the values of ClaudeFlags (exit 2 when wrong).
func CheckClaude(s config.ClaudeSettings) error {
	if err := s.Validate(); err != nil {
		return UsageErrorf("%v", err)
	}
	return nil
}
