package runner_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// hostileWorkflow runs three items one at a time; each commits a file, and
// the agent of item 1 also runs attack (with $B the results branch and $E
// the repository's git directory, which the agent finds through its
// object alternates).
func hostileWorkflow(r *testRepo, attack string) string {
	return fmt.Sprintf(`
name: hostile-agent
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        echo "${item.n}" > "out-${item.n}.txt"
        git add . && git commit -q -m "item ${item.n}"
        B=$PRODIGY_RESULTS_BRANCH
        E=$(dirname "$(cat .git/objects/info/alternates)")
        if [ "${item.n}" = 1 ]; then
        %s
        fi
`, strings.ReplaceAll(attack, "\n", "\n        "))
}

// hostileAttacks are what a prompt-injected agent does to the results and
// to the engine's git: each as git commands in its own repository
// (ownGit, the way an agent told to "run git config …" would) and by path
// into the repository's git directory (byPath). want is the integrity
// failure byPath must cause.
var hostileAttacks = []struct {
	name, ownGit, byPath, want string
	// merged items whose files must be on the branch, and items
	// that must be pending again (byPath)
	merged, pending []string
}{
	{name: "rewind", ownGit: `git update-ref "refs/heads/$B" "$(git rev-parse "refs/heads/$B^1")"`,
		byPath: `git --git-dir="$E" update-ref "refs/heads/$B" "$(git --git-dir="$E" rev-parse "refs/heads/$B^1")"`,
		want:   "not on it", merged: []string{"item_1", "item_2"}, pending: []string{"item_0"}},
	{name: "forge", ownGit: `git update-ref "refs/heads/$B" "$(echo forged | git commit-tree "refs/heads/$B^{tree}" -p "refs/heads/$B")"`,
		byPath: `git --git-dir="$E" update-ref "refs/heads/$B" "$(echo forged | git --git-dir="$E" commit-tree "refs/heads/$B^{tree}" -p "refs/heads/$B")"`,
		want:   "did not make"},
	{name: "forge-around-own-commit", ownGit: `T=$(git rev-parse "refs/heads/$B")
X=$(git rev-parse HEAD)
F=$(echo "Merge (forged)" | git commit-tree "$(git write-tree)" -p "$T" -p "$X")
git update-ref "refs/heads/$B" "$F"`, byPath: `T=$(git --git-dir="$E" rev-parse "refs/heads/$B")
X=$(git rev-parse HEAD)
git rm -q --cached out-0.txt 2>/dev/null || true
F=$(echo "Merge (forged)" | git commit-tree "$(git write-tree)" -p "$T" -p "$X")
git push -q "$E" "$F:refs/forged"
git --git-dir="$E" update-ref "refs/heads/$B" "$F"`, want: "did not make"},
	{name: "delete", ownGit: `git update-ref -d "refs/heads/$B"`, byPath: `git --git-dir="$E" update-ref -d "refs/heads/$B"`, want: "is gone"},
	{name: "credential-helper", ownGit: `git config credential.helper '!f() { env > /tmp/leak; }; f'
git config url.https://evil.invalid/.insteadOf https://github.com/`, byPath: `git --git-dir="$E" config credential.helper '!f() { env > /tmp/leak; }; f'
git --git-dir="$E" config url.https://evil.invalid/.insteadOf https://github.com/`, want: "configuration gained"},
	{name: "parent-worktree-config", ownGit: `git config extensions.worktreeConfig true
git config --worktree filter.evil.smudge 'touch pwned'`, byPath: `git --git-dir="$E" config extensions.worktreeConfig true
P=$(git --git-dir="$E" worktree list --porcelain | awk -v b="branch refs/heads/$B" '/^worktree /{w=substr($0,10)} $0==b{print w}')
git -C "$P" config --worktree filter.evil.smudge 'touch pwned'`, want: "configuration gained"},
	{name: "merge-driver", ownGit: `git config merge.evil.driver 'touch pwned; cp %B %A'
printf '* merge=evil\n' > .git/info/attributes
git config --add include.path /tmp/x.cfg`, byPath: `git --git-dir="$E" config merge.evil.driver 'touch pwned; cp %B %A'
git --git-dir="$E" config --add include.path /tmp/x.cfg`, want: "configuration gained"},
}

// TestHostileAgentsGitStaysInItsRepository: every attack of hostileAttacks
// made with git in the agent's own repository (real git, through
// runner.Run, both merge modes) changes nothing the engine sees: the job
// completes with all three items merged, the results branch is the one
// the job built and the repository's configuration is unchanged.
func TestHostileAgentsGitStaysInItsRepository(t *testing.T) {
	for _, tc := range hostileAttacks {
		for _, mode := range []runner.MergeMode{runner.MergeTree, runner.MergeWorktree} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
				config := r.Git("config", "--local", "--list")
				o, _, stderr, _ := r.options(r.Workflow(hostileWorkflow(r, "( "+tc.ownGit+"\n) || true")))
				o.Merge = mode
				res, err := r.run(o)
				if err != nil || res.Status != runner.StatusCompleted || res.Successful != 3 || res.ResultsTip == "" {
					t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
				}
				if got := r.Git("rev-parse", "refs/heads/"+res.ResultsBranch); got != res.ResultsTip {
					t.Errorf("ResultsTip %s, branch at %s", res.ResultsTip, got)
				}
				files := strings.Join(r.Files(res.ResultsBranch), " ")
				for n := range 3 {
					if !strings.Contains(files, fmt.Sprintf("out-%d.txt", n)) {
						t.Errorf("out-%d.txt missing: %s", n, files)
					}
				}
				if got := r.Git("config", "--local", "--list"); got != config {
					t.Errorf("the repository's configuration changed:\n%s\nwas\n%s", got, config)
				}
			})
		}
	}
}

