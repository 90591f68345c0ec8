package jobcmd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// glanceWriter records, at its first write, how many pool worktrees were
// still moved aside (not yet deleted) under home.
type glanceWriter struct {
	bytes.Buffer
	home  string
	aside int
	seen  bool
}

func (g *glanceWriter) Write(p []byte) (int, error) {
	if !g.seen {
		g.seen = true
		m, _ := filepath.Glob(filepath.Join(g.home, "worktrees", "*", "*", ".discarded-*"))
		g.aside = len(m)
	}
	return g.Buffer.Write(p)
}

// TestRunPrintsTheResultBeforeDeletingThePool: `run --json` prints its
// result while the pool worktrees' files are still only moved aside, and
// deletes them before the command returns.
func TestRunPrintsTheResultBeforeDeletingThePool(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": 1}, {"n": 2}, {"n": 3}]`})
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	wf := `
name: teardown
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	out := &glanceWriter{home: home}
	run := clitest.Run{Home: home, Setup: func(f *cmdutil.Factory) { f.Out = out }}
	if code, _, errOut := run.Exec("run", wfPath, "--repo", repo, "--json", "--job-id", "td"); code != 0 {
		t.Fatalf("run exit %d:\n%s", code, errOut)
	}
	var res struct {
		Status     string `json:"status"`
		Successful int    `json:"successful"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Status != "completed" || res.Successful != 3 {
		t.Fatalf("result %q: %v", out.String(), err)
	}
	if out.aside == 0 { // 1 or 2: the second slot's checkout may be stopped when the job ends first
		t.Error("no pool worktree was still moved aside when the result was printed: the deletion came first")
	}
	if m, _ := filepath.Glob(filepath.Join(home, "worktrees", "*", "*", ".discarded-*")); len(m) != 0 {
		t.Errorf("left after the command: %q", m)
	}
	if wt := gitopstest.Out(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("worktrees still registered:\n%s", wt)
	}
}
