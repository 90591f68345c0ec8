package jobcmd_test

// Tests with the real Claude Code binary (npm, the version in
// .ci/claude-code-version; .ci/test fetches it and sets PRODIGY_REAL_CLAUDE)
// against a local, scripted Messages API (internal/fakeanthropic). The
// workflows use plain `claude:` steps: no wrapper, no extra flags.

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/internal/fakeanthropic"
	"github.com/prodigy-action/prodigy-action/internal/permtest"
)

// realClaude is the path of the real Claude Code binary; the test is
// skipped without it, and fails under CI.
func realClaude(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PRODIGY_REAL_CLAUDE")
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PRODIGY_REAL_CLAUDE is not set: .ci/test fetches the pinned Claude Code with .ci/claude-code")
		}
		t.Skip("PRODIGY_REAL_CLAUDE is not set (bash .ci/claude-code fetches the pinned binary and prints its path)")
	}
	return p
}

// fakeAPI starts a scripted Messages API for one test.
func fakeAPI(t *testing.T, script ...fakeanthropic.Turn) *fakeanthropic.Server {
	t.Helper()
	s, err := fakeanthropic.New(script...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runReal runs the CLI in-process with the real Claude Code pointed at srv:
// a minimal environment with a private HOME for Claude Code.
func runReal(t *testing.T, home string, srv *fakeanthropic.Server, args ...string) (int, string, string) {
	t.Helper()
	claude := realClaude(t)
	claudeHome := t.TempDir()
	environ := append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + claudeHome, "LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com",
	}, srv.Env()...)
	return clitest.Run{Home: home, Claude: claude, Setup: func(f *cmdutil.Factory) { f.Engine.Environ = environ }}.Exec(args...)
}

