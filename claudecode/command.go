package claudecode

import (
	"encoding/json"

	"github.com/prodigy-action/prodigy-action/config"
)

// Command is how claude steps run Claude Code: the executable, the
// caller's extra arguments, the workflow's `claude:` block and the caller's
// overrides of it (CLI flags, Action inputs). The zero value runs "" with
// the defaults; it is a plain value, safe to copy and share.
type Command struct {
	// Path is the Claude Code executable.
	Path string
	// Args are extra arguments, placed before the budget cap and the fixed
	// stream-json flags.
	Args []string
	// Workflow is the workflow's `claude:` block.
	Workflow config.ClaudeSettings
	// Overrides replace the workflow's and each step's claude_options.
	Overrides config.ClaudeSettings
}

// Settings resolves the Claude Code options of step st.
func (c Command) Settings(st config.Step) config.ClaudeSettings {
	return c.Workflow.For(st, c.Overrides)
}

// Argv is the argument list of a claude step: the resolved options, the
// caller's extra arguments, the budget cap, the fixed stream-json flags,
// then "--" and the prompt, so a prompt starting with '-' (item data) is
// never read as an option.
func (c Command) Argv(settings config.ClaudeSettings, budget []string, prompt string) []string {
	args := settings.CommandArgs()
	args = append(args, c.Args...)
	args = append(args, budget...)
	return append(args, "--print", "--output-format", "stream-json", "--verbose", "--", prompt)
}

// Line is the command line claude step st runs, the executable first and
// the prompt shown as <prompt> (for validate).
func (c Command) Line(st config.Step) []string {
	return append([]string{c.Path}, c.Argv(c.Settings(st), nil, "<prompt>")...)
}

// EncodeOverrides encodes the caller's Claude options for the checkpoint
// (nil when there are none).
func EncodeOverrides(s config.ClaudeSettings) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil || string(b) == "{}" {
		return nil
	}
	return b
}

// DecodeOverrides decodes what EncodeOverrides wrote; anything it cannot
// read is no override.
func DecodeOverrides(raw json.RawMessage) config.ClaudeSettings {
	var s config.ClaudeSettings
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Validate() != nil {
		return config.ClaudeSettings{}
	}
	return s
}
