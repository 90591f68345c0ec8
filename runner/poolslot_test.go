package runner_test

import (
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// TestFreshPoolSlotsAreAttachedWithoutACheckout: an agent that takes a pool
// slot nobody has used since its checkout gets its branch by `git switch -C`
// (no walk of the files: the branch's reflog says "Created from HEAD"),
// later agents by `checkout -f -B` at the results tip ("Created from
// <commit>"), and every agent starts on its own branch in a clean worktree.
func TestFreshPoolSlotsAreAttachedWithoutACheckout(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(6), "a/keep.txt": "a\n"})
	wf := r.Workflow(`
name: attach
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        test -z "$(git status --porcelain --untracked-files=all --ignored)" || { git status >&2; exit 1; }
        b=$(git symbolic-ref --short HEAD)
        git reflog show --format=%gs -1 "$b" > created-${item.n}.txt
        git add created-${item.n}.txt && git commit -q -m "item ${item.n}"
`)
	o, _, stderr, _ := r.options(wf)
	o.Isolation, o.Merge = runner.IsolationPool, runner.MergeTree
	res, err := r.run(o)
	if err != nil || res.Successful != 6 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
	attached := 0
	for n := range 6 {
		got := r.Git("show", res.ResultsBranch+":created-"+string(rune('0'+n))+".txt")
		switch {
		case got == "branch: Created from HEAD":
			attached++
		case strings.HasPrefix(got, "branch: Created from "):
		default:
			t.Errorf("item %d: branch reflog %q", n, got)
		}
	}
	if attached == 0 || attached > 2 {
		t.Errorf("%d agents attached to a fresh slot, want 1 or 2 (one per slot at most)", attached)
	}
}
