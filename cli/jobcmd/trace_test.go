package jobcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/telemetry/otlptest"
)

func TestTracedRunAndRedriveCLI(t *testing.T) {
	t.Parallel()
	sink, otlpURL := otlptest.NewHTTP(t)
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}]`})
	home := t.TempDir()
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte(`
name: traced-cli
map:
  input: items.json
  agent_template:
    - shell: 'test "${item.n}" = a || { echo "b is broken"; exit 1; }'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(vars map[string]string, args ...string) (int, string, string) {
		return clitest.Run{Home: home, Env: vars}.Exec(args...)
	}
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlpURL}

	code, out, stderr := cli(otel, "run", wf, "--repo", repo, "--job-id", "j1", "--json")
	var res struct {
		TraceID string `json:"trace_id"`
		Failed  int    `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Failed != 1 {
		t.Fatalf("run: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	roots := sink.Named("job")
	if len(res.TraceID) != 32 || roots[res.TraceID] == nil {
		t.Fatalf("--json trace_id %q; traces received: %v", res.TraceID, roots)
	}
	if strings.Contains(stderr, "WARN") {
		t.Errorf("stderr: %s", stderr)
	}

	// The redrive is a new trace of the same job, marked resumed.
	code, out, stderr = cli(otel, "dlq", "retry", "j1", "--json")
	var retry struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(out), &retry); err != nil || code != 0 {
		t.Fatalf("dlq retry: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	roots = sink.Named("job")
	redrive := roots[retry.TraceID]
	if retry.TraceID == res.TraceID || redrive == nil || otlptest.Attr(redrive, "prodigy.job.resumed") != true {
		t.Fatalf("redrive trace %q (run's %q): %v", retry.TraceID, res.TraceID, redrive)
	}

	events, err := os.ReadFile(filepath.Join(home, "events", filepath.Base(repo), "j1", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(events)), "\n") {
		var rec struct {
			Event struct {
				Type    string `json:"event_type"`
				TraceID string `json:"trace_id"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Event.TraceID != "" {
			ids[rec.Event.Type] = rec.Event.TraceID
		}
	}
	if ids["job_started"] != res.TraceID || ids["job_resumed"] != retry.TraceID || len(ids) != 2 {
		t.Errorf("trace ids in events.jsonl: %v; want job_started %s, job_resumed %s", ids, res.TraceID, retry.TraceID)
	}

	// Without the variables: no trace id in the JSON.
	code, out, _ = cli(nil, "run", wf, "--repo", repo, "--job-id", "j2", "--json")
	if code != 0 || strings.Contains(out, "trace_id") {
		t.Errorf("untraced run: exit %d\n%s", code, out)
	}
	if n := len(sink.Named("job")); n != 2 {
		t.Errorf("%d traces received, want 2", n)
	}
}
