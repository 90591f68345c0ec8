package dlq

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func typ(t ErrorType) *ErrorType { return &t }

// goldenResults are agent results as the runner reports them for the four
// failure kinds the seeds illustrate.
func goldenResults() map[string]AgentResult {
	return map[string]AgentResult{
		"command_failed": {
			ItemID: "item-123", ItemData: json.RawMessage(`{"file": "src/main.rs", "priority": 5}`), Status: StatusFailed,
			Failures: []Failure{{
				Attempt: 1, At: at("2025-01-11T10:25:00Z"), Type: typ(CommandFailedWith(101)),
				Message: "cargo test failed with exit code 101", StackTrace: "thread 'main' panicked at src/main.rs:42...",
				AgentID: "agent-1", Step: "shell: cargo test", Duration: 45 * time.Second,
				LogPath: "/home/user/.prodigy/logs/prodigy/job-1/item-123/attempt-1.jsonl",
			}, {
				Attempt: 2, At: at("2025-01-11T10:30:00Z"),
				Message: "cargo test failed with exit code 101", StackTrace: "thread 'main' panicked at src/main.rs:42...",
				AgentID: "agent-1", Step: "shell: cargo test", Duration: 44 * time.Second,
			}},
			WorktreePath: "/home/user/.prodigy/worktrees/prodigy/job-1/agent-1", BranchName: "prodigy-agent-job-1-item-123",
			UncommittedChanges: "src/main.rs modified",
		},
		"timeout": {
			ItemID: "item-1", ItemData: json.RawMessage(`{"type":"process","path":"/src/main.rs"}`), Status: StatusTimeout,
			Failures: []Failure{{
				Attempt: 1, At: at("2025-01-11T12:00:00Z"), Message: "Command exceeded 300 second timeout",
				Context: []string{"Executing agent for item-1", "Running command: cargo test", "Waiting for completion"},
				AgentID: "agent-0", Step: "test-step", Duration: 300 * time.Second,
			}},
			WorktreePath: "/home/user/.prodigy/worktrees/project/agent-0", BranchName: "agent-0-item-1",
		},
		"merge_conflict": {
			ItemID: "item_7", ItemData: json.RawMessage(`"docs/guide.md"`), Status: StatusFailed,
			Failures: []Failure{{
				Attempt: 1, At: at("2025-01-11T09:00:00.5Z"), Type: typ(ErrorType{Kind: MergeConflict}),
				Message: "merge of prodigy-agent-job-1-item_7 into prodigy/job-1 conflicted in docs/guide.md",
				AgentID: "agent-3", Step: "merge", Duration: 1500 * time.Millisecond,
			}},
		},
		"commit_validation_failed": {
			ItemID: "item-9", ItemData: json.RawMessage(`{"id": 9}`), Status: StatusFailed,
			Failures: []Failure{{
				Attempt: 1, At: at("2025-01-11T08:00:00Z"),
				Message: "Commit required but no commit was created by step 'claude: /fix ${item}'",
				AgentID: "agent-2", Step: "claude: /fix ${item}", Duration: 61 * time.Second,
				LogPath: "/home/user/.prodigy/logs/prodigy/job-1/item-9/attempt-1.jsonl",
			}},
			WorktreePath: "/home/user/.prodigy/worktrees/prodigy/job-1/agent-2", BranchName: "prodigy-agent-job-1-item-9",
		},
	}
}

func TestRecordGolden(t *testing.T) {
	for name, r := range goldenResults() {
		t.Run(name, func(t *testing.T) {
			d := FromAgentResult(r)
			if d == nil {
				t.Fatal("FromAgentResult returned nil for a failure")
			}
			s, err := Open(t.TempDir(), "job-1", Options{Warn: func(m string) { t.Error(m) }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() }) // before TempDir's removal
			if _, err := s.Add(*d); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(s.ItemPath(r.ItemID))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("item file differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			back, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Encode(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("decode+encode is not the identity:\n%s", again)
			}
		})
	}
}

func TestErrorTypeJSON(t *testing.T) {
	tests := []struct {
		name string
		in   ErrorType
		json string
	}{
		{"timeout", ErrorType{Kind: Timeout}, `"Timeout"`},
		{"command_failed", CommandFailedWith(101), `{"CommandFailed":{"exit_code":101}}`},
		{"command_failed_negative", CommandFailedWith(-1), `{"CommandFailed":{"exit_code":-1}}`},
		{"commit_validation", ErrorType{Kind: CommitValidationFailed}, `"CommitValidationFailed"`},
		{"worktree", ErrorType{Kind: WorktreeError}, `"WorktreeError"`},
		{"merge", ErrorType{Kind: MergeConflict}, `"MergeConflict"`},
		{"validation", ErrorType{Kind: ValidationFailed}, `"ValidationFailed"`},
		{"resource", ErrorType{Kind: ResourceExhausted}, `"ResourceExhausted"`},
		{"unknown", ErrorType{Kind: Unknown}, `"Unknown"`},
		{"zero_is_unknown", ErrorType{}, `"Unknown"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.json {
				t.Errorf("Marshal = %s, want %s", b, tt.json)
			}
			var back ErrorType
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := tt.in
			if want.Kind == "" {
				want.Kind = Unknown
			}
			if back != want {
				t.Errorf("round trip = %+v, want %+v", back, want)
			}
		})
	}
	for _, bad := range []string{`"PermissionError"`, `{"A":1,"B":2}`, `42`, `{"Nope":{}}`, `{"CommandFailed":{"exit_code":"x"}}`} {
		var e ErrorType
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want error", bad, e)
		}
	}
	var unit ErrorType
	if err := json.Unmarshal([]byte(`{"Timeout":null}`), &unit); err != nil || unit.Kind != Timeout {
		t.Errorf(`{"Timeout":null} = %+v, %v`, unit, err)
	}
}

// The seeds' example records (comments removed) must decode and re-encode
// to the same JSON values.
func TestSeedExamplesRoundTrip(t *testing.T) {
	for _, name := range []string{"seed_dlq_guide.json", "seed_storage.json"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Encode(d)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if !bytes.Equal(wb, gb) {
				t.Errorf("round trip changed the record:\n got %s\nwant %s", gb, wb)
			}
		})
	}
}
