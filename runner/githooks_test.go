package runner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// TestPlantedHooksNeverRunInTheEnginesGit: the repository has hooks of its
// user's; the first agent (a shell step) plants hooks of its own after its
// commit (core.hooksPath in its repository, and its .git/hooks); the
// runner's environment holds GITHUB_TOKEN and API_SECRET. The engine then
// merges (tree and worktree mode), resets pool worktrees and cleans up with
// hooks off and without those secrets; the agents' own `git commit` runs
// the repository's hooks, never the planted ones. Not parallel: it sets
// process environment.
func TestPlantedHooksNeverRunInTheEnginesGit(t *testing.T) {
	const token, secret = "ghs_RUNNERHOOKTOKEN0123456789", "api-secret-runner-0123456789"
	t.Setenv("GITHUB_TOKEN", token)
	t.Setenv("API_SECRET", secret)
	for _, mode := range []runner.MergeMode{runner.MergeTree, runner.MergeWorktree} {
		t.Run(string(mode), func(t *testing.T) {
			r := newTestRepo(t, map[string]string{"items.json": itemsJSON(2)})
			log := filepath.Join(t.TempDir(), "hooks.log")
			src := t.TempDir()
			engineOnly := []string{"post-merge", "pre-merge-commit", "post-checkout", "pre-push", "post-rewrite"}
			agentToo := []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-index-change"}
			for _, h := range append(engineOnly, agentToo...) {
				script := fmt.Sprintf("#!/bin/sh\necho \"%s token=$GITHUB_TOKEN secret=$API_SECRET\" >> %s\n", h, log)
				if err := os.WriteFile(filepath.Join(r.Dir, ".git", "hooks", h), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
				planted := fmt.Sprintf("#!/bin/sh\necho \"planted %s token=$GITHUB_TOKEN\" >> %s\n", h, log)
				if err := os.WriteFile(filepath.Join(src, h), []byte(planted), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			wf := r.Workflow(fmt.Sprintf(`
name: hostile-hooks
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        echo "${item.n}" > "out-${item.n}.txt"
        git add . && git commit -q -m "item ${item.n}"
        if [ "${item.n}" = 0 ]; then
          mkdir -p .git/hooks .git/planted && cp %[1]s/* .git/hooks/ && cp %[1]s/* .git/planted/
          git config core.hooksPath "$PWD/.git/planted"
        fi
`, src))
			o, _, stderr, _ := r.options(wf)
			o.Merge = mode
			// Agents get a scrubbed environment, as the Action gives them.
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GITHUB_TOKEN=") && !strings.HasPrefix(kv, "API_SECRET=") {
					o.Environ = append(o.Environ, kv)
				}
			}
			res, err := r.run(o)
			if err != nil || res.Status != runner.StatusCompleted || res.Successful != 2 {
				t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
			}
			if files := r.Files(res.ResultsBranch); !strings.Contains(strings.Join(files, " "), "out-1.txt") {
				t.Fatalf("item 1 not merged: %v", files)
			}
			b, _ := os.ReadFile(log)
			got := string(b)
			if strings.Count(got, "pre-commit token= secret=") != 2 {
				t.Errorf("the agents' own commits did not run the repository's pre-commit hook once each:\n%s", got)
			}
			if strings.Contains(got, "planted") {
				t.Errorf("a hook the first agent planted ran:\n%s", got)
			}
			if strings.Contains(got, token) || strings.Contains(got, secret) {
				t.Errorf("a hook saw the runner's secrets:\n%s", got)
			}
			for _, h := range engineOnly {
				if strings.Contains(got, h+" ") {
					t.Errorf("hook %s ran in the engine's git:\n%s", h, got)
				}
			}
		})
	}
}
