package jobcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

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
	if b := gitopstest.Out(t, repo, "branch", "--list"); b != "* main" {
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
