package gitops

import (
	"slices"
	"strings"
	"testing"
)

// TestLooseWalkAgreesWithRevList checks the in-process walk behind
// CommitsSince against `git rev-list base..HEAD` in shapes where it answers
// itself and where it must hand over to git.
func TestLooseWalkAgreesWithRevList(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	base := git(t, dir, "rev-parse", "HEAD")
	tests := []struct {
		name    string
		setup   func(t *testing.T) string // returns the base to compare from
		inProc  bool                      // the walk answers without git
		wantLen int
	}{
		{"no commits", func(t *testing.T) string { return git(t, dir, "rev-parse", "HEAD") }, true, 0},
		{"two fresh commits", func(t *testing.T) string {
			b := git(t, dir, "rev-parse", "HEAD")
			commitFiles(t, dir, "one", map[string]string{"a.txt": "1"})
			commitFiles(t, dir, "two", map[string]string{"a.txt": "2"})
			return b
		}, true, 2},
		{"head is an ancestor of base (reset back): nothing, via git", func(t *testing.T) string {
			b := git(t, dir, "rev-parse", "HEAD")
			git(t, dir, "reset", "-q", "--hard", base)
			return b
		}, false, 0},
		{"merged a side branch that forks below base", func(t *testing.T) string {
			git(t, dir, "checkout", "-q", "-b", "side", base)
			commitFiles(t, dir, "side", map[string]string{"side.txt": "s"})
			git(t, dir, "checkout", "-q", "main")
			b := commitFiles(t, dir, "main", map[string]string{"m.txt": "m"})
			git(t, dir, "merge", "-q", "--no-ff", "-m", "merge side", "side")
			return b
		}, false, 2},
	}
	for _, tc := range tests {
		b := tc.setup(t)
		head := git(t, dir, "rev-parse", "HEAD")
		want := strings.Fields(git(t, dir, "rev-list", b+"..HEAD"))
		got, err := c.CommitsSince(bg(), dir, b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) || len(got) != tc.wantLen {
			t.Errorf("%s: CommitsSince = %v, rev-list = %v", tc.name, got, want)
		}
		if _, ok := c.objects.commitsSince(head, b); ok != tc.inProc {
			t.Errorf("%s: in-process walk ok = %v, want %v", tc.name, ok, tc.inProc)
		}
	}
}

// TestMergeTreeFastPathMatchesMerge: when the target has not moved since the
// branch forked, MergeTree skips merge-tree; the result must still be the
// tree and parents `git merge --no-ff` produces.
func TestMergeTreeFastPathMatchesMerge(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, map[string]string{"a.txt": "a\n"}, true)
	base := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "branch", "results")
	git(t, dir, "checkout", "-q", "-b", "agent")
	commitFiles(t, dir, "agent work", map[string]string{"a.txt": "agent\n", "new.txt": "n\n"})
	agent := git(t, dir, "rev-parse", "HEAD")
	if _, ok := c.descendantTree(c.mergedFor("refs/heads/results"), base, agent); !ok {
		t.Fatal("fast path not taken for a branch built on the target")
	}
	got, err := c.MergeTree(bg(), "results", "agent", "merge agent")
	if err != nil {
		t.Fatal(err)
	}
	if tree := git(t, dir, "rev-parse", got+"^{tree}"); tree != git(t, dir, "rev-parse", agent+"^{tree}") {
		t.Errorf("merged tree %s differs from the agent's", tree)
	}
	if parents := git(t, dir, "rev-list", "--parents", "-n", "1", got); parents != got+" "+base+" "+agent {
		t.Errorf("parents = %q", parents)
	}
	// Reference: a real no-ff merge of the same branch gives the same tree.
	git(t, dir, "checkout", "-q", "-b", "ref", base)
	git(t, dir, "merge", "-q", "--no-ff", "-m", "ref", "agent")
	if git(t, dir, "rev-parse", "HEAD^{tree}") != git(t, dir, "rev-parse", got+"^{tree}") {
		t.Error("fast-path tree differs from git merge --no-ff")
	}
}
