package jobcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// TestStaticMistakesFailBeforeAnythingRuns: `validate` and `run` reject
// workflows whose mistakes are statically known, with exit 2 and
// file:line:col, and `run` never starts setup.
func TestStaticMistakesFailBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"name": "a", "n": 1}]`})
	marker := filepath.Join(t.TempDir(), "setup-ran")
	head := "name: x\nsetup:\n  - shell: touch " + marker + "\nmap:\n  input: items.json\n  agent_template:\n"
	cases := []struct {
		name, steps, extra, want, pos string
	}{
		{"typo root", "    - shell: echo ${itme.name}\n", "", `unknown variable ${itme.name}`, ":7:19"},
		{"map outside reduce", "    - claude: \"/fix ${map.total}\"\n", "", "only available in reduce", ":7:21"},
		{"quoted heredoc", "    - shell: |\n        cat <<'EOF'\n        ${item.name}\n        EOF\n", "", "quoted here-document", ":9:9"},
		{"nested shell", "    - shell: bash -c \"echo ${item.name}\"\n", "", "second shell", ":7:28"},
		{"eval", "    - shell: eval \"${item.name}\"\n", "", "second shell (eval)", ":7:20"},
		{"name context", "    - shell: printf -v \"${item.name}\" x\n", "", "variable name", ":7:25"},
		{"escaping write_file", "    - write_file:\n        path: ../outside.txt\n        content: x\n", "", "leaves the worktree", ":8:15"},
		{"absolute write_file", "    - write_file:\n        path: /tmp/${item.name}\n        content: x\n", "", "leaves the worktree", ":8:15"},
		{"env name with space", "    - shell: echo\n      env:\n        \"BAD NAME\": x\n", "", "invalid environment variable name", ":9:9"},
		{"env value typo", "    - shell: echo\n      env:\n        N: ${itme.n}\n", "", "env N: unknown variable", ":9:9"},
		{"unknown filter function", "    - shell: echo\n", "", "unknown function lenght()", ":6:21"},
		{"map in agent env", "    - shell: echo\n", "reduce:\n  - shell: echo ${map.total} ${item.name}\n", "unknown variable ${item.name}", ":9:"},
	}
	posRE := regexp.MustCompile(`wf\.yml:\d+:\d+`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wf := filepath.Join(t.TempDir(), "wf.yml")
			body := head + tc.steps + tc.extra
			if strings.HasPrefix(tc.name, "unknown filter") {
				body = strings.Replace(body, "  input: items.json\n", "  input: items.json\n  filter: \"n > 0 && lenght(name) > 2\"\n", 1)
			}
			if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := validateCLI(t, nil, wf)
			if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "wf.yml"+tc.pos) {
				t.Errorf("validate: exit %d, want 2 with %q at %s:\n%s", code, tc.want, tc.pos, errOut)
			}
			home := filepath.Join(t.TempDir(), "home")
			code, _, errOut = runCLI(t, home, "run", wf, "--repo", repo)
			if code != 2 || !strings.Contains(errOut, tc.want) || !posRE.MatchString(errOut) {
				t.Errorf("run: exit %d, want 2 with %q and file:line:col:\n%s", code, tc.want, errOut)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("setup ran")
			}
		})
	}
}

// TestNestedShellOptInValidates: allow_nested_shell is accepted strictly.
func TestNestedShellOptInValidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := "name: x\nmap:\n  input: items.json\n  agent_template:\n    - shell: bash -c \"echo ${item.name}\"\n      allow_nested_shell: true\n"
	bad := strings.Replace(ok, "true", "yes please", 1)
	for name, body := range map[string]string{"ok.yml": ok, "bad.yml": bad} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := validateCLI(t, nil, filepath.Join(dir, "ok.yml")); code != 0 {
		t.Errorf("opt-in: exit %d: %s", code, errOut)
	}
	if code, _, errOut := validateCLI(t, nil, filepath.Join(dir, "bad.yml")); code != 2 || !strings.Contains(errOut, "allow_nested_shell") {
		t.Errorf("non-boolean opt-in: exit %d: %s", code, errOut)
	}
}

// TestValidateRejectsAliasBomb: the 400-byte alias bomb that used to grow
// validate to gigabytes is an error with a position.
func TestValidateRejectsAliasBomb(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`a: &a ["x","x","x","x","x","x","x","x","x"]` + "\n")
	prev := "a"
	for _, n := range "bcdefghi" {
		b.WriteString(string(n) + ": &" + string(n) + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",") + "]\n")
		prev = string(n)
	}
	b.WriteString("map:\n  input: x.json\n  agent_template:\n    - shell: echo\n      on_failure: *i\n")
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := validateCLI(t, nil, wf)
	if code != 2 || !strings.Contains(errOut, "alias bomb") || !regexp.MustCompile(`wf\.yml:\d+:\d+`).MatchString(errOut) {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

// TestValidateStopsAtSignal: a cancelled context (SIGINT/SIGTERM in main)
// ends validate at once with exit 130, even in the middle of a large file.
func TestValidateStopsAtSignal(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: big\nmap:\n  input: items.json\n  agent_template:\n")
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "    - shell: echo %d \"${item.x}\"\n", i)
	}
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	env := map[string]string{"PRODIGY_HOME": t.TempDir()}
	f := cmdutil.NewFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	code := cli.Execute(ctx, f, []string{"validate", wf})
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, errb.String())
	}
}
func TestRunWorkflowIDAlias(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":1}]`, "wf.yml": "name: x\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: \"true\"\n"})
	home := filepath.Join(t.TempDir(), "home")
	code, out, errOut := runCLI(t, home, "run", filepath.Join(repo, "wf.yml"), "--repo", repo, "--workflow-id", "wf-alias", "--json")
	var res struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.JobID != "wf-alias" {
		t.Fatalf("run --workflow-id: exit %d, %s\n%s", code, out, errOut)
	}
}
