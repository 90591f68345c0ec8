package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// firstRunWorkflow is committed into the user's repository: an SPDX-style
// workflow whose item "bad.go" fails for real.
const firstRunWorkflow = `name: spdx
map:
  input: files.json
  id_field: path
  max_parallel: 2
  agent_template:
    - shell: |
        case "${item.path}" in
          bad.go) echo "cannot parse ${item.path}: unexpected EOF" >&2; exit 3 ;;
        esac
        printf '// SPDX-License-Identifier: MIT\n' > "${item.path}"
        git add -- "${item.path}" && git commit -qm "spdx: ${item.path}"
`

// TestREADMEFirstHour follows the README on an empty HOME: the install
// line (go build -o into a bin directory), then a workflow run on a
// separate repository through the installed binary, from inside that
// repository, then `jobs`, `dlq list` (with labels), `status latest` and
// `jobs discard`.
func TestREADMEFirstHour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// go build reuses this machine's module and build caches (so the test
	// needs no network); everything else sees the empty HOME.
	cache := map[string]string{}
	for _, k := range []string{"GOMODCACHE", "GOCACHE"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		cache[k] = strings.TrimSpace(string(out))
	}
	home := t.TempDir()
	bin := filepath.Join(home, ".local", "bin")
	env := []string{"HOME=" + home, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOMODCACHE=" + cache["GOMODCACHE"], "GOCACHE=" + cache["GOCACHE"], "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOTOOLCHAIN=local"}

	// README: go build -o ~/.local/bin/prodigy-action ./cmd/action (in a clone).
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "prodigy-action"), "./cmd/action")
	build.Dir, build.Env = root, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("install line: %v\n%s", err, out)
	}

	repo := cliRepo(t, map[string]string{
		"files.json":   `[{"path": "b.go"}, {"path": "bad.go"}, {"path": "a.go"}]`,
		"workflow.yml": firstRunWorkflow,
	})
	pa := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		// Through bash, so prodigy-action is found on the PATH the README sets.
		cmd := exec.Command("bash", append([]string{"-c", `prodigy-action "$@"`, "prodigy-action"}, args...)...)
		cmd.Dir, cmd.Env = repo, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("prodigy-action %v: %v", args, err)
		}
		if code != wantCode {
			t.Fatalf("prodigy-action %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}

	// README: prodigy-action run workflow.yml (from the repository).
	_, errOut := pa(0, "run", "workflow.yml")
	first, _, _ := strings.Cut(errOut, "\n")
	m := regexp.MustCompile(`^job (mapreduce-\S+) · results branch (prodigy/\S+) · 3 items$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line of run = %q, want `job <id> · results branch <b> · 3 items`\n%s", first, errOut)
	}
	jobID, branch := m[1], m[2]
	if !strings.Contains(errOut, "✗ bad.go failed") || !strings.Contains(errOut, "✓ a.go succeeded") {
		t.Errorf("progress lines do not name the items by label:\n%s", errOut)
	}
	if strings.Contains(errOut, "uncommitted") {
		t.Errorf("clean checkout reported dirty:\n%s", errOut)
	}

	out, _ := pa(0, "jobs")
	if !strings.Contains(out, jobID) || !strings.Contains(out, "completed") || !strings.Contains(out, "2/1/0") || !strings.Contains(out, branch) {
		t.Errorf("jobs:\n%s", out)
	}
	out, _ = pa(0, "jobs", "--json")
	var jl struct {
		Repo string
		Jobs []struct {
			JobID    string `json:"job_id"`
			DLQCount int    `json:"dlq_count"`
			Done     int    `json:"done"`
		}
	}
	if err := json.Unmarshal([]byte(out), &jl); err != nil || jl.Repo != "repo" || len(jl.Jobs) != 1 || jl.Jobs[0].JobID != jobID || jl.Jobs[0].DLQCount != 1 || jl.Jobs[0].Done != 2 {
		t.Errorf("jobs --json = %s (%v)", out, err)
	}

	out, _ = pa(0, "dlq", "list", "--job-id", "latest")
	if !regexp.MustCompile(`(?m)^bad\.go\s+bad\.go\s+CommandFailed`).MatchString(out) {
		t.Errorf("dlq list does not show the label:\n%s", out)
	}
	out, _ = pa(0, "dlq", "list", "--json")
	if !strings.Contains(out, `"label":"bad.go"`) {
		t.Errorf("dlq list --json has no label: %s", out)
	}
	out, _ = pa(0, "status", "latest")
	if !strings.Contains(out, jobID) {
		t.Errorf("status latest:\n%s", out)
	}

	// README: prodigy-action jobs discard latest --delete-branch --yes.
	_, errOut = pa(0, "jobs", "discard", "latest", "--delete-branch", "--yes")
	if !strings.Contains(errOut, "discarded job "+jobID) || !strings.Contains(errOut, "deleted branch "+branch) {
		t.Errorf("discard:\n%s", errOut)
	}
	if b := gitOut(t, repo, "branch", "--list", "prodigy*"); b != "" {
		t.Errorf("branches left after discard: %s", b)
	}
	for _, d := range []string{"state", "dlq", "worktrees", "events"} {
		if entries, _ := os.ReadDir(filepath.Join(home, ".prodigy", d)); len(entries) > 0 {
			t.Errorf("~/.prodigy/%s not empty after discard: %v", d, entries)
		}
	}
	_, errOut = pa(0, "jobs")
	if !strings.Contains(errOut, "no jobs") {
		t.Errorf("jobs after discard: %s", errOut)
	}
	if runtime.GOOS == "linux" {
		if st := gitOut(t, repo, "status", "--porcelain"); st != "" {
			t.Errorf("the user's checkout changed: %s", st)
		}
	}
}
