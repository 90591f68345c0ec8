package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

func itemsJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"n": %d}`, i)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func TestRunParallelMergesEverythingAndLeavesCheckoutUntouched(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(20)})
	head := r.Git("rev-parse", "HEAD")
	track := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
name: parallel
mode: mapreduce
map:
  input: items.json
  max_parallel: 4
  agent_template:
    - shell: |
        ( flock 9; c=$(cat %[1]s/cur 2>/dev/null || echo 0); c=$((c+1)); echo $c > %[1]s/cur; echo $c >> %[1]s/max ) 9>%[1]s/lock
        sleep 0.2
        ( flock 9; c=$(cat %[1]s/cur); echo $((c-1)) > %[1]s/cur ) 9>%[1]s/lock
        echo "${item.n}" > "out-${item.n}.txt"
        git add . && git commit -q -m "item ${item.n}"
`, track))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if res.Status != runner.StatusCompleted || res.Successful != 20 || res.Failed != 0 || res.Pending != 0 {
		t.Fatalf("result = %+v", res)
	}
	data, _ := os.ReadFile(filepath.Join(track, "max"))
	peak := 0
	for _, f := range strings.Fields(string(data)) {
		n, _ := strconv.Atoi(f)
		peak = max(peak, n)
	}
	if peak > 4 || peak < 1 {
		t.Errorf("peak concurrency %d, want 1..4", peak)
	}
	files := r.Files(res.ResultsBranch)
	var outs int
	for _, f := range files {
		if strings.HasPrefix(f, "out-") {
			outs++
		}
	}
	if outs != 20 {
		t.Errorf("results branch has %d out files, want 20: %v", outs, files)
	}
	if merges := r.Git("rev-list", "--merges", "--count", res.ResultsBranch); merges != "20" {
		t.Errorf("%s merge commits, want 20", merges)
	}
	r.AssertUntouched(head)
	if wt := r.Git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("worktrees left behind:\n%s", wt)
	}
	if b := r.Git("branch", "--list", "prodigy-agent/*"); b != "" {
		t.Errorf("agent branches left behind:\n%s", b)
	}
}

func TestFailingItemIsRetriedThenDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": "ok"}, {"id": "bad"}]`})
	wf := r.Workflow(`
name: retry-then-dlq
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        if [ "${item.id}" = bad ]; then echo "boom for ${item.id}" >&2; exit 7; fi
        echo ok > ok.txt && git add ok.txt && git commit -qm ok
  error_policy:
    retry_config:
      attempts: 3
      backoff: fixed
      initial_delay: 2s
`)
	o, clock, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if res.Status != runner.StatusCompleted || res.Successful != 1 || res.Failed != 1 || res.DLQCount != 1 {
		t.Fatalf("result = %+v", res)
	}
	if got := fmt.Sprint(clock.Sleeps()); got != "[2s 2s]" {
		t.Errorf("backoff sleeps = %s, want [2s 2s]", got)
	}
	recs := r.DLQRecords("job-1")
	if len(recs) != 1 {
		t.Fatalf("DLQ has %d records, want 1", len(recs))
	}
	rec, ok := recs["item_1"]
	if !ok {
		t.Fatalf("no record for item_1: %v", recs)
	}
	if rec.FailureCount != 3 || len(rec.FailureHistory) != 3 {
		t.Fatalf("failure_count %d, history %d; want 3, 3", rec.FailureCount, len(rec.FailureHistory))
	}
	for i, h := range rec.FailureHistory {
		if h.AttemptNumber != uint32(i+1) {
			t.Errorf("history[%d].attempt_number = %d", i, h.AttemptNumber)
		}
		if got := mustJSON(t, h.ErrorType); got != `{"CommandFailed":{"exit_code":7}}` {
			t.Errorf("history[%d].error_type = %s", i, got)
		}
		if !strings.HasPrefix(h.StepFailed, "shell: ") {
			t.Errorf("step_failed = %q", h.StepFailed)
		}
	}
	if got := strings.Join(strings.Fields(string(rec.ItemData)), ""); got != `{"id":"bad"}` {
		t.Errorf("item_data = %s", rec.ItemData)
	}
	a := rec.WorktreeArtifacts
	if a == nil || a.BranchName == "" || a.WorktreePath == "" || a.ErrorLogs == nil || !strings.Contains(*a.ErrorLogs, "boom for bad") {
		t.Errorf("worktree_artifacts = %s", mustJSON(t, a))
	}
	events, _ := os.ReadFile(filepath.Join(r.Home, "events", "repo", "job-1", "events.jsonl"))
	for typ, want := range map[string]int{"agent_retrying": 2, "dlq_item_added": 1, "agent_completed": 1, "agent_failed": 1, "job_completed": 1} {
		if got := strings.Count(string(events), `"event_type":"`+typ+`"`); got != want {
			t.Errorf("%d %s events, want %d", got, typ, want)
		}
	}
}

