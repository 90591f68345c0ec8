package jobcmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestInitWritesARunnableStarter: init writes a commented workflow that
// validates and runs as it is on a repository, and with --actions an
// Actions workflow that runs it with ANTHROPIC_API_KEY in the step's env.
// An existing file is refused with exit 2 and nothing written.
func TestInitWritesARunnableStarter(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"README.md": "# hi\n", "guide.md": "a\nb\n", "main.go": "package main\n"})
	home := t.TempDir()
	code, _, errOut := runCLI(t, home, "init", "--dir", repo)
	if code != 0 || !strings.Contains(errOut, "wrote "+filepath.Join(repo, "workflow.yml")) {
		t.Fatalf("init: exit %d\n%s", code, errOut)
	}
	body, err := os.ReadFile(filepath.Join(repo, "workflow.yml"))
	if err != nil || !strings.HasPrefix(string(body), "# A starter prodigy-action workflow") {
		t.Fatalf("workflow.yml: %v\n%s", err, body)
	}
	if _, err := os.Stat(filepath.Join(repo, ".github")); !os.IsNotExist(err) {
		t.Errorf("init without --actions wrote .github: %v", err)
	}
	wf := filepath.Join(repo, "workflow.yml")
	if code, out, errOut := runCLI(t, home, "validate", wf); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "starter", "--json")
	if code != 0 || !strings.Contains(out, `"successful": 2`) || !strings.Contains(errOut, "README.md succeeded") ||
		!strings.Contains(errOut, "guide.md succeeded") || !strings.Contains(errOut, "checked 2 of 2 files") {
		t.Fatalf("run the starter: exit %d\n%s\n%s", code, out, errOut)
	}

	// A second init (now with --actions) refuses: nothing is written.
	code, _, errOut = runCLI(t, home, "init", "--dir", repo, "--actions")
	if code != 2 || !strings.Contains(errOut, "workflow.yml exists; nothing was written (--force replaces it)") {
		t.Errorf("second init: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(repo, ".github")); !os.IsNotExist(err) {
		t.Errorf("a refused init wrote .github: %v", err)
	}
	code, _, errOut = runCLI(t, home, "init", "--dir", repo, "--actions", "--force")
	if code != 0 {
		t.Fatalf("init --force --actions: exit %d\n%s", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(repo, ".github", "workflows", "prodigy.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var gha struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				Env  map[string]string `yaml:"env"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &gha); err != nil {
		t.Fatalf("prodigy.yml: %v\n%s", err, raw)
	}
	found := false
	for _, s := range gha.Jobs["fanout"].Steps {
		if s.Uses == "prodigy-action/prodigy-action@v1" {
			found = s.Env["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}" && s.With["workflow"] == "workflow.yml"
		}
	}
	if !found {
		t.Errorf("no Action step with ANTHROPIC_API_KEY in env running workflow.yml:\n%s", raw)
	}
	// Not a directory: exit 2.
	if code, _, errOut := runCLI(t, home, "init", "--dir", filepath.Join(repo, "README.md")); code != 2 {
		t.Errorf("--dir on a file: exit %d\n%s", code, errOut)
	}
}
