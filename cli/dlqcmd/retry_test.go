package dlqcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/runner"
)

// dlq retry --signature --sample through the CLI: an unknown signature
// runs nothing and exits 0 (a selection that matches nothing, issue 29)
// listing the known ones with eligible/total counts, --dry-run prints the plan, and a cluster
// that still fails stops after the sample with exit 1, the rest never run.
func TestCLICanaryRedrive(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"n": "a", "k": "db"}, {"n": "b", "k": "db"}, {"n": "c", "k": "db"}, {"n": "z", "k": "net"}]`})
	home := t.TempDir()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	wf := filepath.Join(dir, "wf.yml")
	if err := os.WriteFile(wf, []byte(`name: canary
map:
  input: items.json
  id_field: n
  agent_template:
    - shell: |
        echo ${item.n} >> `+runs+`
        if [ "${item.k}" = db ]; then echo "database unreachable"; else echo "network down"; fi
        exit 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "j1", "--json"); code != 0 || !strings.Contains(out, `"dlq_count": 4`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	ran := func() []string {
		b, _ := os.ReadFile(runs)
		_ = os.Remove(runs)
		out := strings.Fields(string(b))
		slices.Sort(out)
		return out
	}
	ran()

	code, _, errOut := clitest.Home(home, "dlq", "retry", "j1", "--signature", "NoSuch::sig", "--sample", "1")
	if code != 0 || !strings.Contains(errOut, `no records to retry: --signature "NoSuch::sig" matches no DLQ record of job j1`) {
		t.Fatalf("unknown signature: exit %d\n%s", code, errOut)
	}
	if got := ran(); len(got) != 0 {
		t.Fatalf("an unknown signature ran %v", got)
	}
	m := regexp.MustCompile(`"([^"]*database unreachable[^"]*)" 3/3`).FindStringSubmatch(errOut)
	if m == nil || !strings.Contains(errOut, "network down") {
		t.Fatalf("known signatures not listed with their counts:\n%s", errOut)
	}
	sig := m[1]

	code, out, errOut := clitest.Home(home, "dlq", "retry", "j1", "--signature", sig, "--sample", "2", "--dry-run")
	if code != 0 || out != "sample\ta\nsample\tb\nrest\tc\n" || !strings.Contains(errOut, "2 sample item(s) first, then 1 more") {
		t.Fatalf("dry run: exit %d\n%q\n%s", code, out, errOut)
	}
	if got := ran(); len(got) != 0 {
		t.Fatalf("dry run ran %v", got)
	}

	code, _, errOut = clitest.Home(home, "dlq", "retry", "j1", "--signature", sig, "--sample", "2", "--max-retries", "1")
	if code != 1 || !strings.Contains(errOut, sig) || !strings.Contains(errOut, "(a, b)") || !strings.Contains(errOut, "were not run") {
		t.Fatalf("still-failing cluster: exit %d\n%s", code, errOut)
	}
	if got := ran(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("agents ran for %v, want only the sample [a b]", got)
	}

	code, _, errOut = clitest.Home(home, "dlq", "retry", "j1", "--sample", "2")
	if code != 2 || !strings.Contains(errOut, "--sample needs --signature") {
		t.Errorf("--sample alone: exit %d\n%s", code, errOut)
	}
}

// TestDLQRetryDryRunStreamsSameOutput: the streamed dry run (issue 11)
// prints, as text and as --json, exactly what the accumulated Result would,
// with several selected items (HTML-like characters in a label included),
// and changes nothing.
func TestDLQRetryDryRunStreamsSameOutput(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"path":"ok.go"},{"path":"a<&>.go"},{"path":"b.go"},{"path":"c.go"}]`})
	wf := clitest.Workflow(t, `name: stream
map:
  input: items.json
  id_field: path
  agent_template:
    - shell: |
        [ "${item.path}" = ok.go ] || { echo "boom" >&2; exit 4; }
        `+clitest.CommitItem+`