func TestMergeConflictFailsOneItemAndKeepsParentClean(t *testing.T) {
	t.Parallel()
	for _, mode := range []runner.MergeMode{runner.MergeTree, runner.MergeWorktree} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := newTestRepo(t, map[string]string{"items.json": `[{"v": "left"}, {"v": "right"}]`, "shared.txt": "original\n"})
			wf := r.Workflow(`
name: conflict
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        echo "${item.v}" > shared.txt
        sleep 0.3
        git commit -qam "set ${item.v}"
`)
			o, _, stderr, _ := r.options(wf)
			o.Merge = mode
			res, err := r.run(o)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			if res.Successful != 1 || res.Failed != 1 {
				t.Fatalf("result = %+v\n%s", res, stderr)
			}
			recs := r.DLQRecords("job-1")
			for _, rec := range recs {
				if got := mustJSON(t, rec.FailureHistory[0].ErrorType); got != `"MergeConflict"` {
					t.Errorf("error_type = %s", got)
				}
				if !rec.ReprocessEligible {
					t.Errorf("a merge conflict should be eligible for redrive")
				}
			}
			content := r.Git("show", res.ResultsBranch+":shared.txt")
			if content != "left" && content != "right" {
				t.Errorf("shared.txt on results branch = %q", content)
			}
			if wt := r.Git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
				t.Errorf("worktrees left behind:\n%s", wt)
			}
		})
	}
}

func TestItemDataIsNeverExecuted(t *testing.T) {
	t.Parallel()
	hostile := []string{"$(touch pwned)", "'; rm -rf ~; '", "`id`", `"; touch pwned; "`, "a\nb $HOME \\ $$"}
	var arr []map[string]string
	for _, h := range hostile {
		arr = append(arr, map[string]string{"v": h})
	}
	data, _ := json.Marshal(arr)
	r := newTestRepo(t, map[string]string{"items.json": string(data)})
	out := t.TempDir()
	fakeHome := t.TempDir()
	sentinel := filepath.Join(fakeHome, "sentinel")
	if err := os.WriteFile(sentinel, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := r.Workflow(fmt.Sprintf(`
name: injection
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        printf '%%s\n' ${item.v} > %[1]s/${item_index}.bare
        printf '%%s\n' "${item.v}" > %[1]s/${item_index}.double
        printf '%%s\n' '${item.v}' > %[1]s/${item_index}.single
        cat <<EOF > %[1]s/${item_index}.heredoc
        ${item.v}
        EOF
`, out))
	o, _, stderr, _ := r.options(wf)
	o.Environ = append(os.Environ(), "HOME="+fakeHome)
	res, err := r.run(o)
	if err != nil || res.Successful != len(hostile) {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	for i, h := range hostile {
		for _, kind := range []string{"double", "single", "heredoc"} {
			got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.%s", i, kind)))
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSuffix(string(got), "\n") != h {
				t.Errorf("%s quoting of %q printed %q", kind, h, got)
			}
		}
		// Unquoted: the value is one literal word list (word splitting is the
		// shell's business), never code.
		got, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.bare", i)))
		if strings.Join(strings.Fields(string(got)), " ") != strings.Join(strings.Fields(h), " ") {
			t.Errorf("bare quoting of %q printed %q", h, got)
		}
	}
	if _, err := os.Stat(sentinel); err != nil {
		t.Fatalf("the sentinel in HOME is gone: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(r.Home, "worktrees", "*", "*", "*", "pwned"))
	if len(matches) > 0 {
		t.Fatalf("injected command ran: %v", matches)
	}
	for _, f := range r.Files(res.ResultsBranch) {
		if strings.Contains(f, "pwned") {
			t.Fatalf("injected file committed: %s", f)
		}
	}
}

func TestStepTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": 1}]`})
	marker := filepath.Join(t.TempDir(), "child-survived")
	wf := r.Workflow(fmt.Sprintf(`
name: timeout
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: "(sleep 2; touch %s) & sleep 30"
      timeout: 300ms
`, marker))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	rec := r.DLQRecords("job-1")["item_0"]
	if got := mustJSON(t, rec.FailureHistory[0].ErrorType); got != `"Timeout"` {
		t.Errorf("error_type = %s (%s)", got, rec.FailureHistory[0].ErrorMessage)
	}
	time.Sleep(2500 * time.Millisecond) // the background child would have fired by now
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a child of the timed-out step survived the kill")
	}
}

func TestClaudeStepRunsCommandAndKeepsTranscript(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "ok"}, {"name": "bad"}]`})
	fake := filepath.Join(t.TempDir(), "claude")
	script := `#!/usr/bin/env bash
prompt="${@: -1}"
for a in "$@"; do echo "{\"type\":\"system\",\"arg\":\"$a\"}" | tr -d '\n'; echo; done
if [[ "$prompt" == *bad* ]]; then
  echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"could not do it"}'
  exit 0
