package jobcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// TestCLIHostileAgentFailsTheJobAndResumeRedoesItsVictim: through the CLI,
// an agent running as the engine's user that writes the repository's git
// directory by path (found through its object alternates: its own git
// reaches only its own repository) to rewind the results branch (erasing
// an earlier item's merge) and add a credential helper makes `run --json` exit 1 with integrity_error set and no results_tip;
// the erased item is pending. Once the helper is removed, `resume` redoes
// that item and the job completes with every item's file on the branch
// and a results_tip equal to the branch.
func TestCLIHostileAgentFailsTheJobAndResumeRedoesItsVictim(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": `[{"n":0},{"n":1},{"n":2}]`})
	leak := filepath.Join(t.TempDir(), "leak")
	wf := `name: hostile
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        echo "${item.n}" > "out-${item.n}.txt"
        git add . && git commit -qm "item ${item.n}"
        if [ "${item.n}" = 1 ] && [ ! -e "$MARK" ]; then
          touch "$MARK"
          E=$(dirname "$(cat .git/objects/info/alternates)")
          git --git-dir="$E" update-ref "refs/heads/$PRODIGY_RESULTS_BRANCH" "$(git --git-dir="$E" rev-parse "refs/heads/$PRODIGY_RESULTS_BRANCH^1")"
          git --git-dir="$E" config credential.helper '!f() { env > ` + leak + `; }; f'
        fi
`
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	mark := filepath.Join(t.TempDir(), "attacked")
	t.Setenv("MARK", mark)
	code, out, errOut := runCLI(t, home, "run", wfPath, "--repo", repo, "--job-id", "h1", "--json")
	if code != 1 {
		t.Fatalf("run: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Status         string `json:"status"`
		ResultsTip     string `json:"results_tip"`
		IntegrityError string `json:"integrity_error"`
		ResultsBranch  string `json:"results_branch"`
		Items          []struct {
			ItemID string `json:"item_id"`
			State  string `json:"state"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if res.ResultsTip != "" || !strings.Contains(res.IntegrityError, "credential.helper") || !strings.Contains(res.IntegrityError, "not on it") {
		t.Fatalf("result: tip %q, integrity error %q", res.ResultsTip, res.IntegrityError)
	}
	if res.Items[0].State != "pending" {
		t.Errorf("item_0 is %s, want pending", res.Items[0].State)
	}
	if !strings.Contains(errOut, "changed outside the engine") {
		t.Errorf("stderr does not say what happened:\n%s", errOut)
	}
	gitopstest.Out(t, repo, "config", "--unset", "credential.helper")
	code, out, errOut = runCLI(t, home, "resume", "h1", "--json")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	res.IntegrityError, res.ResultsTip, res.Status = "", "", ""
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || res.IntegrityError != "" || res.ResultsTip != gitopstest.Out(t, repo, "rev-parse", "refs/heads/"+res.ResultsBranch) {
		t.Fatalf("resume result: %+v", res)
	}
	files := gitopstest.Out(t, repo, "ls-tree", "--name-only", res.ResultsBranch)
	for _, f := range []string{"out-0.txt", "out-1.txt", "out-2.txt"} {
		if !strings.Contains(files, f) {
			t.Errorf("%s missing from the results branch: %s", f, files)
		}
	}
	if _, err := os.Stat(leak); err == nil {
		t.Errorf("the planted credential helper ran")
	}
}
