package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

const claudeMap = `
map:
  input: items.json
  agent_template:
    - claude: "fix ${item.path}"
      claude_options:
        model: opus
        allowed_tools: ["Bash(git:*)"]
    - claude: "/review"
`

func TestClaudeSettingsResolve(t *testing.T) {
	t.Parallel()
	w, err := config.Parse("w.yml", []byte("name: c\nclaude:\n  model: sonnet\n  permission_mode: plan\n  max_turns: 5\n  disallowed_tools: [WebFetch]\n  args: [--append-system-prompt, be brief]\n  on_permission_denial: ignore\n"+claudeMap))
	if err != nil {
		t.Fatal(err)
	}
	steps := w.Map.AgentTemplate
	// Workflow block, then the step's claude_options, then the caller.
	got := w.ClaudeFor(steps[0], config.ClaudeSettings{MaxTurns: 9})
	if got.Model != "opus" || got.PermissionMode != "plan" || got.MaxTurns != 9 || !slices.Equal(got.AllowedTools, []string{"Bash(git:*)"}) ||
		!slices.Equal(got.DisallowedTools, []string{"WebFetch"}) || got.FailOnDenial() {
		t.Fatalf("step 1 = %+v", got)
	}
	want := "--model opus --permission-mode plan --allowedTools Bash(git:*) --disallowedTools WebFetch --max-turns 9 --append-system-prompt be brief"
	if a := strings.Join(got.CommandArgs(), " "); a != want {
		t.Fatalf("args %q\nwant %q", a, want)
	}
	// Defaults fill what nobody set.
	d := (&config.Workflow{}).ClaudeFor(config.Step{Claude: "x"}, config.ClaudeSettings{})
	if d.PermissionMode != "acceptEdits" || !slices.Equal(d.AllowedTools, []string{"Bash"}) || !d.FailOnDenial() {
		t.Fatalf("defaults = %+v", d)
	}
	// An explicit empty list means none, not the default.
	none := (&config.Workflow{}).ClaudeFor(config.Step{Claude: "x"}, config.ClaudeSettings{AllowedTools: []string{}})
	if len(none.AllowedTools) != 0 || slices.Contains(none.CommandArgs(), "--allowedTools") {
		t.Fatalf("allowed_tools [] = %+v", none)
	}
}

func TestClaudeSettingsErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, src, want string }{
		{"mode", "claude:\n  permission_mode: yolo\n", "w.yml:3:20: claude.permission_mode: unknown permission mode \"yolo\""},
		{"comma", "claude:\n  allowed_tools: [\"Bash(a,b)\"]\n", "claude.allowed_tools[0]: tool rule \"Bash(a,b)\""},
		{"turns", "claude:\n  max_turns: 0\n", "claude.max_turns: must be at least 1"},
		{"denial", "claude:\n  on_permission_denial: maybe\n", "claude.on_permission_denial: must be \"fail\""},
		{"unknown key", "claude:\n  modle: opus\n", "modle"},
		{"options on a shell step", "map:\n  input: i.json\n  agent_template:\n    - shell: make\n      claude_options: {model: x}\n", "claude_options belongs to a claude step"},
	} {
		src := "name: c\n" + tt.src
		if !strings.Contains(tt.src, "map:") {
			src += "map:\n  input: i.json\n  agent_template:\n    - claude: x\n"
		}
		_, err := config.Parse("w.yml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	if err := (config.ClaudeSettings{PermissionMode: "nope"}).Validate(); err == nil {
		t.Error("Validate accepted an unknown mode")
	}
}
