package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/telemetry"
	"github.com/prodigy-action/prodigy-action/telemetry/otlptest"
)

type env map[string]string

func (e env) get(k string) string { return e[k] }

func (e env) environ() []string {
	out := os.Environ()
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// job is a real job run: a git repository, a workflow and the state.
type job struct {
	t        *testing.T
	repo     string
	home     string
	warnings *lines
	stderr   *lines
}

// lines collects warnings or log output; safe for concurrent use.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }
func (l *lines) Write(p []byte) (int, error) {
	l.add(string(p))
	return len(p), nil
}
func (l *lines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.l, "") }

// runJob runs workflow yaml over files in a new repository with tracing
// configured by vars (telemetry.New), child processes seeing childEnv,
// and flushes the spans before returning.
func runJob(t *testing.T, files map[string]string, yaml string, vars env, childEnv env, claude string, claudeArgs ...string) (*job, *runner.Result, error) {
	t.Helper()
	j := &job{t: t, repo: gitopstest.Repo(t, files), home: filepath.Join(t.TempDir(), "home"), warnings: &lines{}, stderr: &lines{}}
	path := filepath.Join(t.TempDir(), "workflow.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tr := telemetry.New(ctx, telemetry.Config{Getenv: vars.get, Warn: j.warnings.add})
	eng := &runner.Engine{
		Home:   j.home,
		Stderr: j.stderr, Clock: retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), Rand: func() float64 { return 0.5 },
		Getenv: func(string) string { return "" }, Environ: childEnv.environ(),
		ClaudeCommand: claude, ClaudeArgs: claudeArgs, Tracer: tr.Tracer(),
	}
	res, runErr := eng.Run(ctx, runner.RunSpec{Workflow: wf, RepoDir: j.repo, JobID: "job-1"})
	if err := tr.Shutdown(ctx); err != nil {
		t.Logf("shutdown: %v", err)
	}
	return j, res, runErr
}

// events reads the job's events.jsonl as event objects.
func (j *job) events() []map[string]any {
	j.t.Helper()
	data, err := os.ReadFile(filepath.Join(j.home, "events", filepath.Base(j.repo), "job-1", "events.jsonl"))
	if err != nil {
		j.t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			j.t.Fatal(err)
		}
		out = append(out, rec.Event)
	}
	return out
}

// standInClaude writes a stand-in `claude`: it commits a file named after
// the prompt's last word and emits a stream-json transcript whose result
// costs cost dollars with the given usage of model.
func standInClaude(t *testing.T, cost string, model string, in, out int) string {
	t.Helper()
	script := fmt.Sprintf(`#!/usr/bin/env bash
prompt="${@: -1}"
name="${prompt##* }"
echo '{"type":"system","subtype":"init","session_id":"s","model":"%[2]s"}'
echo "$name" > "claude-$name.txt" && git add "claude-$name.txt" && git commit -qm "claude: $name"
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"done"}]},"session_id":"s"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":2,"total_cost_usd":%[1]s,"usage":{"input_tokens":%[3]d,"output_tokens":%[4]d},"modelUsage":{"%[2]s":{"inputTokens":%[3]d,"outputTokens":%[4]d,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":%[1]s}}}'
`, cost, model, in, out)
	path := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// tree indexes received spans.
type tree struct {
	t     *testing.T
	spans []*tracepb.Span
}

func (tr tree) id(b []byte) string { return hex.EncodeToString(b) }

// named returns the spans called name.
func (tr tree) named(name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range tr.spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only span called name with attribute key=value ("" key: any).
func (tr tree) one(name, key string, value any) *tracepb.Span {
	tr.t.Helper()
	var found []*tracepb.Span
	for _, s := range tr.named(name) {
		if key == "" || attr(s, key) == value {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		tr.t.Fatalf("%d span(s) %q with %s=%v, want 1; spans: %s", len(found), name, key, value, tr)
	}
	return found[0]
}

// children returns the spans whose parent is p, in start order.
func (tr tree) children(p *tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range tr.spans {
		if bytes.Equal(s.GetParentSpanId(), p.GetSpanId()) && (name == "" || s.GetName() == name) {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k].GetStartTimeUnixNano() < out[k-1].GetStartTimeUnixNano(); k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

func (tr tree) String() string {
	var b strings.Builder
	for _, s := range tr.spans {
		fmt.Fprintf(&b, "\n  %s %s parent=%s", s.GetName(), tr.id(s.GetSpanId()), tr.id(s.GetParentSpanId()))
		for _, kv := range s.GetAttributes() {
			fmt.Fprintf(&b, " %s=%v", kv.GetKey(), otlptest.Plain(kv.GetValue()))
		}
	}
	return b.String()
}

// attr is a span attribute's value (string, int64, float64, bool), nil
// when absent.
func attr(s *tracepb.Span, key string) any { return otlptest.Attr(s, key) }

// wantAttrs checks attributes of s.
func wantAttrs(t *testing.T, s *tracepb.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("span %s: %s = %#v, want %#v", s.GetName(), k, got, v)
		}
	}
}
