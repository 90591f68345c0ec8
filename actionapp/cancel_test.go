package actionapp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

// cancelWorkflow: item a fails at once (DLQ), item b runs an agent that
// ignores SIGTERM for 60 s.
const cancelWorkflow = `
name: cancel
mode: mapreduce
map:
  input: items.json
  json_path: "$.items[*]"
  max_parallel: 2
  agent_template:
    - shell: |
        if [ "${item.name}" = a ]; then echo "a fails" >&2; exit 3; fi
        trap '' TERM
        sleep 60
  error_policy:
    on_item_failure: dlq
    retry_config:
      attempts: 1
`

// After the first signal (the context ending) publishing has its own
// deadline: an artifact service that never answers is given up on when
// the cancel budget ends, and the outputs and summary are still written.
// The agent that ignores SIGTERM is killed KillGrace after the signal.
func TestCancelledRunPublishesWithinItsBudgetEvenIfGitHubHangs(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	gh.hang.Store(true)
	repo := cliRepo(t, map[string]string{"workflow.yml": cancelWorkflow, "items.json": `{"items":[{"name":"a"},{"name":"b"}]}`})
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMENT": "never"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The signal once item a is in the DLQ and item b's agent runs.
	go func() {
		for ctx.Err() == nil {
			idx, _ := filepath.Glob(filepath.Join(at.env["RUNNER_TEMP"], "prodigy", "dlq", "*", "*", "mapreduce", "dlq", "*", "index.json"))
			evs, _ := filepath.Glob(filepath.Join(at.env["RUNNER_TEMP"], "prodigy", "events", "*", "*", "events.jsonl"))
			if len(idx) == 1 && len(evs) == 1 {
				if data, _ := os.ReadFile(evs[0]); strings.Count(string(data), `"agent_started"`) == 2 {
					cancel()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	budget := CancelBudget{KillGrace: 200 * time.Millisecond, Publish: 1500 * time.Millisecond}
	start := time.Now()
	code := Main(ctx, Deps{
		Getenv: func(k string) string { return at.env[k] }, Stdout: &at.out, Stderr: &at.errb,
		Clock:      retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		RetrySleep: func(context.Context, time.Duration) error { return nil },
		Engine:     at.recordingEngine, Cancel: budget,
	})
	elapsed := time.Since(start)
	if code != 130 {
		t.Fatalf("exit %d, want 130\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	if elapsed > time.Minute {
		t.Errorf("took %s: the agent or the hanging upload was not cut off", elapsed)
	}
	out := at.outputs(t)
	if out["total"] != "2" || out["dlq-count"] != "1" || out["dlq-artifact-name"] != "" {
		t.Errorf("outputs = %v, want total 2, dlq-count 1, no artifact", out)
	}
	if !strings.Contains(at.out.String(), "DLQ artifact not uploaded") {
		t.Errorf("no warning about the upload given up:\n%s", at.out.String())
	}
	if summary := at.file(t, "GITHUB_STEP_SUMMARY"); !strings.Contains(summary, "interrupted") {
		t.Errorf("summary:\n%s", summary)
	}
	if at.engine.KillGrace != budget.KillGrace || at.engine.InterruptGrace != stopAgentsNow {
		t.Errorf("engine graces = %s, %s", at.engine.InterruptGrace, at.engine.KillGrace)
	}
}
