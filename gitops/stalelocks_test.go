package gitops

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A git process killed mid-write leaves its lock files; RemoveStaleLocks
// removes those of the named worktrees and refs that are older than the
// cut-off, never the main worktree's or other refs', and git works again.
func TestRemoveStaleLocks(t *testing.T) {
	dir, c := newRepo(t, nil, true)
	wt := filepath.Join(t.TempDir(), "parent")
	git(t, dir, "worktree", "add", "-q", "-b", "prodigy/job", wt)
	git(t, dir, "branch", "prodigy-agent/job/agent-1")
	git(t, dir, "branch", "other")
	admin := strings.TrimSpace(git(t, wt, "rev-parse", "--absolute-git-dir"))
	common := filepath.Join(dir, ".git")
	stale := []string{
		filepath.Join(admin, "index.lock"),
		filepath.Join(admin, "HEAD.lock"),
		filepath.Join(common, "refs/heads/prodigy/job.lock"),
		filepath.Join(common, "refs/heads/prodigy-agent/job/agent-1.lock"),
	}
	kept := []string{
		filepath.Join(common, "index.lock"),                      // the user's checkout
		filepath.Join(common, "refs/heads/other.lock"),           // not the job's ref
		filepath.Join(common, "refs/heads/prodigy-agent/x.lock"), // outside the prefix
	}
	for _, p := range append(slices.Clone(stale), kept...) {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A lock taken after the cut-off belongs to a live process: kept.
	cut := time.Now()
	fresh := filepath.Join(admin, "HEAD.lock")
	if err := os.Chtimes(fresh, cut.Add(time.Second), cut.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	removed, err := c.RemoveStaleLocks([]string{wt, dir}, []string{"refs/heads/prodigy/job"}, []string{"refs/heads/prodigy-agent/job/"}, cut)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{stale[0], stale[2], stale[3]}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	for _, p := range append(kept, fresh) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed", p)
		}
	}
	if err := os.Remove(fresh); err != nil {
		t.Fatal(err)
	}
	// git can write the worktree's index and the job's refs again.
	git(t, wt, "update-index", "--refresh")
	git(t, dir, "update-ref", "refs/heads/prodigy/job", "HEAD")
	git(t, dir, "branch", "-D", "prodigy-agent/job/agent-1")
	if _, err := c.RemoveStaleLocks(nil, []string{"refs/../x"}, nil, cut); err == nil {
		t.Error("a ref with .. was accepted")
	}
}
