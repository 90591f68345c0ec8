package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// readmeBlock returns the first fenced block of kind lang after heading
// in README.md.
func readmeBlock(t *testing.T, readme, heading, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		t.Fatalf("README's %s has no %s block", heading, lang)
	}
	block, _, _ := strings.Cut(rest, "```\n")
	return block
}

type actionStep struct {
	Uses string            `yaml:"uses"`
	Env  map[string]string `yaml:"env"`
	With map[string]string `yaml:"with"`
}

// TestREADMEQuickStart runs README's Quick start shell block literally in
// bash on an empty HOME whose PATH lacks ~/.local/bin (the block must put
// the binary there itself), with ~/src/your-repo a real repository: build
// and install, init --actions, run the starter, show an item's output.
// The Actions step the README shows is the one init writes.
func TestREADMEQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	block := readmeBlock(t, readme, "## Quick start", "sh")

	cache := map[string]string{}
	for _, k := range []string{"GOMODCACHE", "GOCACHE"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		cache[k] = strings.TrimSpace(string(out))
	}
	home := t.TempDir()
	// PATH as a fresh account has it: no prodigy-action anywhere on it.
	var path []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "prodigy-action")); err != nil {
			path = append(path, dir)
		}
	}
	env := []string{"HOME=" + home, "PATH=" + strings.Join(path, string(os.PathListSeparator)),
		"GOMODCACHE=" + cache["GOMODCACHE"], "GOCACHE=" + cache["GOCACHE"], "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOTOOLCHAIN=local"}

	repo := cliRepo(t, map[string]string{"README.md": "# my project\n", "guide.md": "one\ntwo\n", "main.go": "package main\n"})
	if err := os.MkdirAll(filepath.Join(home, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(home, "src", "your-repo")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = root, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("README Quick start: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"wrote workflow.yml", "wrote .github/workflows/prodigy.yml", "✓ README.md succeeded", "✓ guide.md succeeded", "completed: 2 total, 2 succeeded"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if !strings.Contains(out.String(), "=== README.md attempt 1") || !strings.Contains(out.String(), "README.md: 1 lines") {
		t.Errorf("logs latest README.md printed:\n%s", out.String())
	}

	// The README's Actions steps (the checkout without persisted
	// credentials, the Action) are steps init wrote.
	var shown []actionStep
	if err := yaml.Unmarshal([]byte(readmeBlock(t, readme, "## Quick start", "yaml")), &shown); err != nil || len(shown) != 2 {
		t.Fatalf("README's step: %v %+v", err, shown)
	}
	written, err := os.ReadFile(filepath.Join(repo, ".github", "workflows", "prodigy.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var gha struct {
		Jobs map[string]struct {
			Steps []actionStep `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(written, &gha); err != nil {
		t.Fatal(err)
	}
	for _, want := range shown {
		found := false
		for _, s := range gha.Jobs["fanout"].Steps {
			found = found || reflect.DeepEqual(s, want)
		}
		if !found {
			t.Errorf("init's workflow has no step %+v:\n%s", want, written)
		}
	}
}
