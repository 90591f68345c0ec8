package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/redact/redacttest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/telemetry"
	"github.com/prodigy-action/prodigy-action/telemetry/otlptest"
)

// secret is a token the failing item prints; it must never reach the collector.
const secret = "tok-9f8e7d6c5b4a39281706"

const tracedItems = `[{"name": "ok"}, {"name": "flaky"}, {"name": "bad"}]`

// tracedWorkflow: ok succeeds, flaky fails its first attempt, bad fails
// both attempts (printing a secret) and goes to the DLQ. Successful
// attempts run a claude step.
const tracedWorkflow = `
name: traced
setup:
  - shell: "echo setting up"
map:
  input: items.json
  id_field: name
  max_parallel: 1
  agent_template:
    - name: check
      shell: |
        case "$PRODIGY_ITEM_ID" in
          flaky) [ "$PRODIGY_ATTEMPT" -gt 1 ] || { echo "transient network failure"; exit 1; } ;;
          bad) echo "login rejected for token $DEPLOY_TOKEN"; exit 3 ;;
        esac
    - claude: "/fix ${item.name}"
  retry_config:
    attempts: 2
error_policy:
  on_item_failure: dlq
reduce:
  - shell: "echo reduced"
`

func TestHTTPExportsTheSpanTree(t *testing.T) {
	t.Parallel()
	rcv, url := otlptest.NewHTTP(t)
	claude := standInClaude(t, "0.25", "claude-sonnet-4-5", 1200, 340)
	vars := env{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-team=fleet", "OTEL_SERVICE_NAME": "fleet-test"}
	j, res, err := runJob(t, map[string]string{"items.json": tracedItems}, tracedWorkflow, vars, env{"DEPLOY_TOKEN": secret}, claude, "--model", "claude-sonnet-4-5")
	if err != nil || res.Successful != 2 || res.Failed != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, j.stderr)
	}
	if w := j.warnings.String(); w != "" {
		t.Errorf("warnings: %s", w)
	}
	n, spans, raw := rcv.Snapshot()
	if n == 0 {
		t.Fatal("the receiver got no request")
	}
	tr := tree{t: t, spans: spans}

	// One trace: its id is in the result and the job_started event.
	for _, s := range spans {
		if !bytes.Equal(s.GetTraceId(), spans[0].GetTraceId()) {
			t.Fatalf("spans of several traces:%s", tr)
		}
	}
	traceID := hex.EncodeToString(spans[0].GetTraceId())
	if res.TraceID != traceID {
		t.Errorf("Result.TraceID = %q, want %q", res.TraceID, traceID)
	}
	var started map[string]any
	for _, ev := range j.events() {
		if ev["event_type"] == "job_started" {
			started = ev
		}
	}
	if started["trace_id"] != traceID {
		t.Errorf("job_started = %v, want trace_id %s", started, traceID)
	}

	// job → setup / map / reduce
	root := tr.one("job", "", nil)
	if len(root.GetParentSpanId()) != 0 {
		t.Errorf("job span has a parent")
	}
	wantAttrs(t, root, map[string]any{"prodigy.job.id": "job-1", "prodigy.workflow.name": "traced", "prodigy.outcome": "completed",
		"prodigy.items.total": int64(3), "prodigy.items.successful": int64(2), "prodigy.items.failed": int64(1), "prodigy.cost_usd": 0.5})
	var phases []string
	for _, p := range tr.children(root, "") {
		phases = append(phases, p.GetName())
	}
	if strings.Join(phases, ",") != "setup,map,reduce" {
		t.Fatalf("phases under the job = %v, want setup,map,reduce:%s", phases, tr)
	}
	setup := tr.one("setup", "", nil)
	if steps := tr.children(setup, "step"); len(steps) != 1 || attr(steps[0], "prodigy.step.kind") != "shell" {
		t.Errorf("setup steps = %v", steps)
	}
	reduce := tr.one("reduce", "", nil)
	if steps := tr.children(reduce, "step"); len(steps) != 1 {
		t.Errorf("reduce steps = %v", steps)
	}

	// map → items
	mapSpan := tr.one("map", "", nil)
	items := tr.children(mapSpan, "item")
	if len(items) != 3 {
		t.Fatalf("%d item spans under map, want 3:%s", len(items), tr)
	}
	ok := tr.one("item", "prodigy.item.id", "ok")
	flaky := tr.one("item", "prodigy.item.id", "flaky")
	bad := tr.one("item", "prodigy.item.id", "bad")
	wantAttrs(t, ok, map[string]any{"prodigy.outcome": "merged", "prodigy.attempts": int64(1), "prodigy.cost_usd": 0.25})
	wantAttrs(t, flaky, map[string]any{"prodigy.outcome": "merged", "prodigy.attempts": int64(2), "prodigy.cost_usd": 0.25})
	rec := dlqRecord(t, j, "bad")
	wantAttrs(t, bad, map[string]any{"prodigy.outcome": "dlq", "prodigy.attempts": int64(2), "error.type": "CommandFailed",
		"prodigy.error.signature": rec.ErrorSignature})
	if bad.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || ok.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("status: bad %v, ok %v", bad.GetStatus(), ok.GetStatus())
	}

	// item → attempts → steps
	attempts := tr.children(flaky, "attempt")
	if len(attempts) != 2 {
		t.Fatalf("flaky has %d attempt spans, want 2:%s", len(attempts), tr)
	}
	wantAttrs(t, attempts[0], map[string]any{"prodigy.attempt": int64(1), "prodigy.outcome": "failed", "error.type": "CommandFailed"})
	wantAttrs(t, attempts[1], map[string]any{"prodigy.attempt": int64(2), "prodigy.outcome": "succeeded", "prodigy.cost_usd": 0.25})
	if attempts[0].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed attempt status = %v", attempts[0].GetStatus())
	}
	if steps := tr.children(attempts[0], ""); len(steps) != 1 || steps[0].GetName() != "step" {
		t.Errorf("the failed attempt ran %d step(s), want only the shell step", len(steps))
	} else {
		wantAttrs(t, steps[0], map[string]any{"prodigy.step.name": `step "check"`, "prodigy.step.kind": "shell", "prodigy.step.index": int64(1), "prodigy.outcome": "failed"})
	}
	steps := tr.children(attempts[1], "")
	if len(steps) != 2 || steps[1].GetName() != "invoke_agent claude-code" {
		t.Fatalf("the second attempt's steps:%s", tr)
	}
	wantAttrs(t, steps[1], map[string]any{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "anthropic", "gen_ai.system": "anthropic",
		"gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.response.model": "claude-sonnet-4-5",
		"gen_ai.usage.input_tokens": int64(1200), "gen_ai.usage.output_tokens": int64(340),
		"prodigy.cost_usd": 0.25, "prodigy.step.kind": "claude", "prodigy.step.index": int64(2), "prodigy.outcome": "succeeded",
	})
	if steps[1].GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("claude step span kind = %v", steps[1].GetKind())
	}
	badAttempts := tr.children(bad, "attempt")
	if len(badAttempts) != 2 {
		t.Fatalf("bad has %d attempts", len(badAttempts))
	}
	for _, a := range badAttempts {
		if msg, _ := attr(a, "prodigy.error.message").(string); !strings.Contains(msg, "login rejected for token "+redact.Mask) {
			t.Errorf("attempt error message = %q, want the redacted message", msg)
		}
	}
	// Timing nests: every child lies within its parent.
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[tr.id(s.GetSpanId())] = s
	}
	for _, s := range spans {
		if p := byID[tr.id(s.GetParentSpanId())]; p != nil && (s.GetStartTimeUnixNano() < p.GetStartTimeUnixNano() || s.GetEndTimeUnixNano() > p.GetEndTimeUnixNano()) {
			t.Errorf("span %s is not within its parent %s", s.GetName(), p.GetName())
		}
	}

	// The secret never reached the collector; headers and resource did.
	redacttest.AssertNoSecrets(t, "OTLP requests", string(raw), secret)
	h := rcv.Headers()[0]
	service := otlptest.Value(rcv.Resource(), "service.name")
	if h["authorization"] != "Bearer abc" || h["x-team"] != "fleet" {
		t.Errorf("request headers = %v", h)
	}
	if service != "fleet-test" {
		t.Errorf("service.name = %v", service)
	}
}