// TestHostileAgentCannotRewriteResults: an agent running as the engine's
// user that writes the repository's git directory by path — rewinds,
// forges, deletes the results branch or adds risky git configuration
// (real git, through runner.Run, both merge modes) — makes the job fail
// saying so, with nothing to publish (no ResultsTip) and every item
// accounted for: an item is reported merged only if its merge is on the
// branch the job ends with, the others are pending again. (Agents running
// as another user cannot write there at all.)
func TestHostileAgentCannotRewriteResults(t *testing.T) {
	for _, tc := range hostileAttacks {
		for _, mode := range []runner.MergeMode{runner.MergeTree, runner.MergeWorktree} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
				o, _, stderr, _ := r.options(r.Workflow(hostileWorkflow(r, tc.byPath)))
				o.Merge = mode
				res, err := r.run(o)
				if err == nil || !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v; want a job failure saying %q\n%s", err, tc.want, stderr)
				}
				if res == nil || res.Status != runner.StatusFailed || res.ResultsTip != "" || !strings.Contains(res.IntegrityError, tc.want) {
					t.Fatalf("result = %+v; want failed, no results tip, integrity error", res)
				}
				if res.Successful+res.Failed+res.Skipped+res.Pending != 3 {
					t.Errorf("items not accounted for: %+v", res)
				}
				states := map[string]runner.ItemState{}
				for _, it := range res.Items {
					states[it.ItemID] = it.State
				}
				for _, id := range tc.pending {
					if states[id] != runner.ItemPending {
						t.Errorf("%s is %s, want pending (its merge is gone)", id, states[id])
					}
				}
				if len(tc.merged) > 0 {
					files := strings.Join(r.Files(res.ResultsBranch), " ")
					for _, id := range tc.merged {
						if states[id] != runner.ItemMerged {
							// The worktree merge refuses to merge over the
							// parent's files, which still hold the erased
							// merge: such an item is in the DLQ, not merged.
							if mode == runner.MergeTree || states[id] != runner.ItemDLQ {
								t.Errorf("%s is %s, want merged", id, states[id])
							}
							continue
						}
						n := strings.TrimPrefix(id, "item_")
						if !strings.Contains(files, "out-"+n+".txt") {
							t.Errorf("%s is reported merged but out-%s.txt is not on the branch: %s", id, n, files)
						}
					}
				}
			})
		}
	}
}

// TestAgentDeletingSiblingBranchesLosesNothing: an agent that deletes
// every other agent's branch (and its own worktree's siblings' refs)
// changes no result: merges were taken by object id.
func TestAgentDeletingSiblingBranchesLosesNothing(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
	attack := `own=$(git symbolic-ref HEAD)
git for-each-ref --format='%(refname)' refs/heads/prodigy-agent | grep -v "^$own$" | while read -r ref; do git update-ref -d "$ref"; done`
	o, _, stderr, _ := r.options(r.Workflow(hostileWorkflow(r, attack)))
	res, err := r.run(o)
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 3 || res.ResultsTip == "" {
		t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
	}
	if got := r.Git("rev-parse", "refs/heads/"+res.ResultsBranch); got != res.ResultsTip {
		t.Errorf("ResultsTip %s, branch at %s", res.ResultsTip, got)
	}
	files := strings.Join(r.Files(res.ResultsBranch), " ")
	for n := range 3 {
		if !strings.Contains(files, fmt.Sprintf("out-%d.txt", n)) {
			t.Errorf("out-%d.txt missing: %s", n, files)
		}
	}
}

// TestAgentCommitMustBuildOnItsBase: an agent that rewrites its worktree's
// history (its commit no longer descends from the results branch commit it
// was given) is not merged: its item fails saying why; the others merge
// and the job's results verify.
func TestAgentCommitMustBuildOnItsBase(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
	attack := `git reset -q --hard "$(git rev-list --max-parents=0 HEAD)"
echo rewritten > rewritten.txt && git add rewritten.txt && git commit -qm rewritten`
	o, _, stderr, _ := r.options(r.Workflow(hostileWorkflow(r, attack)))
	res, err := r.run(o)
	if err != nil || res.Successful != 2 || res.Failed != 1 || res.ResultsTip == "" {
		t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
	}
	for _, it := range res.Items {
		if it.ItemID == "item_1" && (it.State != runner.ItemDLQ || !strings.Contains(it.Error, "does not build on")) {
			t.Errorf("item_1: %s %q", it.State, it.Error)
		}
	}
	if files := strings.Join(r.Files(res.ResultsBranch), " "); strings.Contains(files, "rewritten.txt") {
		t.Errorf("the rewritten commit was merged: %s", files)
	}
}

// TestSetupMayConfigureGit: risky configuration setup adds (before agents
// run) is part of the baseline: the job completes and its results verify.
func TestSetupMayConfigureGit(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(2)})
	wf := r.Workflow(`
name: setup-config
mode: mapreduce
setup:
  - shell: git config filter.lfs.smudge cat && git remote add mirror https://example.invalid/r.git
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 2 || res.ResultsTip == "" || res.IntegrityError != "" {
		t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
	}
}
