package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/redact/redacttest"
)

// Secrets of the redaction tests (made up). The ghp token reaches the
// step under a name that does not look secret: only its shape gives it
// away.
const (
	testGHP       = "ghp_" + "R3dact0nTest0123456789abcdefghijKLMN"
	testAPISecret = "api-secret-value-42"
	testGHToken   = "gh-job-token-0123456789"
)

// secretStep is a failing step printing the secrets from its environment.
const secretStep = `    - shell: |
        echo "pushing with $GH_PAT and key=$API_SECRET token=$GITHUB_TOKEN"
        echo "stderr: $API_SECRET" >&2
        exit 3
`

func assertNoSecrets(t *testing.T, where, text string) {
	t.Helper()
	redacttest.AssertNoSecrets(t, where, text, testGHP, testAPISecret, testGHToken)
}

// assertNoSecretFiles checks every file under dir.
func assertNoSecretFiles(t *testing.T, dir string) int {
	t.Helper()
	return redacttest.AssertNoSecretFiles(t, dir, testGHP, testAPISecret, testGHToken)
}

// TestCLIRedactsEverySink: a failing step prints a ghp_ token, an
// API_SECRET value and GITHUB_TOKEN; none of them reaches a file under
// $PRODIGY_HOME, stdout or stderr of run/status/dlq export/inspect/analyze,
// or an exported file.
func TestCLIRedactsEverySink(t *testing.T) {
	// t.Setenv: the step's environment is the process environment.
	t.Setenv("GH_PAT", testGHP)
	t.Setenv("API_SECRET", testAPISecret)
	t.Setenv("GITHUB_TOKEN", testGHToken)
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"n": 1}, {"n": 2}]`})
	home := t.TempDir()
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte("name: leaky\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n"+secretStep), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "leak", "--json")
	if code != 0 || !strings.Contains(out, `"dlq_count": 2`) && !strings.Contains(out, `"dlq_count":2`) {
		t.Fatalf("run: code %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "***") {
		t.Errorf("no mask in the run output; did the step print anything?\n%s\n%s", out, errOut)
	}
	assertNoSecrets(t, "run stdout", out)
	assertNoSecrets(t, "run stderr", errOut)

	exportDir := t.TempDir()
	for _, args := range [][]string{
		{"status", "leak", "--json"}, {"status", "leak"},
		{"dlq", "export", "-", "--job-id", "leak"}, {"dlq", "export", "-", "--format", "csv", "--job-id", "leak"},
		{"dlq", "export", filepath.Join(exportDir, "out.json"), "--job-id", "leak"},
		{"dlq", "export", filepath.Join(exportDir, "out.csv"), "--job-id", "leak"},
		{"dlq", "inspect", "item_0", "--job-id", "leak"}, {"dlq", "list", "--job-id", "leak", "--json"},
		{"dlq", "analyze", "--job-id", "leak"}, {"dlq", "analyze", "--job-id", "leak", "--json"},
		{"dlq", "analyze", "--job-id", "leak", "--export", filepath.Join(exportDir, "analysis.json")},
	} {
		code, out, errOut := clitest.Home(home, args...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
		assertNoSecrets(t, strings.Join(args, " ")+" stdout", out)
		assertNoSecrets(t, strings.Join(args, " ")+" stderr", errOut)
	}
	if n := assertNoSecretFiles(t, exportDir); n != 3 {
		t.Errorf("%d exported files, want 3", n)
	}
	if n := assertNoSecretFiles(t, home); n < 5 {
		t.Errorf("only %d files under PRODIGY_HOME", n)
	}
}
