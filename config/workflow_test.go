package config_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
)

func load(t *testing.T, name string) *config.Workflow {
	t.Helper()
	w, err := config.Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return w
}

func TestFullWorkflow(t *testing.T) {
	t.Parallel()
	w := load(t, "full.yml")
	if w.Name != "everything" || w.Mode != "mapreduce" || w.Path != filepath.Join("testdata", "full.yml") {
		t.Errorf("name/mode/path = %q/%q/%q", w.Name, w.Mode, w.Path)
	}
	if want := map[string]string{"GREETING": "hello", "RETRIES": "2", "DEBUG": "false"}; !reflect.DeepEqual(w.Env, want) {
		t.Errorf("env = %v, want %v", w.Env, want)
	}
	if !w.PreserveFailedWorktrees {
		t.Error("map.preserve_failed_worktrees: true was lost")
	}
	if len(w.Setup) != 2 {
		t.Fatalf("setup has %d steps, want 2", len(w.Setup))
	}
	s0 := w.Setup[0]
	if s0.Name != "make items" || s0.Timeout != 300*time.Second || s0.CaptureOutput != "shell.output" ||
		!strings.HasPrefix(s0.Shell, "echo '[") || s0.Pos.Line != 10 {
		t.Errorf("setup[0] = %+v", s0)
	}
	wf := w.Setup[1].WriteFile
	if wf == nil || wf.Path != "notes/README.md" || wf.Content != "generated" || wf.Mode != 0o644 || !wf.CreateDirs {
		t.Errorf("setup[1].write_file = %+v", wf)
	}
	m := w.Map
	if m.Input != "items.json" || m.JSONPath != "$[*]" || m.Filter != "id >= 1" || m.SortBy != "id DESC" ||
		m.Distinct != "id" || m.Offset != 0 || m.MaxItems != 50 || m.MaxParallel != "4" ||
		m.AgentTimeout != 900*time.Second || m.Pos.Line != 20 || m.Pos.Col != 1 {
		t.Errorf("map = %+v", m)
	}
	if len(m.AgentTemplate) != 3 {
		t.Fatalf("agent_template has %d steps", len(m.AgentTemplate))
	}
	a0, a1, a2 := m.AgentTemplate[0], m.AgentTemplate[1], m.AgentTemplate[2]
	if a0.Claude != "/process '${item}'" || !a0.CommitRequired || a0.Timeout != 10*time.Minute || a0.Env["MODE"] != "strict" {
		t.Errorf("agent_template[0] = %+v", a0)
	}
	if a1.Shell != "make test" || a1.CaptureOutput != "test_log" || a1.Retry == nil ||
		a1.Retry.Attempts != 3 || !reflect.DeepEqual(a1.Retry.Backoff.Delays, []time.Duration{100 * ms, 200 * ms}) {
		t.Errorf("agent_template[1] = %+v (retry %+v)", a1, a1.Retry)
	}
	if len(a1.OnFailure) != 2 || a1.OnFailure[0].Shell != "make clean" ||
		a1.OnFailure[1].Claude != "/fix-tests '${test_log}'" || a1.OnFailure[1].Timeout != 120*time.Second {
		t.Errorf("agent_template[1].on_failure = %+v", a1.OnFailure)
	}
	if a2.WriteFile == nil || a2.WriteFile.Mode != 0o755 || a2.WriteFile.Content != "done ${item_id}\n" {
		t.Errorf("agent_template[2] = %+v", a2.WriteFile)
	}
	p := w.ErrorPolicy
	if p.OnItemFailure != "custom" || len(p.CustomHandler) != 2 || p.CustomHandler[1].Claude != "/triage-failure" ||
		!p.ContinueOnFailure || p.Retry != nil {
		t.Errorf("error policy = %+v", p)
	}
	if len(w.Reduce) != 1 || len(w.Reduce[0].OnFailure) != 1 || w.Reduce[0].OnFailure[0].Claude != "/summarise-failures" {
		t.Errorf("reduce = %+v", w.Reduce)
	}
	if len(w.Warnings) != 0 {
		t.Errorf("warnings = %q", w.Warnings)
	}
}

