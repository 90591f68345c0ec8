package jobcmd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// TestOwnUntrackedWorkflowIsNoUncommittedChange: the workflow file a user
// just wrote into their repository (untracked) is read from the checkout
// as it is, so it alone is no reason to warn; another untracked file still
// is, and the warning does not list the workflow.
func TestOwnUntrackedWorkflowIsNoUncommittedChange(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"name":"alpha"}]`})
	wf := filepath.Join(repo, "workflow.yml")
	if err := os.WriteFile(wf, []byte(`name: own
map:
  input: items.json
  agent_template:
    - shell: "true"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "own1")
	if code != 0 || strings.Contains(errOut, "uncommitted") || strings.Contains(errOut, "WARN") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	// Relative to the repository, run from inside it, the same.
	t.Chdir(repo)
	code, _, errOut = runCLI(t, home, "run", "workflow.yml", "--job-id", "own2")
	if code != 0 || strings.Contains(errOut, "uncommitted") {
		t.Errorf("relative path: exit %d, stderr:\n%s", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, home, "run", wf, "--job-id", "own3")
	if code != 0 || !strings.Contains(errOut, "has 1 uncommitted change(s); agents start from HEAD and do not see them: Untracked: notes.txt\n") {
		t.Errorf("another untracked file: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestBudgetStopSuggestsWhatIsReallyNeeded: with small item budgets the
// stop message prints cents and below as they are ($0.0369, not $0.04)
// and suggests the spend so far plus the pending items' reservations
// (here 0.0369 + 2 × 0.02), not a dollar per item; resuming with exactly
// the suggestion finishes the job.
func TestBudgetStopSuggestsWhatIsReallyNeeded(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":"a"},{"n":"b"},{"n":"c"},{"n":"d"},{"n":"e"}]`})
	home, dir := t.TempDir(), t.TempDir()
	claude := filepath.Join(dir, "claude")
	if err := os.WriteFile(claude, []byte(`#!/usr/bin/env bash
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.0123,"modelUsage":{"m":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := clitest.Workflow(t, `name: small-budget
budget:
  max_cost_usd: 0.05
  item_max_cost_usd: 0.02
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - claude: "/do ${item.n}"
`)
	code, out, errOut := runCLIClaude(t, home, claude, "run", wf, "--repo", repo, "--job-id", "small")
	want := "spent $0.0369 of the $0.05 job budget; 2 item(s) left pending, never started; continue with `resume small --max-cost-usd 0.0769`"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("run: exit %d, stderr lacks %q:\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = runCLIClaude(t, home, claude, "resume", "small", "--max-cost-usd", "0.0769", "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.Status != "completed" || r.Successful != 5 {
		t.Errorf("resume with the suggestion: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestUnwritableStateDirectoryExitsTwo: a new run whose state directory
// cannot be written is an input error (exit 2) that says so, and leaves no
// branch or worktree in the repository. Root ignores file modes, so the
// directory is made unwritable by a file in its place (and, when not
// root, also by mode 0555).
func TestUnwritableStateDirectoryExitsTwo(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1}]`})
	wf := clitest.Workflow(t, `name: ro
map:
  input: items.json
  agent_template:
    - shell: "true"
`)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	homes := []string{filepath.Join(file, "home")}
	if os.Geteuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		homes = append(homes, ro)
	}
	for _, home := range homes {
		code, _, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "ro")
		if code != 2 || !strings.Contains(errOut, "the state directory "+home+" cannot be written (set PRODIGY_HOME to a writable directory)") {
			t.Errorf("%s: exit %d\n%s", home, code, errOut)
		}
		if b := gitopstest.Out(t, repo, "branch", "--list", "prodigy/*"); b != "" {
			t.Errorf("branch left: %s", b)
		}
		if wt := gitopstest.Out(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
			t.Errorf("worktrees left:\n%s", wt)
		}
	}
}

// TestMissingInputNamesTheRepositoryNotTheWorktree: a map.input file that
// does not exist is reported by its name in the user's repository, never
// by the job's internal worktree path.
func TestMissingInputNamesTheRepositoryNotTheWorktree(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1}]`})
	home := t.TempDir()
	for name, body := range map[string]string{
		"plain": "name: m\nmap:\n  input: nosuch.json\n  agent_template:\n    - shell: \"true\"\n",
		"setup": "name: m\nsetup:\n  - shell: \"true\"\nmap:\n  input: nosuch.json\n  agent_template:\n    - shell: \"true\"\n",
	} {
		code, _, errOut := runCLI(t, home, "run", clitest.Workflow(t, body), "--repo", repo, "--job-id", "m-"+name)
		want := `map.input: input file "nosuch.json" does not exist (looked in HEAD of ` + repo + ` and in its working tree)`
		if name == "setup" {
			want = `map.input: input file "nosuch.json" does not exist (looked in results branch prodigy/m-setup after setup; it starts from HEAD of ` + repo + `)`
		}
		if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "error: map.input: input file \""+home) {
			t.Errorf("%s: exit %d, want %q:\n%s", name, code, want, errOut)
		}
	}
}

// TestStatusWithSeveralJobsShowsTheNewest: `status` without a job id,
// with several jobs, shows the newest and says so, naming `latest`.
func TestStatusWithSeveralJobsShowsTheNewest(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1}]`})
	wf := clitest.Workflow(t, "name: s\nmap:\n  input: items.json\n  agent_template:\n    - shell: \"true\"\n")
	home := t.TempDir()
	// The real clock: "b-older" starts first, so it is not the newest
	// although its id sorts last.
	realClock := clitest.Run{Home: home, Setup: func(f *cmdutil.Factory) { f.Engine.Clock = nil }}
	for _, id := range []string{"b-older", "a-newer"} {
		if code, _, errOut := realClock.Exec("run", wf, "--repo", repo, "--job-id", id); code != 0 {
			t.Fatalf("run %s: exit %d\n%s", id, code, errOut)
		}
	}
	t.Chdir(repo)
	code, out, errOut := runCLI(t, home, "status")
	if code != 0 || !strings.HasPrefix(out, "job:            a-newer (s)") ||
		!strings.Contains(errOut, "several jobs: showing the newest, a-newer (`prodigy-action status latest` names it; `prodigy-action jobs` lists them)") {
		t.Errorf("status: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestRetryDelaysPrintRounded: the "retrying in" line rounds the jittered
// delay (1.23s, 12ms), never nanosecond noise such as 9.540203ms.
func TestRetryDelaysPrintRounded(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1},{"n":2},{"n":3}]`})
	wf := clitest.Workflow(t, `name: delays
map:
  input: items.json
  error_policy:
    retry_config:
      max_attempts: 3
      backoff:
        exponential:
          initial: 1500ms
      jitter: true
      jitter_factor: 0.9
  agent_template:
    - shell: exit 3
`)
	code, _, errOut := runCLI(t, t.TempDir(), "run", wf, "--repo", repo, "--job-id", "d")
	re := regexp.MustCompile(`retrying in (\S+)\n`)
	m := re.FindAllStringSubmatch(errOut, -1)
	if code != 0 || len(m) != 6 {
		t.Fatalf("exit %d, %d retries:\n%s", code, len(m), errOut)
	}
	ok := regexp.MustCompile(`^(\d+(\.\d{1,2})?s|\d+ms|\d+m\d+(\.\d{1,2})?s)$`)
	for _, d := range m {
		if !ok.MatchString(d[1]) {
			t.Errorf("delay %q is not rounded:\n%s", d[1], errOut)
		}
	}
}

// TestTyposAreCaughtBeforeAnythingRuns: a shell step's ${MAX_LINE} next
// to the workflow env MAX_LINES is refused by validate and run (exit 2,
// naming the closest name and the escape $${…}); a variable the script
// sets itself, or escaped, is not. ${item.feild} that no loaded item has
// is reported once, before any agent starts, with the closest field, and
// nothing is left behind (no DLQ, no branch).
func TestTyposAreCaughtBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"field":"a","n":1},{"field":"b","n":2}]`})
	home := t.TempDir()
	envTypo := clitest.Workflow(t, `name: envtypo
env:
  MAX_LINES: "5"
map:
  input: items.json
  agent_template:
    - shell: |
        test "$(printf 'a\nb\n' | wc -l)" -le "${MAX_LINE}" && echo ok
    - shell: echo "$MAX_LINES$MAX_LIN"
`)
	want := `:8:48: ${MAX_LINE} is not set by the workflow (did you mean ${MAX_LINES}?): bash would expand it from the environment, empty when unset; write $${MAX_LINE} if you mean bash's own variable`
	want2 := `:9:30: $MAX_LIN is not set by the workflow (did you mean $MAX_LINES?): bash would expand it from the environment, empty when unset; write $${MAX_LIN} if you mean bash's own variable`
	for _, args := range [][]string{{"validate", envTypo}, {"run", envTypo, "--repo", repo, "--job-id", "envtypo"}} {
		code, _, errOut := runCLI(t, home, args...)
		// run stops at the first problem; validate lists them all.
		if code != 2 || !strings.Contains(errOut, want) || args[0] == "validate" && !strings.Contains(errOut, want2) {
			t.Errorf("%s: exit %d, want 2 and %q and %q:\n%s", args[0], code, want, want2, errOut)
		}
	}
	fine := clitest.Workflow(t, `name: fine
env:
  MAX_LINES: "5"
map:
  input: items.json
  agent_template:
    - shell: |
        MAX_LINE=3
        echo "${MAX_LINE} $${MAX_LINE} ${MAX_LINES} $HOME"
    - shell: |
        # $MAX_LIN in a comment is no reference
        echo "$${MAX_LIN} \$MAX_LIN"
    - shell: |
        # text bash does not expand: single quotes, a quoted here-document
        echo 'costs $MAX_LIN dollars' > note.txt
        cat <<'TXT' >> note.txt
        $MAX_LINE is text here
        TXT
        for MAX_LIN in 1 2; do echo "$MAX_LIN"; done
`)
	if code, out, errOut := runCLI(t, home, "validate", fine); code != 0 {
		t.Errorf("validate of a script that sets its own variable: exit %d\n%s%s", code, out, errOut)
	}

	fieldTypo := clitest.Workflow(t, `name: fieldtypo
map:
  input: items.json
  agent_template:
    - shell: echo "${item.feild} ${item.n} ${item.other:-none}"
`)
	code, _, errOut := runCLI(t, home, "run", fieldTypo, "--repo", repo, "--job-id", "fieldtypo")
	want = `:5:20: ${item.feild}: none of the 2 item(s) has a field "feild" (did you mean ${item.field}?); the items' fields: field, n`
	if code != 2 || !strings.Contains(errOut, want) || strings.Count(errOut, "feild") != 2 {
		t.Errorf("item field typo: exit %d, want 2 and %q once:\n%s", code, want, errOut)
	}
	if strings.Contains(errOut, "✗") || strings.Contains(errOut, "succeeded") {
		t.Errorf("agents ran:\n%s", errOut)
	}
	if b := gitopstest.Out(t, repo, "branch", "--list", "prodigy/fieldtypo"); b != "" {
		t.Errorf("results branch left: %s", b)
	}
	if _, err := os.Stat(filepath.Join(home, "dlq", "repo", "fieldtypo")); !os.IsNotExist(err) {
		t.Errorf("DLQ written: %v", err)
	}
}

