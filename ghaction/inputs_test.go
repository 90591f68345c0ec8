package ghaction

import (
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"
)

func actionWith(env map[string]string) *githubactions.Action {
	return githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(&strings.Builder{}))
}

func TestReadInputs(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(actionWith(map[string]string{
		"INPUT_WORKFLOW": "wf.yml", "INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "9876543210",
		"INPUT_RETRY-FILTER": "item.priority > 2", "INPUT_RETRY-FORCE": "True", "INPUT_MAX-PARALLEL": "4",
		"INPUT_GITHUB-TOKEN": "ghs_x", "INPUT_COMMENT": "on-failure", "INPUT_PR-NUMBER": "12",
		"INPUT_ARTIFACT-NAME": "dlq", "INPUT_ARTIFACT-RETENTION-DAYS": "5", "INPUT_PUSH": "true",
		"INPUT_FAIL-ON-DLQ": "false", "INPUT_CLAUDE-COMMAND": "/bin/claude", "INPUT_CLAUDE-ARGS": "--model  opus",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Inputs{Workflow: "wf.yml", Command: "retry", RetryFromRun: 9876543210, RetryFilter: "item.priority > 2",
		RetryForce: true, MaxParallel: 4, GitHubToken: "ghs_x", Comment: CommentOnFailure, PRNumber: "12",
		ArtifactName: "dlq", ArtifactRetentionDays: 5, Push: true, ClaudeCommand: "/bin/claude", ClaudeArgs: []string{"--model", "opus"}}
	if got := in; got.Workflow != want.Workflow || got.Command != want.Command || got.RetryFromRun != want.RetryFromRun ||
		got.RetryFilter != want.RetryFilter || !got.RetryForce || got.MaxParallel != 4 || got.GitHubToken != "ghs_x" ||
		got.Comment != want.Comment || got.PRNumber != "12" || got.ArtifactName != "dlq" || got.ArtifactRetentionDays != 5 ||
		!got.Push || got.FailOnDLQ || got.ClaudeCommand != "/bin/claude" || strings.Join(got.ClaudeArgs, "|") != "--model|opus" {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	in, err = ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml"}))
	if err != nil {
		t.Fatal(err)
	}
	if in.Command != "run" || in.Comment != CommentAlways || in.ArtifactName != "prodigy-dlq" || in.Push {
		t.Errorf("defaults = %+v", in)
	}
}

func TestReadInputsErrors(t *testing.T) {
	t.Parallel()
	_, err := ReadInputs(actionWith(map[string]string{
		"INPUT_COMMAND": "retry", "INPUT_COMMENT": "sometimes", "INPUT_MAX-PARALLEL": "-1",
		"INPUT_PUSH": "yes", "INPUT_ARTIFACT-NAME": "a/b", "INPUT_ARTIFACT-RETENTION-DAYS": "91",
	}))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"comment", "max-parallel", "push", "artifact-name", "artifact-retention-days", "retry-from-run is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ReadInputs(actionWith(map[string]string{})); err == nil || !strings.Contains(err.Error(), "workflow is required") {
		t.Errorf("missing workflow: %v", err)
	}
}

func TestReadInputsSecretValues(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml", "INPUT_SECRET-VALUES": "  first value \n\n\tsecond\r\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(in.SecretValues, "|") != "first value|second" {
		t.Errorf("SecretValues = %q", in.SecretValues)
	}
}

func TestReadClaudeInputs(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(actionWith(map[string]string{
		"INPUT_WORKFLOW": "wf.yml", "INPUT_CLAUDE-MODEL": " sonnet ", "INPUT_CLAUDE-PERMISSION-MODE": "plan",
		"INPUT_CLAUDE-ALLOWED-TOOLS": "Bash(git add:*), Bash(git commit:*)\nEdit\n", "INPUT_CLAUDE-DISALLOWED-TOOLS": "WebFetch,WebSearch",
		"INPUT_CLAUDE-MAX-TURNS": "12",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if in.ClaudeModel != "sonnet" || in.ClaudePermissionMode != "plan" || in.ClaudeMaxTurns != 12 ||
		strings.Join(in.ClaudeAllowedTools, "|") != "Bash(git add:*)|Bash(git commit:*)|Edit" ||
		strings.Join(in.ClaudeDisallowedTools, "|") != "WebFetch|WebSearch" {
		t.Fatalf("claude inputs = %+v", in)
	}
	in, err = ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml"}))
	if err != nil || in.ClaudeAllowedTools != nil || in.ClaudeDisallowedTools != nil {
		t.Fatalf("unset tool inputs must stay nil (the workflow's settings apply): %+v %v", in, err)
	}
	if _, err := ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml", "INPUT_CLAUDE-MAX-TURNS": "many"})); err == nil {
		t.Fatal("claude-max-turns: many accepted")
	}
}
