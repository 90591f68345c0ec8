package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"

	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string { return gitopstest.Repo(t, files) }

func gitOut(t *testing.T, dir string, args ...string) string { return gitopstest.Out(t, dir, args...) }

// runCLI runs the CLI in-process.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"PRODIGY_HOME": home, "HOME": home}
	f := cmdutil.NewFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	f.Engine.Clock = retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // no real backoff sleeps
	code := execute(context.Background(), f, args)
	return code, out.String(), errb.String()
}

func TestKillNineThenResumeRunsEveryItemExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process and kills it")
	}
	var items []string
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"n": %d}`, i))
	}
	repo := cliRepo(t, map[string]string{"items.json": "[" + strings.Join(items, ",") + "]"})
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	wf := `
name: crash
mode: mapreduce
map:
  input: items.json
  max_parallel: 4
  agent_template:
    - shell: |
        sleep 0.$(( ${item.n} % 3 + 1 ))
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(os.Args[0], "run", wfPath, "--repo", repo, "--job-id", "k9")
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(home, "events", "repo", "k9", "events.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(events)
		if strings.Count(string(data), `"agent_completed"`) >= 15 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("run made no progress:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(500 * time.Millisecond) // let orphaned steps of the dead process end

	code, out, errOut := runCLI(t, home, "status", "k9", "--json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, errOut)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st["status"] != "running" || st["pending"].(float64) == 0 {
		t.Fatalf("status after kill -9 = %v", st)
	}

	code, out, errOut = runCLI(t, home, "resume", "k9", "--json")
	if code != 0 {
		t.Fatalf("resume exit %d:\n%s", code, errOut)
	}
	var res struct {
		Status        string `json:"status"`
		Total         int    `json:"total"`
		Successful    int    `json:"successful"`
		Pending       int    `json:"pending"`
		DLQCount      int    `json:"dlq_count"`
		ResultsBranch string `json:"results_branch"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("resume --json printed %q: %v", out, err)
	}
	if res.Status != "completed" || res.Total != 50 || res.Successful+res.DLQCount != 50 || res.Pending != 0 {
		t.Fatalf("resume result = %+v\n%s", res, errOut)
	}
	trailers := gitOut(t, repo, "log", "--merges", "--format=%(trailers:key=Prodigy-Item,valueonly)", res.ResultsBranch)
	seen := map[string]int{}
	for _, l := range strings.Fields(trailers) {
		seen[l]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s merged %d times", id, n)
		}
	}
	if len(seen) != res.Successful {
		t.Errorf("%d distinct merged items, %d successful", len(seen), res.Successful)
	}
	if wt := gitOut(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("stale worktrees after resume:\n%s", wt)
	}
	if b := gitOut(t, repo, "branch", "--list", "prodigy-agent/*"); b != "" {
		t.Errorf("agent branches left:\n%s", b)
	}
}

func TestMalformedInputsExitTwoAndCreateNoState(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"a": 1}]`, "obj.json": `{"a": 1}`})
	cases := []struct {
		name, yaml, repo, want string
	}{
		{"bad yaml", "name: x\nmode: mapreduce\nmap:\n  input: [unclosed\n", "", "wf.yml:"},
		{"unknown key", "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_templat:\n    - shell: echo\n", "", "agent_templat"},
		{"bad duration", "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: echo\n  error_policy:\n    retry_config:\n      initial_delay: 1 second\n", "", "initial_delay"},
		{"bad jsonpath", "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  json_path: \"$[?(\"\n  agent_template:\n    - shell: echo\n", "", "json_path"},
		{"bad filter", "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  filter: \"a >>> 1\"\n  agent_template:\n    - shell: echo\n", "", "filter"},
		{"non-array input", "name: x\nmode: mapreduce\nmap:\n  input: obj.json\n  agent_template:\n    - shell: echo\n", "", "array"},
		{"missing file", "name: x\nmode: mapreduce\nmap:\n  input: nope.json\n  agent_template:\n    - shell: echo\n", "", "nope.json"},
		{"not a git repo", "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: echo\n", t.TempDir(), "not a git repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wf := filepath.Join(t.TempDir(), "wf.yml")
			if err := os.WriteFile(wf, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			home := filepath.Join(t.TempDir(), "home")
			dir := repo
			if tc.repo != "" {
				dir = tc.repo
			}
			code, _, errOut := runCLI(t, home, "run", wf, "--repo", dir)
			if code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", code, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("message lacks %q:\n%s", tc.want, errOut)
			}
			if entries, err := os.ReadDir(home); err == nil && len(entries) > 0 {
				var names []string
				_ = filepath.Walk(home, func(p string, info os.FileInfo, err error) error {
					if err == nil && !info.IsDir() {
						names = append(names, p)
					}
					return nil
				})
				if len(names) > 0 {
					t.Errorf("state written: %v", names)
				}
			}
		})
	}
	if b := gitOut(t, repo, "branch", "--list"); b != "* main" {
		t.Errorf("branches created: %q", b)
	}
}

func TestDemoRunsEndToEnd(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errOut := runCLI(t, home, "demo", "--dir", dir, "--json")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, errOut)
	}
	var res struct {
		Successful, Failed, Total, DLQCount int
		ResultsBranch                       string `json:"results_branch"`
		JobID                               string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 4 || res.Successful != 3 || res.Failed != 1 {
		t.Fatalf("demo result = %+v\n%s", res, errOut)
	}
	if !strings.Contains(errOut, "retrying in") {
		t.Errorf("the failing item was not retried:\n%s", errOut)
	}
	code, out, errOut = runCLI(t, home, "dlq", "inspect", "item_2", "--job-id", res.JobID)
	if code != 0 || !strings.Contains(out, `"failure_count": 2`) || !strings.Contains(out, "Claude") {
		t.Errorf("dlq inspect item_2: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestSIGTERMCheckpointsAndExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"n": %d}`, i))
	}
	repo := cliRepo(t, map[string]string{"items.json": "[" + strings.Join(items, ",") + "]"})
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	wf := `
name: term
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        sleep 0.3
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(os.Args[0], "run", wfPath, "--repo", repo, "--job-id", "term")
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(home, "events", "repo", "term", "events.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(events)
		if strings.Count(string(data), `"agent_completed"`) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no progress:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130\n%s", err, stderr.String())
	}
	code, out, errOut := runCLI(t, home, "status", "term", "--json")
	if code != 0 || !strings.Contains(out, `"status": "interrupted"`) {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "resume", "term", "--json")
	if code != 0 || !strings.Contains(out, `"successful": 20`) {
		t.Fatalf("resume: %d %s\n%s", code, out, errOut)
	}
}
