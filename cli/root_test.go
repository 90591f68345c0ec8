package cli_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"

	"github.com/prodigy-action/prodigy-action/actionapp"
	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// runCLI runs the command tree in-process with PRODIGY_HOME=home.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run{Env: map[string]string{"PRODIGY_HOME": home}}.Exec(args...)
}

func TestUnknownSubcommandExitsTwoWithSuggestion(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"rn", "wf.yml"}, `unknown command "rn" for "prodigy-action"; did you mean run?`},
		{[]string{"dlq", "lst"}, `unknown command "lst" for "prodigy-action dlq"; did you mean list?`},
		{[]string{"dlq", "stat"}, `did you mean stats?`},
		{[]string{"worktree", "list"}, `unknown command "list" for "prodigy-action worktree"`},
		{[]string{"nonsense"}, `unknown command "nonsense" for "prodigy-action"`},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, home, tt.args...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestBareGroupsPrintHelpAndExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"dlq"}, {"worktree"}, {}} {
		code, out, errOut := runCLI(t, t.TempDir(), args...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, "Available Commands:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want help on stderr and exit 2", args, code, out, errOut)
		}
	}
	// --help itself is a request, not an error.
	if code, out, _ := runCLI(t, t.TempDir(), "dlq", "--help"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("dlq --help: exit %d, %q", code, out)
	}
}

func TestExecuteDispatchesToActionMode(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, io.Discard, func(k string) string { return env[k] })
	called := false
	f.ActionMain = func(_ context.Context, d actionapp.Deps) int {
		called = d.Getenv("GITHUB_ACTIONS") == "true"
		return 42
	}
	if code := cli.Execute(context.Background(), f, nil); !called || code != 42 {
		t.Errorf("called %v, code %d", called, code)
	}
}
