package runner_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/internal/permtest"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestAgentsAsAnotherUserCannotWriteTheRepository: with AgentUser a range
// of two uids and two agents at a time (real processes, real git, the
// engine as root), every agent runs as a uid of the range with an empty
// HOME of its own, commits in the worktree it was handed, and cannot write
// the repository's git directory by path — its configuration, the results
// branch, its objects — so every attack of hostileAttacks fails: the job
// completes with every item merged and the repository's configuration as
// it was.
func TestAgentsAsAnotherUserCannotWriteTheRepository(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running agents as another user needs root (CI runs as root)")
	}
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
	permtest.OpenUp(t, r.Dir, r.Home)
	config := r.Git("config", "--local", "--list")
	var attacks []string
	for _, a := range hostileAttacks {
		attacks = append(attacks, "( "+a.byPath+"\n) >/dev/null 2>&1 && echo \""+a.name+" succeeded\" >> attacks.txt")
	}
	wf := r.Workflow(fmt.Sprintf(`
name: agent-user
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        test -z "$(ls -A "$HOME")" || { echo "HOME not empty: $(ls -A "$HOME")" >&2; exit 1; }
        touch "$HOME/.agent-was-here"
        id -u > "uid-${item.n}.txt"
        B=$PRODIGY_RESULTS_BRANCH
        E=$(dirname "$(cat .git/objects/info/alternates)")
        touch attacks.txt
        if [ "${item.n}" = 1 ]; then
          echo x >> "$E/config" 2>/dev/null && echo "config write succeeded" >> attacks.txt
          for f in "$E"/objects/*/*; do chmod u+w "$f" 2>/dev/null && echo x > "$f" 2>/dev/null && echo "object write succeeded" >> attacks.txt && break; done
          %s
          mv attacks.txt "attacks-${item.n}.txt"
        else
          rm attacks.txt
        fi
        git add -A && git commit -q -m "item ${item.n}"
`, strings.ReplaceAll(strings.Join(attacks, "\n"), "\n", "\n          ")))
	o, _, stderr, _ := r.options(wf)
	o.AgentUser = "70100-70101"
	res, err := r.run(o)
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 4 || res.ResultsTip == "" {
		t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
	}
	if got := r.Git("show", res.ResultsBranch+":attacks-1.txt"); got != "" {
		t.Errorf("attacks by path succeeded:\n%s", got)
	}
	for n := range 4 {
		uid := r.Git("show", fmt.Sprintf("%s:uid-%d.txt", res.ResultsBranch, n))
		if uid != "70100" && uid != "70101" {
			t.Errorf("item %d ran as uid %s, want 70100 or 70101", n, uid)
		}
	}
	if got := r.Git("config", "--local", "--list"); got != config {
		t.Errorf("the repository's configuration changed:\n%s", got)
	}
	if out := r.Git("fsck", "--no-dangling"); out != "" {
		t.Errorf("git fsck: %s", out)
	}
}

// TestAgentUserIsRefusedWhereItIsNoBoundary: root, the engine's own uid,
// a reversed range and a range smaller than max_parallel are usage
// errors before anything runs.
func TestAgentUserIsRefusedWhereItIsNoBoundary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	t.Parallel()
	for spec, want := range map[string]string{
		"0":           "must not run as root",
		"70000:0":     "must not run as root",
		"70005-70001": "FIRST-LAST",
		"70000-70001": "fewer than the 3 agents",
		"nosuchuser":  "nosuchuser",
	} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			r := newTestRepo(t, map[string]string{"items.json": itemsJSON(2)})
			o, _, _, _ := r.options(r.Workflow(`
name: refused
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: "true"
`))
			o.AgentUser = spec
			_, err := r.run(o)
			var ue *runner.UsageError
			if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ue) {
				t.Fatalf("err = %v; want a usage error saying %q", err, want)
			}
		})
	}
}

// TestAgentUserThatCannotReachItsWorktreesIsNamed: when the agents' user
// cannot search the directories above the state directory (t.TempDir's
// 0700 here), the job fails before the first item runs, saying which
// directory and what to do; no item ran.
func TestAgentUserThatCannotReachItsWorktreesIsNamed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(2)})
	o, _, _, _ := r.options(r.Workflow(`
name: unreachable
map:
  input: items.json
  agent_template:
    - shell: "touch ran-${item.n}"
`))
	o.AgentUser = "70300"
	res, err := r.run(o)
	if err == nil || !strings.Contains(err.Error(), "cannot reach their worktrees") || !strings.Contains(err.Error(), "agent-user: off") {
		t.Fatalf("err = %v; want the unreachable worktree directory named", err)
	}
	if res != nil && (res.Successful != 0 || res.Failed != 0) {
		t.Errorf("items ran: %+v", res)
	}
}

// TestAgentsOfTheirOwnUsersCannotReachEachOther: agents running as uids of
// a range (two at a time, items longer than a moment so they overlap) try
// to list, read and write every other pool worktree of the job — a
// running one, or an idle one whose files an earlier agent still owns:
// every worktree is closed to all but its current agent (0700), and the
// engine's while no agent has it.
func TestAgentsOfTheirOwnUsersCannotReachEachOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running agents as another user needs root (CI runs as root)")
	}
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(6), "shared.txt": "base\n"})
	permtest.OpenUp(t, r.Dir, r.Home)
	wf := r.Workflow(`
name: neighbours
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        me=$(basename "$PWD")
        for d in ../*/; do
          n=$(basename "$d")
          case "$n" in "$me"|parent) continue ;; esac
          ls "$d" >/dev/null 2>&1 && echo "listed $n" >> "reach-${item.n}.txt"
          cat "$d/shared.txt" >/dev/null 2>&1 && echo "read $n" >> "reach-${item.n}.txt"
          echo tampered 2>/dev/null > "$d/shared.txt" && echo "wrote $n" >> "reach-${item.n}.txt"
        done
        sleep 0.3
        touch "reach-${item.n}.txt"
        git add -A && git commit -q -m "item ${item.n}"
`)
	o, _, stderr, _ := r.options(wf)
	o.AgentUser = "70500-70501"
	res, err := r.run(o)
	if err != nil || res.Status != runner.StatusCompleted || res.Successful != 6 {
		t.Fatalf("run = %+v, %v\n%s", res, err, stderr)
	}
	for n := range 6 {
		if got := r.Git("show", fmt.Sprintf("%s:reach-%d.txt", res.ResultsBranch, n)); got != "" {
			t.Errorf("item %d reached another agent's worktree:\n%s", n, got)
		}
	}
	if got := r.Git("show", res.ResultsBranch+":shared.txt"); got != "base" {
		t.Errorf("shared.txt = %q on the results branch", got)
	}
}