// dlqRecord reads the DLQ record of item id.
func dlqRecord(t *testing.T, j *job, id string) dlq.DeadLetteredItem {
	t.Helper()
	store, err := dlq.Open(jobstore.Paths{Home: j.home, Repo: filepath.Base(j.repo), JobID: "job-1"}.DLQRoot(), "job-1", dlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return *rec
}

const oneItemWorkflow = `
name: one
map:
  input: items.json
  agent_template:
    - shell: "echo hi > hi.txt && git add hi.txt && git commit -qm hi"
`

func TestGRPCExportsTheSpanTree(t *testing.T) {
	t.Parallel()
	rcv, addr := otlptest.NewGRPC(t)
	vars := env{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://" + addr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-key=v1"}
	j, res, err := runJob(t, map[string]string{"items.json": `[{"name": "a"}]`}, oneItemWorkflow, vars, env{}, "")
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v\n%s", err, j.stderr)
	}
	n, spans, _ := rcv.Snapshot()
	if n == 0 {
		t.Fatalf("the gRPC receiver got nothing; warnings: %s", j.warnings)
	}
	tr := tree{t: t, spans: spans}
	root := tr.one("job", "", nil)
	mapSpan := tr.children(root, "map")
	if len(mapSpan) != 1 {
		t.Fatalf("map spans under job:%s", tr)
	}
	item := tr.children(mapSpan[0], "item")
	if len(item) != 1 || attr(item[0], "prodigy.item.id") != "item_0" || attr(item[0], "prodigy.outcome") != "merged" {
		t.Fatalf("items under map:%s", tr)
	}
	attempt := tr.children(item[0], "attempt")
	if len(attempt) != 1 || len(tr.children(attempt[0], "step")) != 1 {
		t.Fatalf("attempt/step under the item:%s", tr)
	}
	if res.TraceID != hex.EncodeToString(root.GetTraceId()) {
		t.Errorf("trace id %q, root's %x", res.TraceID, root.GetTraceId())
	}
	if h := rcv.Headers()[0]; h["x-key"] != "v1" {
		t.Errorf("gRPC metadata = %v", h)
	}
}

func TestNothingExportedWithoutTheVariables(t *testing.T) {
	rcv, url := otlptest.NewHTTP(t)
	for _, vars := range []env{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, // no endpoint
		{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_TRACES_EXPORTER": "none"},
	} {
		if tr := telemetry.New(context.Background(), telemetry.Config{Getenv: vars.get}); tr != nil || tr.Tracer() != nil {
			t.Errorf("%v: tracing is on", vars)
		}
	}
	// The process environment is not read: only the injected one counts.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	j, res, err := runJob(t, map[string]string{"items.json": `[{"name": "a"}]`}, oneItemWorkflow, env{}, env{}, "")
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v\n%s", err, j.stderr)
	}
	if n, _, _ := rcv.Snapshot(); n != 0 {
		t.Errorf("the receiver got %d request(s) without OTEL_* variables", n)
	}
	if res.TraceID != "" {
		t.Errorf("Result.TraceID = %q", res.TraceID)
	}
	for _, ev := range j.events() {
		if _, ok := ev["trace_id"]; ok {
			t.Errorf("event has a trace_id without tracing: %v", ev)
		}
	}
}

func TestCollectorDownIsAWarning(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	vars := env{"OTEL_EXPORTER_OTLP_ENDPOINT": closed, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}
	j, res, err := runJob(t, map[string]string{"items.json": `[{"name": "a"}]`}, oneItemWorkflow, vars, env{}, "")
	if err != nil || res.Successful != 1 || res.Status != runner.StatusCompleted {
		t.Fatalf("run with the collector down: %v %+v\n%s", err, res, j.stderr)
	}
	w := j.warnings.String()
	if !strings.Contains(w, "tracing: could not export spans to "+closed+"/v1/traces (the job continues)") || !strings.Contains(w, "span(s) could not be exported") {
		t.Errorf("warnings = %q", w)
	}
}

func TestTelemetryRedactsEveryString(t *testing.T) {
	t.Parallel()
	rcv, url := otlptest.NewHTTP(t)
	const token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
	red := redact.New(redact.Config{Environ: []string{"MY_API_KEY=hunter2-very-secret-value"}})
	tr := telemetry.New(context.Background(), telemetry.Config{Getenv: env{"OTEL_EXPORTER_OTLP_ENDPOINT": url}.get})
	job := tr.StartJob(runner.JobSpan{JobID: "job-1", Workflow: "wf hunter2-very-secret-value", Redact: red.String})
	item := job.Start(runner.SpanStart{Kind: runner.SpanItem, ItemID: "id " + token, ItemLabel: "label hunter2-very-secret-value"})
	step := item.Start(runner.SpanStart{Kind: runner.SpanStep, Step: "step hunter2-very-secret-value", StepKind: "claude", Model: token})
	step.End(runner.SpanEnd{Outcome: "failed", Claude: true, Models: []string{"m " + token},
		Error: &runner.SpanError{Type: "CommandFailed", Message: "401 for hunter2-very-secret-value and " + token, Signature: "CommandFailed::401 for hunter2-very-secret-value"}})
	item.End(runner.SpanEnd{Outcome: "dlq", Error: &runner.SpanError{Type: "x " + token, Message: strings.Repeat("long ", 2000) + token}})
	job.End(runner.SpanEnd{Outcome: "completed"})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, spans, raw := rcv.Snapshot()
	if n == 0 || len(spans) != 3 {
		t.Fatalf("%d request(s), %d span(s)", n, len(spans))
	}
	redacttest.AssertNoSecrets(t, "OTLP requests", string(raw), "hunter2-very-secret-value", token, "hunter2")
	tt := tree{t: t, spans: spans}
	s := tt.one("invoke_agent claude-code", "", nil)
	if msg := s.GetStatus().GetMessage(); msg != "401 for "+redact.Mask+" and "+redact.Mask {
		t.Errorf("status message = %q", msg)
	}
	if sig := attr(s, "prodigy.error.signature"); sig != "CommandFailed::401 for "+redact.Mask {
		t.Errorf("signature = %v", sig)
	}
}

// closedPort is the URL of a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func TestRateLimitedAttemptIsItsOwnSpan(t *testing.T) {
	t.Parallel()
	rcv, url := otlptest.NewHTTP(t)
	dir := t.TempDir()
	// The first call is rate-limited (api_retry 429, error result); the
	// second succeeds.
	claude := filepath.Join(dir, "claude")
	script := `#!/usr/bin/env bash
n=$(( $(cat "` + dir + `/calls" 2>/dev/null || echo 0) + 1 )); echo $n > "` + dir + `/calls"
if [ $n = 1 ]; then
  echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":2000,"error_status":429,"error":"rate_limit"}'
  echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429 rate_limit","total_cost_usd":0.01}'
  exit 1
fi
echo x > x.txt && git add x.txt && git commit -qm x
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.2,"modelUsage":{"m":{"inputTokens":5,"outputTokens":6}}}'
`
	if err := os.WriteFile(claude, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	j, res, err := runJob(t, map[string]string{"items.json": `[{"name": "a"}]`}, `
name: limited
map:
  input: items.json
  agent_template:
    - claude: "/fix ${item.name}"
  retry_config:
    attempts: 1
`, env{"OTEL_EXPORTER_OTLP_ENDPOINT": url}, env{}, claude)
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v\n%s", err, j.stderr)
	}
	_, spans, _ := rcv.Snapshot()
	tr := tree{t: t, spans: spans}
	item := tr.one("item", "", nil)
	attempts := tr.children(item, "attempt")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2:%s", len(attempts), tr)
	}
	// The wait does not count: both runs are attempt 1.
	wantAttrs(t, attempts[0], map[string]any{"prodigy.attempt": int64(1), "prodigy.outcome": "rate_limited", "prodigy.cost_usd": 0.01})
	wantAttrs(t, attempts[1], map[string]any{"prodigy.attempt": int64(1), "prodigy.outcome": "succeeded", "prodigy.cost_usd": 0.2})
	wantAttrs(t, item, map[string]any{"prodigy.outcome": "merged", "prodigy.attempts": int64(1)})
	if c, _ := attr(item, "prodigy.cost_usd").(float64); math.Abs(c-0.21) > 1e-9 {
		t.Errorf("item cost = %v, want 0.21 (both runs)", c)
	}
}