// TestItemOutputIsKeptPerAttempt: every attempt's output (stdout and
// stderr of every step), of items that succeed as well as items that end
// in the DLQ, is kept per item, redacted, bounded per attempt, printed by
// `logs JOB ITEM [--attempt N]`, linked from the DLQ record's
// json_log_location, from the result's items and from the job's last
// lines.
func TestItemOutputIsKeptPerAttempt(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"path":"uint.go"},{"path":"bad.go"},{"path":"big.go"}]`})
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	wf := clitest.Workflow(t, `name: vet
map:
  input: items.json
  id_field: path
  error_policy:
    retry_config:
      max_attempts: 2
      backoff: {fixed: {delay: 1ms}}
  agent_template:
    - shell: |
        echo "go vet ${item.path}: attempt ${attempt} ok, token `+token+`"
        echo "warning on stderr for ${item.path}" >&2
        if [ "${item.path}" = big.go ]; then head -c 3000000 /dev/zero | tr '\0' 'x'; echo; echo "the end of big.go"; fi
        [ "${item.path}" != bad.go ]
`)
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "vet", "--json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	logsDir := filepath.Join(home, "logs", "repo", "vet")
	if !strings.Contains(errOut, "item output: `prodigy-action logs vet ITEM [--attempt N]` (kept in "+logsDir+")") {
		t.Errorf("the job's last lines do not point at the item logs:\n%s", errOut)
	}
	if !strings.Contains(out, `"log_location": "`+filepath.Join(logsDir, "uint.go", "attempt-1.log")+`"`) {
		t.Errorf("result items lack the log location:\n%s", out)
	}

	// A succeeded item's output.
	code, got, errOut := runCLI(t, home, "logs", "vet", "uint.go")
	want := "=== uint.go attempt 1 (agent-"
	if code != 0 || !strings.HasPrefix(got, want) || !strings.Contains(got, "go vet uint.go: attempt 1 ok, token ***\n") ||
		!strings.Contains(got, "warning on stderr for uint.go\n") || strings.Contains(got, token) {
		t.Errorf("logs vet uint.go: exit %d\n%s\n%s", code, got, errOut)
	}
	// Both attempts of the failed one; --attempt picks one; latest works.
	_, got, _ = runCLI(t, home, "logs", "vet", "bad.go")
	if !strings.Contains(got, "go vet bad.go: attempt 1 ok") || !strings.Contains(got, "go vet bad.go: attempt 2 ok") {
		t.Errorf("logs vet bad.go:\n%s", got)
	}
	t.Chdir(repo)
	code, got, _ = runCLI(t, home, "logs", "latest", "bad.go", "--attempt", "2")
	if code != 0 || strings.Contains(got, "attempt 1") || !strings.Contains(got, "go vet bad.go: attempt 2 ok") {
		t.Errorf("--attempt 2: exit %d\n%s", code, got)
	}
	rec := readRecord(t, home, "repo", "vet", "bad.go")
	if n := len(rec.FailureHistory); n != 2 || rec.FailureHistory[1].JSONLogLocation == nil ||
		*rec.FailureHistory[1].JSONLogLocation != filepath.Join(logsDir, "bad.go", "attempt-2.log") {
		t.Errorf("DLQ record does not link the attempt's log: %+v", rec.FailureHistory)
	}
	// Bounded: 3 MB of output keep the first and last 512 KiB.
	st, err := os.Stat(filepath.Join(logsDir, "big.go", "attempt-1.log"))
	if err != nil || st.Size() > 1<<20+200 {
		t.Errorf("big.go's log: %v, %d bytes", err, st.Size())
	}
	_, got, _ = runCLI(t, home, "logs", "vet", "big.go")
	if !strings.Contains(got, "byte(s) of output not kept: the log keeps the first and last 512 KiB") || !strings.Contains(got, "the end of big.go\n") {
		t.Errorf("big.go's log lacks the marker or the end (%d bytes): …%s", len(got), got[max(0, len(got)-200):])
	}
	// Usage errors.
	for _, args := range [][]string{{"logs", "vet", "nosuch.go"}, {"logs", "vet", "bad.go", "--attempt", "3"}, {"logs", "nojob", "x"}} {
		if code, _, errOut := runCLI(t, home, args...); code != 2 {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
}