func TestTopLevelErrorPolicy(t *testing.T) {
	t.Parallel()
	w := load(t, "top-level-error-policy.yml")
	p := w.ErrorPolicy
	want := retryDefaults(func(c *config.RetryConfig) {
		c.Attempts = 4
		c.Backoff = config.BackoffConfig{Kind: "linear", Increment: 500 * ms}
		c.InitialDelay = 250 * ms
		c.MaxDelay = time.Minute
		c.RetryOn = []config.MatcherConfig{{Kind: "network"}, {Kind: "timeout"}, {Kind: "server_error"},
			{Kind: "rate_limit"}, {Kind: "pattern", Pattern: `(?i)flaky test \d+`}}
		c.RetryBudget = 2 * time.Minute
	})
	if !reflect.DeepEqual(p.Retry, want) {
		t.Errorf("retry\n got %+v\nwant %+v", p.Retry, want)
	}
	if p.OnItemFailure != "dlq" || !p.ContinueOnFailure || p.MaxFailures != 5 || p.FailureThreshold != 0.25 {
		t.Errorf("policy = %+v", p)
	}
	if w.Map.MaxParallel != "${MAX_PARALLEL}" || w.Map.AgentTimeout != 10*time.Minute {
		t.Errorf("map = %+v", w.Map)
	}
	if n, err := w.ResolveMaxParallel(nil); err != nil || n != 3 {
		t.Errorf("ResolveMaxParallel = %d, %v; want 3 from the workflow env", n, err)
	}
}

func TestPrecedenceMapBeatsTop(t *testing.T) {
	t.Parallel()
	p := load(t, "precedence.yml").ErrorPolicy
	if p.OnItemFailure != "stop" {
		t.Errorf("on_item_failure = %q, want map-level stop", p.OnItemFailure)
	}
	if p.MaxFailures != 9 || p.ContinueOnFailure {
		t.Errorf("top-level max_failures/continue_on_failure lost: %+v", p)
	}
	if p.Retry == nil || p.Retry.Attempts != 2 || p.Retry.Backoff.Kind != "fixed" || p.Retry.InitialDelay != 3*s {
		t.Errorf("retry = %+v, want the map-level block", p.Retry)
	}
}

