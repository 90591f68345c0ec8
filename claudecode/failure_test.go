package claudecode_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
)

func TestExitMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		r      *claudecode.Result
		stderr string
		want   string
	}{
		{"result text leads", &claudecode.Result{Subtype: "error_during_execution", Errors: []string{" boom ", ""}, NumTurns: 2},
			"", "boom [step 1 exited with code 1, subtype error_during_execution, 2 turn(s)]"},
		{"subtype without text", &claudecode.Result{Subtype: "error_x"}, "", "error_x [step 1 exited with code 1, subtype error_x]"},
		{"stderr's last text line", nil, "first\n{\"type\":\"x\"}\nlast words\n{\"type\":\"y\"}\n", "last words [step 1 exited with code 1]"},
		{"bare exit", nil, "{}\n", "step 1 exited with code 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := claudecode.ExitMessage("step 1", 1, tt.r, tt.stderr); got != tt.want {
				t.Errorf("ExitMessage = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReportedError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    claudecode.Result
		kind dlq.ErrorKind
		want string
	}{
		{"turn limit", claudecode.Result{Subtype: claudecode.SubtypeMaxTurns, NumTurns: 1, Errors: []string{"Reached maximum number of turns (1)"}},
			dlq.ResourceExhausted, "s stopped at its turn limit (max_turns, error_max_turns): Reached maximum number of turns (1) [subtype error_max_turns, 1 turn(s)]"},
		{"unclassified", claudecode.Result{IsError: true, Result: "Credit balance too low"}, dlq.Unknown, "s reported an error: Credit balance too low"},
		{"no message", claudecode.Result{IsError: true}, dlq.Unknown, "s reported an error: is_error without a message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := claudecode.ReportedError("s", tt.r)
			if f.Type.Kind != tt.kind || f.Message != tt.want || f.Permanent {
				t.Errorf("ReportedError = %+v, want %s %q", f, tt.kind, tt.want)
			}
		})
	}
}

func TestDeniedNamesToolsAndSettings(t *testing.T) {
	t.Parallel()
	r := claudecode.Result{PermissionDenials: []claudecode.PermissionDenial{
		{ToolName: "Write", ToolInput: map[string]any{"file_path": "hello.txt"}},
		{ToolName: "Write", ToolInput: map[string]any{"file_path": "hello.txt"}},
		{ToolInput: map[string]any{"command": "git commit -m x"}},
	}}
	f := claudecode.Denied("s", r, config.ClaudeSettings{PermissionMode: "default", AllowedTools: []string{"Read", "Grep"}})
	if f.Type.Kind != dlq.ValidationFailed || !f.Permanent {
		t.Errorf("Denied = %+v, want a permanent ValidationFailed", f)
	}
	for _, want := range []string{"s: Claude Code denied 3 tool call(s): Write (hello.txt), (unnamed tool) (git commit -m x) (permission_mode default, allowed_tools [Read, Grep])", "on_permission_denial: ignore"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q lacks %q", f.Message, want)
		}
	}
	if want := "permission_denials:\n  Write {\"file_path\":\"hello.txt\"}\n"; !strings.HasPrefix(f.Tail, want) {
		t.Errorf("tail %q, want it to start with %q", f.Tail, want)
	}
	var note strings.Builder
	r.Note(&note)
	if want := "--- claude result: subtype , 0 turn(s), denied: Write (hello.txt), (unnamed tool) (git commit -m x)\n"; note.String() != want {
		t.Errorf("Note = %q, want %q", note.String(), want)
	}
}

func TestFinalResultIsTheLastAfterOffset(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "t.jsonl")
	first := `{"type":"result","result":"one"}` + "\n"
	if err := os.WriteFile(p, []byte(first+`{"type":"assistant"}`+"\n"+`{"type":"result","result":"two"}`+"\n"+`{"type":"result","result":"three","num_turns":4}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, ok, err := claudecode.FinalResult(p, 0)
	if err != nil || !ok || r.Result != "three" || r.NumTurns != 4 {
		t.Errorf("FinalResult = %+v, %v, %v; want the third", r, ok, err)
	}
	if err := os.WriteFile(p, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := claudecode.FinalResult(p, int64(len(first))); ok || err != nil {
		t.Errorf("past the only result: ok %v, err %v; want none", ok, err)
	}
}
