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

// TestPoolSlotLeavesNothingOfAnAgentToTheNext: one slot, items one after
// another. The first agent commits and waits, so the slot's directories
// are remembered clean (gitops: the in-process clean); the second plants
// (after its commit) an untracked script, an ignored file, a nested
// repository and a deep directory, drops a tracked file from its own
// index, sets the modification times of the directories it changed back
// to 2000, and waits (its changes are then old enough to be trusted: only
// the directories' change times and the index give them away). The
// third finds the worktree exactly the results tip: nothing planted, the
// dropped file tracked, nothing untracked or ignored.
func TestPoolSlotLeavesNothingOfAnAgentToTheNext(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3), "a/keep.txt": "a\n", "a/deep/d.txt": "d\n", ".gitignore": "*.log\n"})
	wf := r.Workflow(`
name: slot
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        set -e
        case "${item.n}" in
        2) test -z "$(git status --porcelain --untracked-files=all --ignored)" || { git status --ignored >&2; exit 1; }
           test ! -e a/deep/hook.sh && test ! -e a/z.log && test ! -e a/nested && test ! -e a/deep/new
           git ls-files --error-unmatch a/keep.txt > /dev/null ;;
        esac
        printf '%s\n' "${item.n}" > out-${item.n}.txt
        git add out-${item.n}.txt && git commit -q -m "item ${item.n}"
        case "${item.n}" in
        0) sleep 0.3 ;;
        1) printf 'evil\n' > a/deep/hook.sh
           printf 'log\n' > a/z.log
           git init -q a/nested
           mkdir -p a/deep/new/er && printf 'x\n' > a/deep/new/er/f
           git rm -q --cached a/keep.txt
           touch -d 2000-01-01 a a/deep
           sleep 0.3 ;;
        esac
`)
	o, _, stderr, _ := r.options(wf)
	o.Isolation, o.Merge = runner.IsolationPool, runner.MergeTree
	res, err := r.run(o)
	if err != nil || res.Successful != 3 {
		t.Fatalf("run: %v, %+v\n%s", err, res, stderr)
	}
}