func TestLegacyCommandsForm(t *testing.T) {
	t.Parallel()
	w := load(t, "legacy-commands.yml")
	if len(w.Setup) != 1 || len(w.Map.AgentTemplate) != 1 || len(w.Reduce) != 1 || w.Map.AgentTemplate[0].Shell != "echo ${item}" {
		t.Fatalf("steps = %+v / %+v / %+v", w.Setup, w.Map.AgentTemplate, w.Reduce)
	}
	if len(w.Warnings) != 3 {
		t.Fatalf("warnings = %q, want one deprecation per block", w.Warnings)
	}
	if !strings.HasPrefix(w.Warnings[0], "testdata/legacy-commands.yml:4:3: setup: the {commands: [...]} form is deprecated") {
		t.Errorf("warning = %q", w.Warnings[0])
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	w := load(t, "anchors.yml")
	base := retryDefaults(func(c *config.RetryConfig) {
		c.Attempts = 4
		c.Backoff = config.BackoffConfig{Kind: "fibonacci"}
		c.InitialDelay = 2 * s
	})
	if !reflect.DeepEqual(w.ErrorPolicy.Retry, base) {
		t.Errorf("map retry = %+v", w.ErrorPolicy.Retry)
	}
	merged := *base
	merged.MaxDelay = 5 * s
	if got := w.Map.AgentTemplate[0].Retry; !reflect.DeepEqual(got, &merged) {
		t.Errorf("merged retry = %+v, want %+v", got, merged)
	}
	if got := w.Map.AgentTemplate[1].Retry; !reflect.DeepEqual(got, base) {
		t.Errorf("aliased retry = %+v", got)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	w, err := config.Parse("dir/minimal.yaml", []byte("map:\n  input: items.json\n  agent_template:\n    - shell: 'true'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "minimal" || w.Mode != "mapreduce" || w.Map.MaxParallel != "10" {
		t.Errorf("defaults: name %q mode %q max_parallel %q", w.Name, w.Mode, w.Map.MaxParallel)
	}
	want := config.ErrorPolicy{OnItemFailure: "dlq", ContinueOnFailure: true, CircuitBreaker: config.DefaultCircuitBreaker}
	if !reflect.DeepEqual(w.ErrorPolicy, want) {
		t.Errorf("error policy = %+v, want %+v", w.ErrorPolicy, want)
	}
	d := config.DefaultRetryConfig()
	if d.Attempts != 3 || d.InitialDelay != s || d.MaxDelay != 30*s || d.Jitter || d.JitterFactor != 0.3 ||
		d.Backoff.Kind != "exponential" || d.Backoff.Base != 2 || d.RetryOn != nil || d.RetryBudget != 0 {
		t.Errorf("DefaultRetryConfig = %+v", d)
	}
}

func TestStepForms(t *testing.T) {
	t.Parallel()
	const src = `
map:
  input: x
  agent_template:
    - shell: a
      on_failure: "/fix"
    - shell: b
      on_failure: {shell: "cleanup", timeout: 5}
    - shell: c
      on_failure: [retry-it, "/ask"]
    - shell: d
      capture_output: false
      timeout: "1m30s"
`
	w, err := config.Parse("steps.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	at := w.Map.AgentTemplate
	if at[0].OnFailure[0].Claude != "/fix" || at[0].OnFailure[0].Shell != "" {
		t.Errorf("string starting with / must be a claude step: %+v", at[0].OnFailure)
	}
	if at[1].OnFailure[0].Shell != "cleanup" || at[1].OnFailure[0].Timeout != 5*s {
		t.Errorf("mapping on_failure: %+v", at[1].OnFailure)
	}
	if len(at[2].OnFailure) != 2 || at[2].OnFailure[0].Shell != "retry-it" || at[2].OnFailure[1].Claude != "/ask" {
		t.Errorf("list on_failure: %+v", at[2].OnFailure)
	}
	if at[3].CaptureOutput != "" || at[3].Timeout != 90*s {
		t.Errorf("step d: %+v", at[3])
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		step config.Step
		want string
	}{
		{config.Step{Shell: "cargo test"}, "shell: cargo test"},
		{config.Step{Claude: "/process 'x'"}, "claude: /process 'x'"},
		{config.Step{WriteFile: &config.WriteFile{Path: "out.txt"}}, "write_file: out.txt"},
		{config.Step{Shell: "set -e\nmake\n"}, "shell: set -e …"},
		{config.Step{Shell: strings.Repeat("x", 300)}, "shell: " + strings.Repeat("x", 200) + "…"},
		{config.Step{}, "empty step"},
	}
	for _, tt := range tests {
		t.Run(tt.want[:min(len(tt.want), 20)], func(t *testing.T) {
			t.Parallel()
			if got := tt.step.Describe(); got != tt.want {
				t.Errorf("Describe() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResolveMaxParallel(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FROM_PROCESS": "6", "BAD": "many", "ZERO": "0"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name    string
		raw     string
		wfEnv   map[string]string
		want    int
		wantErr string
	}{
		{"default", "", nil, 10, ""},
		{"number", "4", nil, 4, ""},
		{"braced from workflow env first", "${FROM_PROCESS}", map[string]string{"FROM_PROCESS": "2"}, 2, ""},
		{"bare from process env", "$FROM_PROCESS", nil, 6, ""},
		{"unset", "${NOPE}", nil, 0, "${NOPE} is not set"},
		{"not a number", "${BAD}", nil, 0, `got "many" (from environment variable BAD)`},
		{"zero", "$ZERO", nil, 0, "must be a whole number >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &config.Workflow{Env: tt.wfEnv, Map: config.MapPhase{MaxParallel: tt.raw,
				Pos: config.Position{File: "wf.yml", Line: 3, Col: 1}}}
			got, err := w.ResolveMaxParallel(getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "wf.yml:3:1: map.max_parallel:") {
					t.Fatalf("err = %v, want it to mention %q with the position", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"500ms": 500 * ms, "2s": 2 * s, "2m": 2 * time.Minute,
		"1h30m": 90 * time.Minute, "100ms": 100 * ms, "1.5s": 1500 * ms, "0": 0}
	for in, want := range good {
		if got, err := config.ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1 second", "2 minutes", "500", "-1s", "1h 30m", "", "1d", "s"} {
		_, err := config.ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), "e.g. 500ms, 2s, 2m, 1h30m") {
			t.Errorf("ParseDuration(%q) err = %v, want an error listing the accepted forms", in, err)
		}
	}
}