`)
	home := t.TempDir()
	if code, _, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "st"); code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	code, out, errOut := clitest.Home(home, "dlq", "retry", "st", "--dry-run")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "a<&>.go\ta<&>.go\n") || !strings.Contains(errOut, "dry run: 3 item(s) would be retried") {
		t.Fatalf("text dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = clitest.Home(home, "dlq", "retry", "st", "--dry-run", "--json")
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
	code, out, _ = clitest.Home(home, "dlq", "retry", "st", "--dry-run", "--json", "--filter", `item.path == "none"`)
	if code != 0 || !strings.Contains(out, `"items": []`) || !strings.Contains(out, `"pending": 0`) {
		t.Errorf("empty json dry run: exit %d\n%s", code, out)
	}
}

// TestDLQRetryFilterNamesAndEmptySelection: unknown --filter names are an
// error listing the known ones; a retry selecting nothing skips reduce.
func TestDLQRetryFilterNamesAndEmptySelection(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"path":"ok.go"},{"path":"bad.go","prio":3}]`})
	marker := filepath.Join(t.TempDir(), "reduced")
	wf := clitest.Workflow(t, fmt.Sprintf(`name: redrive
map:
  input: items.json
  id_field: path
  agent_template:
    - shell: |
        [ "${item.path}" != bad.go ] || { echo "boom" >&2; exit 4; }
        `+clitest.CommitItem+`
reduce:
  - shell: echo x >> %s
`, marker))
	home := t.TempDir()
	if code, _, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "rd"); code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	code, _, errOut := clitest.Home(home, "dlq", "retry", "rd", "--filter", "item.prio >= 1 && item.priorty > 2")
	if code != 2 || !strings.Contains(errOut, "unknown identifier(s) item.priorty; known: ") ||
		!strings.Contains(errOut, "item.path") || !strings.Contains(errOut, "item.prio") || !strings.Contains(errOut, "item.failure_count") {
		t.Errorf("unknown name: exit %d\n%s", code, errOut)
	}
	code, _, errOut = clitest.Home(home, "dlq", "retry", "rd", "--filter", "priority > 1")
	if code != 2 || !strings.Contains(errOut, "unknown identifier(s) priority;") {
		t.Errorf("bare name: exit %d\n%s", code, errOut)
	}
	code, _, errOut = clitest.Home(home, "dlq", "retry", "rd", "--filter", `item.path == "nope.go"`)
	if code != 0 || !strings.Contains(errOut, "nothing to retry, reduce not run") {
		t.Errorf("empty selection: exit %d\n%s", code, errOut)
	}
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("reduce ran %q times (want once, by the run)", b)
	}
	// --dry-run lists the items with their labels.
	code, out, _ := clitest.Home(home, "dlq", "retry", "rd", "--dry-run")
	if code != 0 || out != "bad.go\tbad.go\n" {
		t.Errorf("dry run: exit %d %q", code, out)
	}
}

// TestRedriveUsageErrorsLeaveNoWorktree: `dlq retry` that ends with exit
// 2 (an --onto that names nothing, a filter that cannot be evaluated) or
// finds nothing to retry leaves the repository's worktrees as they were:
// the completed job had none registered, and has none after.
func TestRedriveUsageErrorsLeaveNoWorktree(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"n":1},{"n":2}]`})
	wf := clitest.Workflow(t, `name: fails
map:
  input: items.json
  agent_template:
    - shell: exit 3
