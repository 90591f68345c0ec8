package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// TestClosedPipeDoesNotKillTheJob runs the real CLI (this test binary
// re-executed) with stdout and stderr piped into a real `head -3`. The
// first item prints, head exits after three lines and only then (a marker
// file the test writes once head has exited) do the other items finish,
// so every later line is written into a closed pipe. The job must finish
// as usual: exit 0, every item merged, no worktree left registered, and
// the job completed (not "running (process gone)").
func TestClosedPipeDoesNotKillTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]`})
	marker := filepath.Join(t.TempDir(), "head-gone")
	wf := clitest.Workflow(t, fmt.Sprintf(`name: pipe
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.n}" != 0 ]; then
          while [ ! -e %q ]; do sleep 0.05; done
        fi
        echo "item ${item.n} output"
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
reduce:
  - shell: echo reduced
`, marker))
	home := filepath.Join(t.TempDir(), "home")

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bin := exec.Command(os.Args[0], "run", wf, "--repo", repo, "--job-id", "piped")
	bin.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home)
	bin.Stdout, bin.Stderr = w, w
	head := exec.Command("head", "-3")
	var headOut bytes.Buffer
	head.Stdin, head.Stdout = r, &headOut
	if err := head.Start(); err != nil {
		t.Fatal(err)
	}
	if err := bin.Start(); err != nil {
		t.Fatal(err)
	}
	// Only head reads the pipe and only the CLI writes it.
	_ = r.Close()
	_ = w.Close()
	if err := head.Wait(); err != nil {
		t.Fatalf("head: %v", err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = bin.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) || err != nil {
		t.Fatalf("the CLI writing into a closed pipe ended with %v (head printed:\n%s)", err, headOut.String())
	}
	if n := strings.Count(headOut.String(), "\n"); n != 3 {
		t.Fatalf("head printed %d lines:\n%s", n, headOut.String())
	}

	code, out, errOut := runCLI(t, home, "status", "piped", "--json")
	if code != 0 || !strings.Contains(out, `"status": "completed"`) {
		t.Errorf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	if wt := gitOut(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("worktrees left registered:\n%s", wt)
	}
	for n := range 4 {
		if got := gitOut(t, repo, "show", fmt.Sprintf("prodigy/piped:out-%d.txt", n)); got != fmt.Sprint(n) {
			t.Errorf("results branch out-%d.txt = %q", n, got)
		}
	}
}
