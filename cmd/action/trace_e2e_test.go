package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

// otlpSink is a local OTLP/HTTP receiver keeping the decoded spans.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// jobSpans returns the root spans by trace id.
func (s *otlpSink) jobSpans() map[string]*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, sp := range s.spans {
		if sp.GetName() == "job" {
			out[hex.EncodeToString(sp.GetTraceId())] = sp
		}
	}
	return out
}

// spanBool is a bool attribute of s (false when absent).
func spanBool(s *tracepb.Span, key string) bool {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetBoolValue()
		}
	}
	return false
}

func TestTracedRunAndRedriveCLI(t *testing.T) {
	t.Parallel()
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
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
		var out, errb bytes.Buffer
		env := map[string]string{"PRODIGY_HOME": home, "HOME": home}
		for k, v := range vars {
			env[k] = v
		}
		f := cmdutil.NewFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
		f.Engine.Clock = retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		code := execute(context.Background(), f, args)
		return code, out.String(), errb.String()
	}
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}

	code, out, stderr := cli(otel, "run", wf, "--repo", repo, "--job-id", "j1", "--json")
	var res struct {
		TraceID string `json:"trace_id"`
		Failed  int    `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Failed != 1 {
		t.Fatalf("run: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	roots := sink.jobSpans()
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
	roots = sink.jobSpans()
	redrive := roots[retry.TraceID]
	if retry.TraceID == res.TraceID || redrive == nil || !spanBool(redrive, "prodigy.job.resumed") {
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
	if n := len(sink.jobSpans()); n != 2 {
		t.Errorf("%d traces received, want 2", n)
	}
}