`)
	home := t.TempDir()
	if code, _, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "f"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	before := gitopstest.Out(t, repo, "worktree", "list", "--porcelain")
	if n := strings.Count(before, "worktree "); n != 1 {
		t.Fatalf("after the run %d worktrees:\n%s", n, before)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--onto", "nosuchref"}, 2, "--onto nosuchref: no such branch or revision"},
		{[]string{"--filter", "item.n >"}, 2, "--filter"},
		{[]string{"--filter", "item.n > 5"}, 0, "nothing to retry"},
	} {
		code, _, errOut := clitest.Home(home, append([]string{"dlq", "retry", "f"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tc.args, code, tc.code, tc.want, errOut)
		}
		if after := gitopstest.Out(t, repo, "worktree", "list", "--porcelain"); after != before {
			t.Errorf("%v left worktrees:\n%s", tc.args, after)
		}
	}
	// The job is still redrivable afterwards, and a real redrive tidies up.
	if code, _, errOut := clitest.Home(home, "dlq", "retry", "f"); code != 0 || !strings.Contains(errOut, "redriving 2 DLQ item(s)") {
		t.Errorf("redrive after: exit %d\n%s", code, errOut)
	}
	if after := gitopstest.Out(t, repo, "worktree", "list", "--porcelain"); after != before {
		t.Errorf("the redrive left worktrees:\n%s", after)
	}
}

// TestRedriveWithFixCLI redrives with the stand-in claude: `dlq retry
// --onto main` brings a code fix from main, `resume --include-dlq
// --workflow` an edited workflow.
func TestRedriveWithFixCLI(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"n": "a"}, {"n": "b"}]`})
	home := t.TempDir()
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude")
	withClaude := clitest.Run{Home: home, Claude: claude}
	// It fails unless the worktree has fix.txt, or when the prompt says "broken".
	script := `#!/usr/bin/env bash
prompt="${@: -1}"
if [[ ! -f fix.txt || "$prompt" == *broken* ]]; then
  echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"cannot: fix.txt missing or broken prompt","total_cost_usd":0.1}'
  exit 1
fi
echo "$prompt" > "out-${prompt##* }.txt" && git add . && git commit -qm "$prompt"
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.2}'
`
	if err := os.WriteFile(claude, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, prompt string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("name: fix\nmap:\n  input: items.json\n  agent_template:\n    - claude: \""+prompt+" ${item.n}\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wf := write("wf.yml", "/do")
	if code, out, errOut := withClaude.Exec("run", wf, "--repo", repo, "--job-id", "j1", "--json"); code != 0 || !strings.Contains(out, `"dlq_count": 2`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := os.WriteFile(filepath.Join(repo, "fix.txt"), []byte("fix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitopstest.Out(t, repo, "add", "fix.txt")
	gitopstest.Out(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "the fix")
	code, out, errOut := withClaude.Exec("dlq", "retry", "j1", "--onto", "main", "--filter", `item.item_id == "item_0"`, "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.Successful != 1 {
		t.Fatalf("dlq retry --onto main: exit %d\n%s\n%s", code, out, errOut)
	}
	if files := gitopstest.Out(t, repo, "ls-tree", "--name-only", "prodigy/j1"); !strings.Contains(files, "fix.txt") || !strings.Contains(files, "out-a.txt") {
		t.Errorf("results branch files:\n%s", files)
	}

	// The job's own workflow file now breaks the prompt; --workflow runs the edited copy.
	write("wf.yml", "/broken")
	fixed := write("wf-fixed.yml", "/do")
	code, out, errOut = withClaude.Exec("resume", "j1", "--include-dlq", "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.Successful != 1 {
		t.Fatalf("resume --include-dlq with the broken workflow file: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = withClaude.Exec("resume", "j1", "--include-dlq", "--workflow", fixed, "--json")
	if r := clitest.DecodeCost(t, out); code != 0 || r.Successful != 2 || r.CostUSD < 0.4 {
		t.Fatalf("resume --include-dlq --workflow: exit %d\n%s\n%s", code, out, errOut)
	}
	if files := gitopstest.Out(t, repo, "ls-tree", "--name-only", "prodigy/j1"); !strings.Contains(files, "out-b.txt") {
		t.Errorf("results branch lacks the edited workflow's work:\n%s", files)
	}
}