fi
echo hi > claude.txt && git add claude.txt && git commit -qm "claude did it"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done"}'
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := r.Workflow(`
name: claude
mode: mapreduce
map:
  input: items.json
  agent_template:
    - claude: "/process ${item.name}"
`)
	o, _, stderr, _ := r.options(wf)
	o.ClaudeCommand = fake
	res, err := r.run(o)
	if err != nil || res.Successful != 1 || res.Failed != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	rec := r.DLQRecords("job-1")["item_1"]
	loc := rec.FailureHistory[0].JSONLogLocation
	if loc == nil {
		t.Fatalf("no json_log_location in %s", mustJSON(t, rec))
	}
	transcript, err := os.ReadFile(*loc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"arg":"--print"`, `"arg":"stream-json"`, `"arg":"/process bad"`, `"is_error":true`} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("transcript lacks %s:\n%s", want, transcript)
		}
	}
	if !strings.Contains(rec.FailureHistory[0].ErrorMessage, "could not do it") {
		t.Errorf("error_message = %q", rec.FailureHistory[0].ErrorMessage)
	}
}

func TestInputErrorsLeaveNoState(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, files, mapBlock string }{
		{"non-array input", `{"a": 1}`, "input: items.json"},
		{"bad json", `[{"a": 1}`, "input: items.json"},
		{"bad jsonpath", `[]`, "input: items.json\n  json_path: \"$[?(\""},
		{"bad filter", `[]`, "input: items.json\n  filter: \"a >>> 1\""},
		{"missing file", `[]`, "input: missing.json"},
		{"failing command", `[]`, "input: \"exit 3\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTestRepo(t, map[string]string{"items.json": tc.files})
			wf := r.Workflow("name: bad\nmode: mapreduce\nmap:\n  " + tc.mapBlock + "\n  agent_template:\n    - shell: echo hi\n")
			o, _, _, _ := r.options(wf)
			_, err := r.run(o)
			var ue *runner.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			entries, _ := os.ReadDir(r.Home)
			for _, e := range entries {
				sub, _ := filepath.Glob(filepath.Join(r.Home, e.Name(), "*"))
				if len(sub) > 0 {
					t.Errorf("state left in %s: %v", e.Name(), sub)
				}
			}
			if b := r.Git("branch", "--list"); strings.TrimSpace(b) != "* main" {
				t.Errorf("branches left: %q", b)
			}
		})
	}
}

func TestNotARepoIsAUsageError(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, nil)
	wf := r.Workflow("name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: echo\n")
	o, _, _, _ := r.options(wf)
	o.RepoDir = t.TempDir()
	_, err := runJob(context.Background(), o)
	var ue *runner.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "not a git repository") {
		t.Fatalf("err = %v", err)
	}
}