// A collector that refuses (403) or is throttling or failing (429, 502,
// with Retry-After) is a warning naming it, never a failure of the job;
// the exporter did try it, and the exit waits at most the flush bound.
func TestCollectorErrorsAreWarnings(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusForbidden, http.StatusTooManyRequests, http.StatusBadGateway} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Retry-After", "1")
				http.Error(w, http.StatusText(status), status)
			}))
			defer srv.Close()
			vars := env{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}
			j, res, err := runJob(t, map[string]string{"items.json": `[{"name": "a"}]`}, oneItemWorkflow, vars, env{}, "")
			if err != nil || res.Successful != 1 || res.Status != runner.StatusCompleted {
				t.Fatalf("run with a collector answering %d: %v %+v\n%s", status, err, res, j.stderr)
			}
			if calls.Load() == 0 {
				t.Fatalf("the exporter never called the collector")
			}
			// Refused: the export fails at once. Throttled or failing: the
			// exporter retries until the bounded flush at exit gives up.
			w := j.warnings.String()
			if !strings.Contains(w, "tracing: could not export spans to "+srv.URL+"/v1/traces (the job continues)") &&
				!strings.Contains(w, "tracing: could not flush the spans to "+srv.URL+"/v1/traces within") {
				t.Errorf("warnings = %q", w)
			}
		})
	}
}
