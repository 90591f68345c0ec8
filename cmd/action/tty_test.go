package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestLiveProgressLineOnATerminal runs the real CLI (this test binary
// re-executed) on a pseudo-terminal made by util-linux `script`: stderr is
// the terminal, wrapped by the CLI's redactor, and the live progress line
// must be drawn and redrawn in place (carriage return + erase line), not
// printed as new lines.
func TestLiveProgressLineOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("needs util-linux script for a pseudo-terminal")
	}
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": 0}, {"n": 1}, {"n": 2}]`})
	wf := clitest.Workflow(t, `name: tty
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`)
	home := filepath.Join(t.TempDir(), "home")
	line := strings.Join([]string{shellQuote(os.Args[0]), "run", shellQuote(wf), "--repo", shellQuote(repo), "--job-id", "tty"}, " ")
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home, "SHELL=/bin/bash")
	out, err := cmd.Output()
	text := string(out)
	if err != nil {
		t.Fatalf("script: %v\n%q", err, text)
	}
	if n := strings.Count(text, "\r\x1b[K["); n < 2 {
		t.Fatalf("live progress line drawn %d time(s), want it redrawn in place:\n%q", n, text)
	}
	if !strings.Contains(text, "3/3 done (0 failed)") {
		t.Errorf("no final progress state:\n%q", text)
	}
}
