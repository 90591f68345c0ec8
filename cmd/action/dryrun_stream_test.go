package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestDLQRetryDryRunStreamsSameOutput: the streamed dry run (issue 11)
// prints, as text and as --json, exactly what the accumulated Result would,
// with several selected items (HTML-like characters in a label included),
// and changes nothing.
func TestDLQRetryDryRunStreamsSameOutput(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"path":"ok.go"},{"path":"a<&>.go"},{"path":"b.go"},{"path":"c.go"}]`})
	wf := writeWorkflow(t, `name: stream
map:
  input: items.json
  id_field: path
  agent_template:
    - shell: |
        [ "${item.path}" = ok.go ] || { echo "boom" >&2; exit 4; }
        `+commitItem+`
`)
	home := t.TempDir()
	if code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "st"); code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	code, out, errOut := runCLI(t, home, "dlq", "retry", "st", "--dry-run")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "a<&>.go\ta<&>.go\n") || !strings.Contains(errOut, "dry run: 3 item(s) would be retried") {
		t.Fatalf("text dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "dlq", "retry", "st", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("json dry run: exit %d\n%s", code, errOut)
	}
	// The same Result accumulated in memory and written by cmdutil.WriteJSON.
	eng := &runner.Engine{Home: home, Stderr: &bytes.Buffer{}}
	res, err := eng.Redrive(context.Background(), runner.RedriveSpec{JobID: "st", DryRun: true, MaxRetries: 3, Agents: runner.Agents{MaxParallel: 10}})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := cmdutil.WriteJSON(&want, res); err != nil {
		t.Fatal(err)
	}
	if out != want.String() {
		t.Errorf("streamed --json differs:\n%s\nwant\n%s", out, want.String())
	}
	var got runner.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Pending != 3 || len(got.Items) != 3 {
		t.Errorf("json: %v pending %d items %d", err, got.Pending, len(got.Items))
	}
	// Nothing selected: an empty items list.
	code, out, _ = runCLI(t, home, "dlq", "retry", "st", "--dry-run", "--json", "--filter", `item.path == "none"`)
	if code != 0 || !strings.Contains(out, `"items": []`) || !strings.Contains(out, `"pending": 0`) {
		t.Errorf("empty json dry run: exit %d\n%s", code, out)
	}
}
