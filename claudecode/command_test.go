package claudecode_test

import (
	"slices"
	"testing"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
)

// TestCommandLineOrder: the resolved options, the caller's arguments, the
// budget, the fixed flags, then "--" before the prompt, so a prompt
// starting with '-' is never an option.
func TestCommandLineOrder(t *testing.T) {
	t.Parallel()
	c := claudecode.Command{Path: "claude", Args: []string{"--x"}, Workflow: config.ClaudeSettings{Model: "m"},
		Overrides: config.ClaudeSettings{MaxTurns: 3}}
	st := config.Step{Claude: "p", ClaudeOptions: config.ClaudeSettings{Model: "step-model"}}
	got := c.Argv(c.Settings(st), []string{"--max-budget-usd", "1"}, "-rf")
	want := []string{"--model", "step-model", "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--max-turns", "3",
		"--x", "--max-budget-usd", "1", "--print", "--output-format", "stream-json", "--verbose", "--", "-rf"}
	if !slices.Equal(got, want) {
		t.Errorf("Argv = %q\nwant %q", got, want)
	}
	line := []string{"claude", "--model", "step-model", "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--max-turns", "3",
		"--x", "--print", "--output-format", "stream-json", "--verbose", "--", "<prompt>"}
	if got := c.Line(st); !slices.Equal(got, line) {
		t.Errorf("Line = %q\nwant %q", got, line)
	}
}

func TestOverridesRoundTrip(t *testing.T) {
	t.Parallel()
	if raw := claudecode.EncodeOverrides(config.ClaudeSettings{}); raw != nil {
		t.Errorf("no overrides encode as %s, want nil", raw)
	}
	s := config.ClaudeSettings{Model: "m", AllowedTools: []string{}, MaxTurns: 2}
	got := claudecode.DecodeOverrides(claudecode.EncodeOverrides(s))
	if got.Model != "m" || got.MaxTurns != 2 {
		t.Errorf("round trip = %+v, want %+v", got, s)
	}
	for _, raw := range []string{"", "{", `{"permission_mode":"nope"}`} {
		if got := claudecode.DecodeOverrides([]byte(raw)); got.Model != "" || got.PermissionMode != "" {
			t.Errorf("DecodeOverrides(%q) = %+v, want none", raw, got)
		}
	}
}
