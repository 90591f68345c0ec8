package runner_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/validate"
)

// TestInvalidWorkflowExitsTwo: a workflow validate rejects (a bad
// json_path, a missing file) is a usage, config or input error, exit 2,
// for the CLI and the Action alike.
func TestInvalidWorkflowExitsTwo(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(bad, []byte("map:\n  input: x.json\n  json_path: \"$[?(\"\n  agent_template: [{shell: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "nope.yml")} {
		v := validate.File(path, validate.Options{})
		if got := runner.ExitCode(v.Err()); v.Valid || got != runner.ExitUsage {
			t.Errorf("%s: valid %v, exit %d; want invalid, exit %d (err %v)", path, v.Valid, got, runner.ExitUsage, v.Err())
		}
	}
	if got := runner.ExitCode(validate.Result{Valid: true}.Err()); got != runner.ExitOK {
		t.Errorf("valid workflow: exit %d, want 0", got)
	}
}
