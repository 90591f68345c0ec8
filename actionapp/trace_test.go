package actionapp

import (
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/telemetry/otlptest"
)

func TestActionTracesWithTheWorkflowEnv(t *testing.T) {
	t.Parallel()
	rcv, otlpURL := otlptest.NewHTTP(t)
	const apiKey = "collector-key-5f4e3d2c1b"
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	// OTEL_* set in the workflow step's env: reach the Action's environment.
	at := newActionTest(t, gh, repo, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlpURL, "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=" + apiKey})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	traces := rcv.Named("job")
	if h := rcv.Headers(); len(traces) != 1 || len(h) == 0 || h[0]["x-api-key"] != apiKey {
		var keys []string
		for _, m := range h {
			keys = append(keys, m["x-api-key"])
		}
		t.Fatalf("traces received %v, api keys %q", traces, keys)
	}
	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	for id := range traces {
		if !strings.Contains(summary, "· trace `"+id+"`") {
			t.Errorf("summary lacks trace %s:\n%s", id, summary)
		}
	}
	if !strings.Contains(at.out.String(), "::add-mask::"+apiKey) {
		t.Errorf("the collector's API key is not masked in the log")
	}
}