// resultEvents reads the result events of every transcript under home's
// logs directory.
func resultEvents(t *testing.T, home string) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := filepath.WalkDir(filepath.Join(home, "logs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["type"] == "result" {
				out = append(out, ev)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type realRun struct {
	Status     string  `json:"status"`
	CostUSD    float64 `json:"cost_usd"`
	Successful int     `json:"successful"`
	DLQCount   int     `json:"dlq_count"`
	Pending    int     `json:"pending"`
	Branch     string  `json:"results_branch"`
	Items      []struct {
		ItemID    string  `json:"item_id"`
		State     string  `json:"state"`
		Attempts  int     `json:"attempts"`
		Error     string  `json:"error"`
		ErrorType string  `json:"error_type"`
		Commits   int     `json:"commits"`
		CostUSD   float64 `json:"cost_usd"`
		Tokens    *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"tokens"`
	} `json:"items"`
}

func decodeRealRun(t *testing.T, out, errOut string) realRun {
	t.Helper()
	var r realRun
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decode --json %q: %v\nstderr:\n%s", out, err, errOut)
	}
	return r
}

func TestRealClaudeEditsCommitsAndMerges(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	home := t.TempDir()
	srv := fakeAPI(t,
		fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Write", Input: map[string]any{"file_path": "{{cwd}}/greeting.txt", "content": "hello from claude\n"}}},
		fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{"command": "git add greeting.txt && git commit -q -m 'claude: greeting'", "description": "commit the greeting"}}},
		fakeanthropic.Turn{Text: "Committed greeting.txt."},
	)
	wf := clitest.Workflow(t, `
name: real-claude
map:
  input: items.json
  agent_template:
    - claude: "Write a greeting for ${item.name} and commit it"
      commit_required: true
`)
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.Status != "completed" || r.Successful != 1 || len(r.Items) != 1 || r.Items[0].State != "merged" || r.Items[0].Commits != 1 {
		t.Fatalf("exit %d, result %+v\nstderr:\n%s\nrequests: %+v", code, r, errOut, srv.Requests())
	}
	if got := gitopstest.Out(t, repo, "show", r.Branch+":greeting.txt"); got != "hello from claude" {
		t.Fatalf("results branch greeting.txt = %q", got)
	}
	if !strings.Contains(gitopstest.Out(t, repo, "log", "--format=%s", r.Branch), "claude: greeting") {
		t.Fatal("the agent's commit is not on the results branch")
	}
	// What we record equals what the result event says.
	evs := resultEvents(t, home)
	if len(evs) != 1 {
		t.Fatalf("want 1 result event, got %d", len(evs))
	}
	cost := evs[0]["total_cost_usd"].(float64)
	if cost <= 0 || math.Abs(r.CostUSD-cost) > 1e-9 || math.Abs(r.Items[0].CostUSD-cost) > 1e-9 {
		t.Fatalf("recorded cost job %v item %v, result event %v", r.CostUSD, r.Items[0].CostUSD, cost)
	}
	var in, outTok float64
	for _, mu := range evs[0]["modelUsage"].(map[string]any) {
		in += mu.(map[string]any)["inputTokens"].(float64)
		outTok += mu.(map[string]any)["outputTokens"].(float64)
	}
	if tk := r.Items[0].Tokens; tk == nil || float64(tk.Input) != in || float64(tk.Output) != outTok {
		t.Fatalf("recorded tokens %+v, result event modelUsage in %v out %v", tk, in, outTok)
	}
	if dn := evs[0]["permission_denials"].([]any); len(dn) != 0 {
		t.Fatalf("denials with the default settings: %v", dn)
	}
}

func TestRealClaudeDeniedToolFailsTheAttempt(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	home := t.TempDir()
	srv := fakeAPI(t,
		fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{"command": "git commit --allow-empty -q -m nope", "description": "commit"}}},
		fakeanthropic.Turn{Text: "I could not commit."},
	)
	// Bash is not granted: only edits.
	wf := clitest.Workflow(t, `
name: real-claude-denied
claude:
  allowed_tools: []
map:
  input: items.json
  agent_template:
    - claude: "Commit for ${item.name}"
  retry_config:
    attempts: 3
`)
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.DLQCount != 1 || len(r.Items) != 1 {
		t.Fatalf("exit %d, result %+v\nstderr:\n%s", code, r, errOut)
	}
	it := r.Items[0]
	for _, want := range []string{"denied 1 tool call(s)", "Bash (git commit --allow-empty -q -m nope)", "allowed_tools"} {
		if !strings.Contains(it.Error, want) {
			t.Errorf("error %q lacks %q", it.Error, want)
		}
	}
	if it.ErrorType != "ValidationFailed" || it.Attempts != 1 {
		t.Fatalf("a denial is permanent: type %s, attempts %d (want ValidationFailed, 1)", it.ErrorType, it.Attempts)
	}
	rec := readRecord(t, home, filepath.Base(repo), jobIDOf(t, home, repo), "item_0")
	if rec.WorktreeArtifacts == nil || rec.WorktreeArtifacts.ErrorLogs == nil || !strings.Contains(*rec.WorktreeArtifacts.ErrorLogs, "permission_denials") {
		t.Fatalf("the DLQ record's error_logs lack the denials: %+v", rec.WorktreeArtifacts)
	}
	// The same workflow with on_permission_denial: ignore succeeds.
	home2 := t.TempDir()
	srv2 := fakeAPI(t, fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "x"}}})
	wf2 := clitest.Workflow(t, `
name: real-claude-ignore
claude:
  allowed_tools: []
  on_permission_denial: ignore
map:
  input: items.json
  agent_template:
    - claude: "Commit for ${item.name}"
`)
	code, out, errOut = runReal(t, home2, srv2, "run", wf2, "--repo", repo, "--json")
	if r := decodeRealRun(t, out, errOut); code != 0 || r.Successful != 1 {
		t.Fatalf("with ignore: exit %d, %+v\n%s", code, r, errOut)
	}
}

func TestRealClaudeMaxTurnsIsItsOwnError(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	home := t.TempDir()
	ls := fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{"command": "ls", "description": "list"}}}
	srv := fakeAPI(t, ls, ls, ls, ls)
	wf := clitest.Workflow(t, `
name: real-claude-turns
map:
  input: items.json
  agent_template:
    - claude: "Look around for ${item.name}"
`)
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json", "--claude-max-turns", "1")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.DLQCount != 1 {
		t.Fatalf("exit %d, result %+v\nstderr:\n%s", code, r, errOut)
	}
	it := r.Items[0]
	// Claude's own words (errors[]) and the terminal reason reach the record.
	for _, want := range []string{"turn limit", "Reached maximum number of turns (1)", "max_turns"} {
		if !strings.Contains(it.Error, want) {
			t.Errorf("error %q lacks %q", it.Error, want)
		}
	}
	if it.ErrorType != "ResourceExhausted" {
		t.Fatalf("error type %s, want ResourceExhausted", it.ErrorType)
	}
}

func TestRealClaudeProviderErrors(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	wf := clitest.Workflow(t, `
name: real-claude-busy
map:
  input: items.json
  agent_template:
    - claude: "Say hello to ${item.name}"
`)
	t.Run("429 with a short retry-after: Claude Code retries by itself", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		srv := fakeAPI(t, fakeanthropic.Turn{Status: 429, Header: map[string]string{"retry-after": "1"}}, fakeanthropic.Turn{Text: "hello"})
		code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
		r := decodeRealRun(t, out, errOut)
		if code != 0 || r.Successful != 1 || r.Items[0].Attempts != 1 {
			t.Fatalf("exit %d, %+v\n%s", code, r, errOut)
		}
	})
	t.Run("529 until Claude Code gives up: a fleet cool-down, not an attempt", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		// Measured with 2.1.330: three 529s in a row end the run
		// ("Repeated 529 Overloaded errors", api_error_status 529, exit 1).
		srv := fakeAPI(t, fakeanthropic.Turn{Status: 529, Header: map[string]string{"retry-after": "0"}, Repeat: 2}, fakeanthropic.Turn{Text: "hello"})
		code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
		r := decodeRealRun(t, out, errOut)
		if code != 0 || r.Successful != 1 || r.Items[0].Attempts != 1 {
			t.Fatalf("exit %d, %+v\n%s", code, r, errOut)
		}
		if !strings.Contains(errOut, "rate-limited (claude: overloaded)") {
			t.Fatalf("no cool-down for the overload:\n%s", errOut)
		}
	})
}

func TestRealClaudeHonoursTheItemBudget(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	home := t.TempDir()
	// One call of 200,000 input tokens costs about $1 at the default
	// model's price: more than the item's $0.25.
	big := fakeanthropic.Usage{InputTokens: 200000, OutputTokens: 10}
	ls := fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{"command": "ls", "description": "list"}}, Usage: big}
	srv := fakeAPI(t, ls, ls, ls, fakeanthropic.Turn{Text: "done"})
	wf := clitest.Workflow(t, `
name: real-claude-budget
budget:
  item_max_cost_usd: 0.25
map:
  input: items.json
  agent_template:
    - claude: "Spend for ${item.name}"
  retry_config:
    attempts: 3
`)
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.DLQCount != 1 {
		t.Fatalf("exit %d, %+v\n%s", code, r, errOut)
	}
	evs := resultEvents(t, home)
	if len(evs) != 1 || evs[0]["subtype"] != "error_max_budget_usd" {
		t.Fatalf("want one run stopped by --max-budget-usd, got %d results: %v", len(evs), evs)
	}
	cost := evs[0]["total_cost_usd"].(float64)
	it := r.Items[0]
	if it.ErrorType != "ResourceExhausted" || it.Attempts != 1 || math.Abs(it.CostUSD-cost) > 1e-9 {
		t.Fatalf("item %+v; the run cost %v (one call past the cap is Claude Code's granularity)", it, cost)
	}
	if n := len(srv.Requests()); n > 2 {
		t.Fatalf("Claude Code went on after its budget: %d requests", n)
	}
}

func TestRealClaudePromptIsNeverAnOption(t *testing.T) {
	t.Parallel()
	// Item data that looks like a Claude Code option reaches the model as
	// the prompt: an option would print the version and no result.
	repo := cliRepo(t, map[string]string{"items.json": `[{"p": "--version"}, {"p": "--dangerously-skip-permissions"}]`})
	home := t.TempDir()
	srv := fakeAPI(t, fakeanthropic.Turn{Text: "ok"})
	wf := clitest.Workflow(t, `
name: real-claude-dash
map:
  input: items.json
  agent_template:
    - claude: "${item.p}"
`)
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.Successful != 2 {
		t.Fatalf("exit %d, %+v\n%s", code, r, errOut)
	}
	if srv.Conversations() != 2 {
		t.Fatalf("want both prompts sent to the model, got %d conversations", srv.Conversations())
	}
}

// jobIDOf is the id of the one job of repo under home.
func jobIDOf(t *testing.T, home, repo string) string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(home, "state", filepath.Base(repo), "jobs"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("jobs of %s: %v %v", repo, dirs, err)
	}
	return dirs[0].Name()
}

// TestValidatePrintsEachClaudeCommandLine: validate shows the command line
// every claude step runs (workflow block, step options, flags resolved;
// secrets redacted), in text and in --json.
func TestValidatePrintsEachClaudeCommandLine(t *testing.T) {
	t.Parallel()
	wf := clitest.Workflow(t, `
name: claude-lines
claude:
  model: sonnet
  max_turns: 20
setup:
  - claude: "/prepare"
map:
  input: items.json
  agent_template:
    - claude: "fix ${item.path}"
      claude_options:
        allowed_tools: ["Bash(git:*)", "Bash(go test:*)"]
        args: ["--append-system-prompt", "use ghp_abcdefghijklmnopqrstuvwxyz0123456789"]
`)
	code, out, errOut := runCLI(t, t.TempDir(), "validate", wf, "--claude-permission-mode", "plan")
	if code != 0 {
		t.Fatalf("validate: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"claude step (setup, " + wf + ":7:5): claude --model sonnet --permission-mode plan --allowedTools Bash --max-turns 20 --print --output-format stream-json --verbose -- '<prompt>'",
		"--allowedTools 'Bash(git:*),Bash(go test:*)' --max-turns 20 --append-system-prompt 'use ***'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "ghp_") {
		t.Error("a token reached validate's output")
	}
	code, out, _ = runCLI(t, t.TempDir(), "validate", wf, "--json")
	var v struct {
		ClaudeSteps []struct {
			Where   string   `json:"where"`
			Command []string `json:"command"`
		} `json:"claude_steps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.ClaudeSteps) != 2 || v.ClaudeSteps[1].Where != "map" ||
		!strings.Contains(strings.Join(v.ClaudeSteps[1].Command, " "), "--permission-mode acceptEdits") {
		t.Fatalf("validate --json claude_steps: exit %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, t.TempDir(), "validate", wf, "--claude-permission-mode", "yolo"); code != 2 || !strings.Contains(errOut, "unknown Claude permission mode") {
		t.Fatalf("a bad --claude-permission-mode: exit %d\n%s", code, errOut)
	}
}

// TestRealClaudeStormAndOverload: the real Claude Code against a Messages
// API that (a) rejects every request (400 invalid_request_error: a bad
// model name or prompt in the workflow) — a failure storm: the breaker
// stops after 10 items with one signature and the rest are never started
// (a 401 is no use here: Claude Code 2.1.330 keeps retrying it for
// minutes) — and (b) answers 529 on every call, longer than Claude Code's
// own retries — an overload, held in the fleet cool-down and never
// counted by the breaker, so every item is tried.
func TestRealClaudeStormAndOverload(t *testing.T) {
	t.Parallel()
	realClaude(t)
	repo := cliRepo(t, map[string]string{"items.json": clitest.NumberedItems(12)})
	wf := clitest.Workflow(t, `
name: real-claude-storm
rate_limit:
  max_waits: 1
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - claude: "Say hello to ${item.n}"
`)
	t.Run("a request every call rejects is a storm", func(t *testing.T) {
		t.Parallel()
		srv := fakeAPI(t, fakeanthropic.Turn{Status: 400, Repeat: 1000})
		code, out, errOut := runReal(t, t.TempDir(), srv, "run", wf, "--repo", repo, "--json")
		var r stormResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("exit %d: %v\n%s", code, err, errOut)
		}
		if code != 3 || r.Status != "stopped_by_breaker" || r.Storm == nil || r.Failed > 11 || r.Pending < 1 {
			t.Fatalf("exit %d, %+v, want the breaker to stop the job with items never started\n%s", code, r, errOut)
		}
	})
	t.Run("an overload is not a storm", func(t *testing.T) {
		t.Parallel()
		srv := fakeAPI(t, fakeanthropic.Turn{Status: 529, Header: map[string]string{"retry-after": "0"}, Repeat: 1000})
		code, out, errOut := runReal(t, t.TempDir(), srv, "run", wf, "--repo", repo, "--json")
		var r stormResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("exit %d: %v\n%s", code, err, errOut)
		}
		if r.Storm != nil || r.Status == "stopped_by_breaker" || r.Pending != 0 || r.Failed != 12 {
			t.Fatalf("exit %d, %+v, want every item tried (the overload is no storm)\n%s", code, r, errOut)
		}
		if !strings.Contains(errOut, "rate-limited (claude: overloaded)") {
			t.Errorf("no fleet cool-down for the overload:\n%s", errOut)
		}
	})
}

// TestRealClaudeRunsAsItsOwnUser: with --agent-user (the engine as root)
// the real Claude Code runs as the agent's uid with a HOME of its own: its
// Write and Bash tools work in the worktree handed to it (the commit is
// merged), its Bash runs as that uid, and it cannot write the repository's
// git configuration.
func TestRealClaudeRunsAsItsOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("agents as another user need the engine to run as root (CI runs as root)")
	}
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "alpha"}]`})
	home := t.TempDir()
	permtest.OpenUp(t, repo, home)
	srv := fakeAPI(t,
		fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Write", Input: map[string]any{"file_path": "{{cwd}}/greeting.txt", "content": "hello\n"}}},
		fakeanthropic.Turn{Tool: &fakeanthropic.ToolUse{Name: "Bash", Input: map[string]any{
			"command":     `id -u > uid.txt; (echo '[x]' >> "$(dirname "$(cat .git/objects/info/alternates)")/config") 2>/dev/null && echo wrote > escaped.txt; git add -A && git commit -q -m 'claude: greeting'`,
			"description": "commit"}}},
		fakeanthropic.Turn{Text: "Committed."},
	)
	wf := clitest.Workflow(t, `
name: real-claude-own-user
map:
  input: items.json
  agent_template:
    - claude: "Write a greeting for ${item.name} and commit it"
      commit_required: true
`)
	config := gitopstest.Out(t, repo, "config", "--local", "--list")
	code, out, errOut := runReal(t, home, srv, "run", wf, "--repo", repo, "--json", "--agent-user", "70200-70209")
	r := decodeRealRun(t, out, errOut)
	if code != 0 || r.Status != "completed" || r.Successful != 1 || r.Items[0].Commits != 1 {
		t.Fatalf("exit %d, result %+v\nstderr:\n%s\nrequests: %+v", code, r, errOut, srv.Requests())
	}
	if got := gitopstest.Out(t, repo, "show", r.Branch+":uid.txt"); got != "70200" {
		t.Errorf("Claude's Bash ran as uid %q, want 70200", got)
	}
	if files := gitopstest.Out(t, repo, "ls-tree", "--name-only", r.Branch); strings.Contains(files, "escaped.txt") {
		t.Error("the agent wrote the repository's git configuration")
	}
	if got := gitopstest.Out(t, repo, "config", "--local", "--list"); got != config {
		t.Errorf("the repository's configuration changed:\n%s", got)
	}
}
