package main

import (
	"bytes"
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

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string { return gitopstest.Repo(t, files) }

func gitOut(t *testing.T, dir string, args ...string) string { return gitopstest.Out(t, dir, args...) }

// runCLI runs the CLI in-process (clitest.Home), e.g. to look at and go
// on with what a real process that a test ended left behind.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Home(home, args...)
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
